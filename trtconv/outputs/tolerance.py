"""What each precision must meet by default: one table of tolerances (Optimum's
ATOL_FOR_VALIDATION, per precision), the `Tolerance` type the comparison reads, and the one
element test every values rule uses (`within_elements`: atol or rtol, as Polygraphy's
elementwise comparison). The rules an artifact is judged by are resolved from this table, the
user's options and the artifact's manifest in one place: trtconv.outputs.contract."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from trtconv.options.shared import DEFAULT_CONFIDENCE

# An output is compared at its own resolution: a float16 output (Keras mixed_float16 without a
# float32 last layer) differs by a few float16 steps wherever the two runtimes round in another
# order. Its atol is at least RESOLUTION_STEPS steps of its dtype at its largest magnitude:
# RESOLUTION_STEPS x eps(dtype) x max|reference| (float16's eps is 2^-10, bfloat16's 2^-7).
RESOLUTION_STEPS = 4
LOW_PRECISION_EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}
# An embedding is judged by the direction of its vectors: a sample agrees when the cosine
# similarity of its converted and native vectors reaches MIN_COSINE (retrieval by nearest
# neighbours keeps its ranking there). One bound at every precision: the lossy ones are judged by
# it; fp32 and tf32 by their values, the cosine reported beside them and gating only where
# float32 is not reproduced (trtconv.outputs.values), never held to more than fp16 is.
MIN_COSINE = 0.99


@dataclass(frozen=True)
class Tolerance:
    """What a precision must meet. `atol=None`: max abs error is reported, not judged. `rtol`:
    an element is also within when its error is at most rtol x |reference| (None: absolute
    only); `output_rtol` gives some outputs their own (--tolerance NAME=ATOL,RTOL).
    `output_atol` gives some outputs their own atol (--tolerance NAME=X), `output_min_within`
    the share of samples that must lie within it (--tolerance NAME=X:MIN; else the budget's
    minimum rate). `confidence`: the level of the interval a rate's verdict is decided by (0:
    the point rule). `values_decide`: the values (every element within atol on every sample)
    decide, and the decision rates are reported beside them (fp32, tf32:
    trtconv.outputs.exact). `exact_values`: every element within atol on every sample is the
    values rule (fp32, tf32, whether or not their rates gate too); otherwise values are judged
    per sample, as a rate (trtconv.outputs.judge). `atol_stated`: the user gave the atol for
    every output (--tolerance X). `min_cosine`: the cosine similarity an embedding's sample
    (each of its valid tokens, for a sequence of vectors) must reach to count as agreeing
    (`--output-role NAME=embedding:COSINE` sets an output's own)."""

    atol: float | None
    min_top1_agreement: float
    max_accuracy_drop: float
    output_atol: Mapping[str, float] = field(default_factory=dict)
    confidence: float = DEFAULT_CONFIDENCE
    values_decide: bool = False
    output_min_within: Mapping[str, float] = field(default_factory=dict)
    atol_stated: bool = False
    exact_values: bool = False
    rtol: float | None = None
    output_rtol: Mapping[str, float] = field(default_factory=dict)
    min_cosine: float = MIN_COSINE
    # Set by the contract (trtconv.outputs.contract): what a decision output's decisions meet
    # at fp32 and tf32 when float32 is not reproduced (None: this tolerance's own limits), and
    # the atol within which an error is called float32's order of operations.
    fallback_min_top1_agreement: float | None = None
    fallback_max_accuracy_drop: float | None = None
    lossy_atol: float | None = None

    def for_decisions(self) -> Tolerance:
        """What a decision output's decisions meet when they judge it at fp32 or tf32 (the
        contract's fallback budget)."""
        return replace(
            self,
            min_top1_agreement=_given(self.fallback_min_top1_agreement, self.min_top1_agreement),
            max_accuracy_drop=_given(self.fallback_max_accuracy_drop, self.max_accuracy_drop),
        )

    def atol_for(self, output: str) -> float | None:
        """The absolute tolerance of `output`: its own, else the precision's."""
        return self.output_atol.get(output, self.atol)

    def rtol_for(self, output: str) -> float | None:
        """The relative tolerance of `output`: its own, else the precision's (None: none)."""
        return self.output_rtol.get(output, self.rtol)

    def stated_for(self, output: str) -> bool:
        """True when the user gave `output` a tolerance (--tolerance X[,R] or NAME=X[,R]): its
        values then gate even where its decisions would judge it."""
        return output in self.output_atol or (self.atol_stated and self.atol is not None)

    def min_within_for(self, output: str) -> float:
        """The share of samples of `output` that must lie within its tolerance: its own
        (--tolerance NAME=X:MIN), else the budget's minimum rate."""
        return self.output_min_within.get(output, self.min_top1_agreement)


# The one table (Optimum's ATOL_FOR_VALIDATION, per precision). fp32 is near-exact (only operator
# order differs); tf32 keeps a 10-bit mantissa; fp16 too, with a smaller range; int8 changes the
# numbers on purpose and is judged by what the model decides, not by the digits it prints.
# fp32 and tf32 are decided by their values, as Polygraphy and trtexec decide them: a rate
# bound of 0.99 would need 381 samples whatever the error (docs/verdicts.md).
# Their element test is Polygraphy's: within atol OR within rtol x |reference|, so an output in
# physical units (prices of 2.5e5, logits in the hundreds) is not failed by float32 rounding
# (one or two units in the last place: relative errors of 1e-7). fp32's rtol is Polygraphy's
# default, 1e-5; tf32's is one step of its 10-bit mantissa. The lossy precisions keep an
# absolute bound by default (their atols suit values of order 1); --tolerance NAME=ATOL,RTOL
# adds a relative one.
FP32_RTOL = 1e-5
TF32_RTOL = 2.0**-10
TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(
        atol=1e-4,
        min_top1_agreement=0.99,
        max_accuracy_drop=0.005,
        values_decide=True,
        exact_values=True,
        rtol=FP32_RTOL,
        min_cosine=MIN_COSINE,
    ),
    "tf32": Tolerance(
        atol=5e-3,
        min_top1_agreement=0.99,
        max_accuracy_drop=0.01,
        values_decide=True,
        exact_values=True,
        rtol=TF32_RTOL,
        min_cosine=MIN_COSINE,
    ),
    "fp16": Tolerance(
        atol=1e-2, min_top1_agreement=0.98, max_accuracy_drop=0.01, min_cosine=MIN_COSINE
    ),
    # bfloat16 keeps 8 bits of mantissa to float16's 11: 4x fp16's atol (a small ResNet's
    # probabilities moved by 0.013 on OpenVINO's CPU plugin, fp16 0.0016).
    # bf16's cosine bound is fp16's: 8 bits of mantissa move a vector's direction by about
    # 1 - cos = e^2/2 for a relative error e of a few 2^-8, far inside 0.99.
    "bf16": Tolerance(
        atol=5e-2, min_top1_agreement=0.98, max_accuracy_drop=0.01, min_cosine=MIN_COSINE
    ),
    "int8": Tolerance(
        atol=None, min_top1_agreement=0.97, max_accuracy_drop=0.02, min_cosine=MIN_COSINE
    ),
}


def _given(value: float | None, otherwise: float) -> float:
    return otherwise if value is None else value


def within_elements(
    want: np.ndarray, got: np.ndarray, atol: float, rtol: float | None = None
) -> np.ndarray:
    """Per element, whether `got` lies within tolerance of `want`: its error at most `atol`, or
    at most `rtol` x |want| (Polygraphy's elementwise rule: a mismatch exceeds both). NaN and
    infinities are never within."""
    want64, got64 = want.astype(np.float64), got.astype(np.float64)
    with np.errstate(invalid="ignore"):
        errors = np.abs(got64 - want64)
        allowed = np.maximum(atol, (rtol or 0.0) * np.abs(want64))
        return np.asarray(errors <= allowed)


def resolution_atol(reference: np.ndarray) -> float | None:
    """The smallest atol `reference`'s dtype can resolve (RESOLUTION_STEPS of its steps at its
    largest magnitude); None for float32/float64 outputs, which the table's atol fits."""
    eps = LOW_PRECISION_EPS.get(reference.dtype.name)
    values = np.abs(reference.astype(np.float64))
    values = values[np.isfinite(values)]
    if eps is None or not values.size:
        return None
    return RESOLUTION_STEPS * eps * float(values.max())
