"""An output's values line, and what decides a decision output at fp32 and tf32 when float32
itself is not reproduced.

The values line gives the largest absolute and relative errors. At fp32 and tf32
(`Tolerance.exact_values`) it gates: every element of every sample within tolerance, an element
within when its error is at most the atol or at most rtol x |reference| (Polygraphy's
elementwise rule, tolerance.within_elements); at the lossy precisions it is reported and the
share of samples within decides (trtconv.outputs.judge).

float32 is not the same function on every machine: TensorFlow and another runtime sum in
another order, use other kernels (AVX2 or AVX-512, fused multiply-adds), and a model whose
outputs are sums of large terms that cancel (a sigmoid over logits of that kind) keeps the
rounding of the terms, not of the result. Where a decision output (classes, binary, class map,
decision map) or an embedding is beyond fp32's tolerance but finite, fp32 is not held to more
than fp16 is: the values line says so in one sentence and becomes a reported figure, and the
output's decisions (an embedding's cosine) judge it against the lossy budget (fp16's minimum
agreement and maximum drop, unless the user set them), with their intervals. A regression or
tensor output keeps the values rule (its values are what it gives), as does an output the user
gave a tolerance; NaN or Inf always fail.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from trtconv.core.judging_options import AGREEING, OutputRole
from trtconv.outputs.maps import rtol_words, sample_errors
from trtconv.outputs.tolerance import Tolerance, within_elements
from trtconv.outputs.validation_result import Check, WithinTolerance

log = logging.getLogger(__name__)

# Relative error divides by max(|reference|, REL_FLOOR): a probability of 1e-9 that becomes 2e-9
# is not a 100% error worth reporting.
REL_FLOOR = 1e-3
NOT_REPRODUCED = (
    "float32 is not reproduced between the two runtimes on this machine (a decision output: "
    "its decisions judge it, as at fp16)"
)
# Beyond what fp16 itself would round to, the difference is more than float32's order of
# operations; the rule is the same (never stricter than fp16), the sentence does not guess why.
BEYOND_FP16 = (
    "its values differ by more than fp32's and fp16's tolerances, finite (a decision output: "
    "its decisions judge it, as at fp16)"
)


def values_check(
    name: str,
    want: np.ndarray,
    got: np.ndarray,
    atol: float | None,
    exact: bool,
    rtol: float | None = None,
) -> tuple[Check, float, float]:
    """(the values line, max abs error, max rel error). `exact` (fp32, tf32): gating on every
    element when there is an atol, an element within at `atol` or at `rtol` x |reference|,
    saying how many samples exceeded it and by how much. Otherwise reported: the share of
    samples within decides. NaN/Inf in the converted output always gates."""
    want64, got64 = want.astype(np.float64), got.astype(np.float64)
    finite = bool(np.isfinite(got64).all())
    diff = np.abs(want64 - got64)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / np.maximum(np.abs(want64), REL_FLOOR)).max()) if diff.size else 0.0
    if atol is None:
        bound = "reported only"
    else:
        words = f"atol {atol:g}{rtol_words(rtol)}"
        bound = words if exact else f"{words}, judged per sample"
    detail = f"{bound_first(max_abs, bound)}, max rel error {max_rel:.3g}"
    if not finite:
        detail += ", NaN/Inf in the converted output"
    gating = (exact and atol is not None) or not finite
    judged = exact and atol is not None  # the lossy precisions judge the share of samples
    inside = not judged or bool(within_elements(want, got, atol or 0.0, rtol).all())
    passed = finite and inside
    if judged and not inside and len(want):
        detail += _exceeding(want, got, atol or 0.0, rtol)
    return Check(f"{name} values", passed, detail, name, gating), max_abs, max_rel


def bound_first(max_abs: float, bound: str) -> str:
    """'max abs error 0.0312 (atol 0.0001, rtol 1e-05)'."""
    return f"max abs error {max_abs:.3g} ({bound})"


def _exceeding(want: np.ndarray, got: np.ndarray, atol: float, rtol: float | None) -> str:
    """'; 3 of 200 samples exceed it, the worst: 17 (max abs error 0.12), ...': whether a
    conversion is broken (most samples) or one sample is numerically touchy."""
    found = sample_errors(want, got, atol, share=1.0, rtol=rtol)
    outside, samples = int(np.count_nonzero(~found.within)), len(found.indices)
    return f"; {outside} of {samples} samples exceed it, the worst: {found.worst_named()}"


def exact_within(
    want: np.ndarray, got: np.ndarray, atol: float, rtol: float | None
) -> WithinTolerance:
    """The samples every element of which lies within tolerance (the exact rule's figure)."""
    rate = sample_errors(want, got, atol, share=1.0, rtol=rtol).rate
    share = rate.value if rate.samples else 0.0
    return WithinTolerance(
        bound=atol,
        samples_within=int(rate.successes),
        samples=rate.samples,
        share=share,
        share_ci95=rate.interval(),
        minimum=None,
        gating=True,
        rtol=rtol,
    )


def not_reproduced(
    values: Check, role: OutputRole, want: np.ndarray, got: np.ndarray, tolerance: Tolerance
) -> bool:
    """True when `values` failed fp32's or tf32's every-element rule on a float decision
    output (or an embedding) whose converted values are finite and that the user gave no
    tolerance: its decisions (an embedding's cosine) judge it instead."""
    return (
        tolerance.exact_values
        and values.gating
        and not values.passed
        and role.role in AGREEING
        and np.issubdtype(want.dtype, np.floating)
        and not tolerance.stated_for(values.output or "")
        and bool(np.isfinite(got.astype(np.float64)).all())
    )


def as_not_reproduced(values: Check, max_abs: float, lossy: float | None) -> Check:
    """The values line as a reported figure, saying why (one sentence, logged once per output
    in a process: the export check and the validation meet the same output): float32 not
    reproduced while the error stays within `lossy` (fp16's atol, as the contract records it),
    else only that it is beyond both."""
    why = NOT_REPRODUCED if lossy is not None and max_abs <= lossy else BEYOND_FP16
    if values.output not in _SAID:
        _SAID.add(values.output or "")
        log.warning("%s: %s; %s", values.output, why, values.detail.split(";")[0])
    detail = f"{values.detail}; {why}"
    return replace(values, passed=True, detail=detail, gating=False)


_SAID: set[str] = set()
