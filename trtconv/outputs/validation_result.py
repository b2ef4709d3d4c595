"""The validation report: every check of a converted model against its native one, typed.

Serialised once, by `to_json`, into the `validation` block of convert's result, the manifest and
validate's result (README documents the keys), and read back by `from_json`. Derived figures
(`accuracy_drop`, `top1_agreement`, `verdict`, `passed`, `unjudged`) are computed from the
measured ones, never stored beside them: `to_json` writes them, `from_json` recomputes them.

Each output is judged by its role (trtconv.outputs.roles); its checks are listed with it. A
check either gates the verdict or is reported only. A rate's check (agreement, accuracy drop,
share within tolerance) is decided by its interval at `confidence` (trtconv.outputs.confidence):
passed, failed, or inconclusive when the interval straddles the bound. The verdict is "failed"
when a gating check failed, "inconclusive" when one could not be decided on these samples, "not
judged" when some output has no gating check (nothing says whether it is right), else "passed";
`passed` (exit 0) accepts "not judged" only when the caller allowed it.

Every rate carries its 95% interval beside it, one naming scheme: `<figure>_ci95: [low, high]`
(`top1_agreement_ci95`, `accuracy_drop_ci95`, per output `agreement_ci95`, ...), over the
report's `samples`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trtconv.core.judging_options import AGREEING, OutputRole
from trtconv.core.results import JsonResult, optional_key, to_jsonable
from trtconv.outputs.confidence import FAILED, INCONCLUSIVE, PASSED, Interval

NOT_JUDGED = "not judged"
__all__ = ["FAILED", "INCONCLUSIVE", "NOT_JUDGED", "PASSED"]


@dataclass(frozen=True)
class Check:
    """One line of a verdict: what was checked, whether it passed, the figures that decided.

    `gating` False: it never decides the verdict; a reported figure (`passed` True) or the
    reason its output was not judged (`passed` False). `inconclusive`: not passed, not failed
    either: the figure's interval straddles its bound.
    """

    name: str
    passed: bool
    detail: str
    output: str | None = None
    gating: bool = True
    inconclusive: bool = False


def as_reported(check: Check, why: str) -> Check:
    """A rate check as a reported figure: its detail kept, `why` it does not decide, and the
    verdict it would have had as a gate. The samples an undecided rate would need are no
    request here: nothing waits on them."""
    would = "inconclusive" if check.inconclusive else "passed" if check.passed else "failed"
    figure = check.detail.split("; inconclusive:")[0]
    detail = f"{figure} (reported: {why}; as a gate: {would})"
    return Check(check.name, True, detail, check.output, gating=False)


@dataclass(frozen=True)
class WithinTolerance:
    """How many samples of an output lie within its tolerance (`bound`: its atol, or a share
    of the reference's spread; `rtol`: a value is also within at rtol x |reference|), with the
    95% interval of their share. `minimum`: the share that must (None: every element of every
    sample must, the exact rule of fp32 and tf32). `gating` False: reported beside the
    decisions that judge the output."""

    bound: float
    samples_within: int
    samples: int
    share: float
    share_ci95: Interval | None
    minimum: float | None
    gating: bool
    rtol: float | None = None


@dataclass(frozen=True)
class OutputComparison:
    """One output: its role and where the role came from, its errors against the reference
    (None when the shapes differ), and what its role's checks measured."""

    max_abs_error: float | None
    max_rel_error: float | None
    atol: float | None
    passed: bool  # every gating check of this output passed
    shape_matches: bool
    role: str = "tensor"
    role_source: str = ""
    judged: bool = False  # at least one gating check ran on it
    # classes: top-1 agreement; binary: decision agreement; regression: samples within tolerance;
    # embedding: samples whose cosine reaches `threshold`
    agreement: float | None = None
    accuracy_reference: float | None = None
    accuracy_candidate: float | None = None
    threshold: float | None = None  # binary: the decision threshold; embedding: the cosine bound
    tolerance: float | None = None  # regression: the per-sample error bound
    # The 95% intervals of the figures above (None where the figure is).
    agreement_ci95: Interval | None = None
    accuracy_reference_ci95: Interval | None = None
    accuracy_candidate_ci95: Interval | None = None
    accuracy_drop_ci95: Interval | None = None
    # The samples whose values lie within the output's tolerance (None: it has none).
    within: WithinTolerance | None = None
    # Its relative tolerance: a value is within at atol or at rtol x |reference| (None: none).
    rtol: float | None = None
    # fp32, tf32: its values were beyond tolerance but finite, so float32 is not reproduced
    # here and its decisions judged it (at `agreement_minimum`) as at fp16.
    values_not_reproduced: bool = False
    # The minimum its decisions' rate was judged against when it is not the report's.
    agreement_minimum: float | None = None
    # The samples its agreement counts when not the report's (a sequence's samples with no
    # valid token are not counted).
    agreement_samples: int | None = optional_key()


@dataclass(frozen=True)
class ValidatingMachine:
    """The CPU a validation ran on, and its int8 class: int8 verdicts hold per CPU class."""

    cpu: str
    cpu_int8_class: str


# Keys of the `validation` block present only when set (validate and convert set them all).
RUN_KEYS = ("precision", "machine", "batch_size", "device")


@dataclass
class ValidationReport(JsonResult):
    """All checks of one comparison, plus the bounds they were judged by and the confidence
    (0: point decisions; reports written before intervals read back as 0)."""

    samples: int
    data_source: str
    min_top1_agreement: float
    max_accuracy_drop: float
    outputs: dict[str, OutputComparison] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    labels_output: str | None = None  # the output the labels were scored on
    allow_unjudged: bool = False
    confidence: float = 0.0
    # RUN_KEYS: in the JSON only when set.
    precision: str | None = None
    machine: ValidatingMachine | None = None
    batch_size: int | None = None  # the converted model's batches (inside its engines' profile)
    device: str | None = None  # where the converted model ran: cpu, cuda or tensorrt

    def _deciding(self) -> OutputComparison | None:
        """The deciding output (class scores, binary scores, an embedding by its cosine) that
        agrees least; None if none."""
        found = [o for o in self.outputs.values() if o.role in AGREEING and o.agreement is not None]
        return min(found, key=lambda o: o.agreement or 0.0) if found else None

    @property
    def top1_agreement(self) -> float | None:
        """The lowest decision agreement (top-1 of class scores, thresholded binary scores, the
        share of an embedding's samples reaching its cosine bound) over the outputs judged by
        their agreement; None when none is."""
        deciding = self._deciding()
        return deciding.agreement if deciding else None

    @property
    def top1_agreement_ci95(self) -> Interval | None:
        """The 95% interval of `top1_agreement` (its output's)."""
        deciding = self._deciding()
        return deciding.agreement_ci95 if deciding else None

    @property
    def accuracy_reference(self) -> float | None:
        """The native model's accuracy on the labels (None without labels)."""
        labelled = self.outputs.get(self.labels_output or "")
        return labelled.accuracy_reference if labelled else None

    @property
    def accuracy_candidate(self) -> float | None:
        """The converted model's accuracy on the labels (None without labels)."""
        labelled = self.outputs.get(self.labels_output or "")
        return labelled.accuracy_candidate if labelled else None

    def _labelled_interval(self, figure: str) -> Interval | None:
        labelled = self.outputs.get(self.labels_output or "")
        return getattr(labelled, f"{figure}_ci95") if labelled else None

    @property
    def accuracy_drop_ci95(self) -> Interval | None:
        """The 95% interval of `accuracy_drop` (None without labels)."""
        return self._labelled_interval("accuracy_drop")

    @property
    def accuracy_drop(self) -> float | None:
        """Reference accuracy minus converted accuracy (None without labels)."""
        if self.accuracy_reference is None or self.accuracy_candidate is None:
            return None
        return self.accuracy_reference - self.accuracy_candidate

    @property
    def unjudged(self) -> list[str]:
        """Outputs without a gating check."""
        return [name for name, output in self.outputs.items() if not output.judged]

    @property
    def verdict(self) -> str:
        """ "failed" (a gating check failed), "inconclusive" (a gating check could not be
        decided on these samples), "not judged" (an output has no gating check, or nothing was
        compared), else "passed"."""
        short = [check for check in self.checks if check.gating and not check.passed]
        if any(not check.inconclusive for check in short):
            return FAILED
        if short:
            return INCONCLUSIVE
        if self.unjudged or not self.outputs:
            return NOT_JUDGED
        return PASSED

    @property
    def passed(self) -> bool:
        """True for "passed", and for "not judged" when the caller allowed unjudged outputs."""
        verdict = self.verdict
        return verdict == PASSED or (
            verdict == NOT_JUDGED and self.allow_unjudged and bool(self.outputs)
        )

    def failure_lines(self) -> list[str]:
        """'name: detail' of every failed gating check and every unjudged output, one each."""
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.passed] or [
            "no output was compared"
        ]

    def failures(self) -> str:
        """'name: detail; ...' of every failed gating check and every unjudged output."""
        return "; ".join(self.failure_lines())

    def to_json(self) -> dict[str, Any]:
        """The JSON `validation` block: the measured figures, then the derived ones (each with
        its 95% interval) beside the bounds they are judged by and the confidence they were
        decided at, then the run's precision, machine, batch size and device when set."""
        data: dict[str, Any] = {
            "samples": self.samples,
            "data_source": self.data_source,
            "outputs": to_jsonable(self.outputs),
            "top1_agreement": self.top1_agreement,
            "top1_agreement_ci95": to_jsonable(self.top1_agreement_ci95),
            "min_top1_agreement": self.min_top1_agreement,
            "accuracy_reference": self.accuracy_reference,
            "accuracy_reference_ci95": to_jsonable(self._labelled_interval("accuracy_reference")),
            "accuracy_candidate": self.accuracy_candidate,
            "accuracy_candidate_ci95": to_jsonable(self._labelled_interval("accuracy_candidate")),
            "accuracy_drop": self.accuracy_drop,
            "accuracy_drop_ci95": to_jsonable(self._labelled_interval("accuracy_drop")),
            "max_accuracy_drop": self.max_accuracy_drop,
            "labels_output": self.labels_output,
            "checks": to_jsonable(self.checks),
            "unjudged": self.unjudged,
            "allow_unjudged": self.allow_unjudged,
            "confidence": self.confidence,
            "verdict": self.verdict,
            "passed": self.passed,
        }
        for key in RUN_KEYS:
            if getattr(self, key) is not None:
                data[key] = to_jsonable(getattr(self, key))
        return data


def roles_of(
    report: ValidationReport, gates: Mapping[str, OutputRole] | None = None
) -> dict[str, OutputRole]:
    """Each output's role as the report judged it: {name: OutputRole}, with the score output
    that gated it (`where`) and the input that marked its tokens (`mask`) taken from `gates`
    (the roles judged by), which the report does not carry."""
    gates = gates or {}
    return {
        name: OutputRole(
            output.role,
            output.role_source,
            output.threshold,
            where=gates[name].where if name in gates else None,
            mask=gates[name].mask if name in gates else None,
        )
        for name, output in report.outputs.items()
    }
