"""The ladder's search slice and how a candidate scores on it.

The search slice never holds a sample that `convert` validates on or calibrates with. It is, in
this order of preference: held-out samples beyond the `--validate-samples` validated on (unseen
by training, like the validation samples); calibration-part samples beyond those calibrated on
(which the model may have trained on: agreement there can be higher than on held-out data); and
when neither has MIN_SEARCH_SAMPLES to spare, the calibration samples themselves.

A candidate is judged by the same checks as validation (trtconv.outputs.compare, with the
ladder's budget as the tolerance, and so the same rule: a rate meets its bound when its interval
clears it at the budget's confidence) against the float ONNX export run on the same samples, plus
a continuous output error that ranks candidates and nodes. A step whose interval straddles the
budget does not meet it. A slice too small to ever show the budget says so (`resolution_note`);
the ladder then stops at the first step not shown to miss it (`settles`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.calib.sources import ArraySet
from trtconv.onnxlib.session import OrtRunner
from trtconv.outputs.compare import TOP1, compare, run_batched
from trtconv.outputs.confidence import INCONCLUSIVE, percent, samples_to_show
from trtconv.outputs.tolerance import Tolerance
from trtconv.outputs.validation_result import ValidationReport
from trtconv.quantize.ladder_result import Budget, SearchData

# 512 samples show a 0.97 budget for a step agreeing 0.985 or more (95% Wilson interval).
SEARCH_SAMPLES = 512
# Held-out samples spare beyond those validated on score the ladder when there are this many: a
# step agreeing 0.99 shows a 0.97 budget on 290 (fewer could not show it for any step below 1).
MIN_SEARCH_SAMPLES = 300
# With point decisions (--confidence 0): fewer top-1 disagreements than this within the budget,
# and a step's verdict on the slice is mostly chance: one flipped sample decides it.
MIN_RESOLVED_DISAGREEMENTS = 3
HELD_OUT_SPARE = "held-out samples beyond those validated on"
CALIBRATION_SPARE = "calibration-part samples beyond those calibrated on (maybe trained on)"
CALIBRATION_SAMPLES = "the calibration samples themselves (no spare data)"


@dataclass
class DataSplit:
    """Calibration, validation and search samples, pairwise disjoint except as `drawn_from`
    says (CALIBRATION_SAMPLES)."""

    calibration: ArraySet
    held_out: ArraySet
    search: ArraySet
    drawn_from: str


def split_for_search(
    calibration_part: ArraySet, calib_samples: int, held_out_part: ArraySet, validate_samples: int
) -> DataSplit:
    """The first `calib_samples` of the calibration part calibrate, the first `validate_samples`
    of the held-out part validate, and up to SEARCH_SAMPLES spare ones score the ladder."""
    calibration = calibration_part.head(calib_samples)
    held_out = held_out_part.head(validate_samples)
    for part, used, drawn_from in (
        (held_out_part, len(held_out), HELD_OUT_SPARE),
        (calibration_part, len(calibration), CALIBRATION_SPARE),
    ):
        spare = len(part) - used
        if spare >= MIN_SEARCH_SAMPLES:
            stop = used + min(spare, SEARCH_SAMPLES)
            search = part.take(np.arange(used, stop))
            search.source = f"{part.source}[{used}:{stop}]"
            return DataSplit(calibration, held_out, search, drawn_from)
    return DataSplit(calibration, held_out, calibration.head(SEARCH_SAMPLES), CALIBRATION_SAMPLES)


def resolution_note(samples: int, tolerance: Tolerance, checked: str | None = TOP1) -> str | None:
    """A caveat when `samples` cannot resolve the agreement budget, else None: at a confidence,
    when even every sample agreeing leaves the interval below the minimum; with point
    decisions, when the budget allows fewer than MIN_RESOLVED_DISAGREEMENTS disagreements.
    `checked` says what the outputs' rate checks measure (compare.rate_words); None: no output
    has one, and there is nothing to say."""
    minimum, confidence = tolerance.min_top1_agreement, tolerance.confidence
    if checked is None:
        return None
    if confidence > 0:
        if not unshowable(samples, tolerance):
            return None
        fewest = samples_to_show(minimum, confidence)
        can = f"at least {fewest} samples can" if fewest else "no sample count can"
        return (
            f"{samples} search samples cannot show {checked} of {minimum:g} at "
            f"{percent(confidence)} confidence ({can}): no step can meet the budget there, so "
            "the ladder keeps the first step not shown to miss it (held-out samples beyond "
            "--validate-samples, or more data, resolve it)"
        )
    allowed = (1.0 - minimum) * samples
    if allowed >= MIN_RESOLVED_DISAGREEMENTS:
        return None
    short = "top-1 disagreements at agreement >= "
    if checked != TOP1:
        short = f"samples short at {checked.removeprefix('a ')} >= "
    return (
        f"{samples} search samples allow {allowed:.1f} {short}{minimum:g}: a step's verdict "
        "there is close to chance (held-out samples "
        "beyond --validate-samples, or more data, resolve it)"
    )


def unshowable(samples: int, tolerance: Tolerance) -> bool:
    """True when `samples` can never show the tolerance's minimum agreement at its confidence
    (False with point decisions)."""
    if tolerance.confidence <= 0:
        return False
    fewest = samples_to_show(tolerance.min_top1_agreement, tolerance.confidence)
    return fewest is None or samples < fewest


def budget_and_search_data(
    tolerance: Tolerance, data: ArraySet, drawn_from: str, note: str | None, reference: str
) -> tuple[Budget, SearchData]:
    """The budget and search data of a ladder record: what it aimed for, and where
    (`reference`: what the candidates were compared with)."""
    budget = Budget(tolerance.min_top1_agreement, tolerance.max_accuracy_drop, tolerance.atol)
    return budget, SearchData(data.source, len(data), drawn_from, note, reference)


@dataclass
class Score:
    """A candidate on the search slice: what validation would judge (its verdict: passed,
    failed, inconclusive or not judged), and the output error."""

    top1_agreement: float | None
    accuracy: float | None
    accuracy_drop: float | None
    output_error: float
    passed: bool
    verdict: str = ""
    # Outputs no check could judge (a tensor with no tolerance): the ladder cannot climb on them.
    unjudged: tuple[str, ...] = ()
    judged: bool = True  # some output has a gating check
    # The check that decides the step, in words (step_words): what the log names.
    deciding: str = ""

    def key(self) -> tuple[bool, bool, float, float]:
        """Sort key, best last: meets the budget, then not shown to miss it, then agreement,
        then smaller output error."""
        undecided = self.verdict == INCONCLUSIVE
        return (self.passed, undecided, self.top1_agreement or 0.0, -self.output_error)


def step_words(report: ValidationReport) -> str:
    """The check that decides a step, in words: the first gating check that is not passed
    ('bbox within tolerance: 0.412 (0.35-0.47, n=200; minimum 0.97) of samples ...'), else
    the gating check of the lowest rate; '' when nothing gates."""
    gating = [check for check in report.checks if check.gating]
    short = [check for check in gating if not check.passed]
    if short:
        return f"{short[0].name}: {short[0].detail}"
    rated = [
        (output.agreement, name)
        for name, output in report.outputs.items()
        if output.judged and output.agreement is not None
    ]
    if rated:
        lowest = min(rated)[1]
        deciding = [
            check
            for check in gating
            if check.output == lowest and not check.name.endswith(" values")
        ]
        if deciding:
            return f"{deciding[0].name}: {deciding[0].detail}"
    return f"{gating[0].name}: {gating[0].detail}" if gating else ""


def settles(score: Score, unshowable_slice: bool) -> bool:
    """Whether the ladder stops at this step: it meets the budget, or the slice can never show
    the budget (`unshowable_slice`) and the step is not shown to miss it (inconclusive)."""
    return score.passed or (unshowable_slice and score.verdict == INCONCLUSIVE)


def output_error(reference: dict[str, np.ndarray], candidate: dict[str, np.ndarray]) -> float:
    """Squared error relative to the reference's energy, summed over outputs (0 = identical)."""
    total = 0.0
    for name, want in reference.items():
        want64 = want.astype(np.float64)
        diff = candidate[name].astype(np.float64) - want64
        total += float((diff**2).sum() / max(float((want64**2).sum()), 1e-12))
    return total


class SearchScorer:
    """Runs candidate ONNX models on the search slice and compares them with the float model."""

    def __init__(
        self,
        float_model: Path,
        data: ArraySet,
        tolerance: Tolerance,
        roles: dict[str, Any] | None = None,
    ) -> None:
        self.data = data
        self.tolerance = tolerance
        self.reference = run_onnx(float_model, data)
        self.roles = roles

    def score(self, model: Path, samples: int | None = None) -> Score:
        """The candidate's Score on the first `samples` of the slice (all by default)."""

        data = self.data if samples is None else self.data.head(samples)
        reference = {name: array[: len(data)] for name, array in self.reference.items()}
        candidate = run_onnx(model, data)
        # Outputs nothing can judge do not decide a step (no step changes that): the budget is
        # what the judged outputs meet; validation still says "not judged" for the others.
        report = compare(
            reference,
            candidate,
            self.tolerance,
            data.labels,
            data.source,
            self.roles,
            True,
            data.inputs,
        )
        return Score(
            top1_agreement=report.top1_agreement,
            accuracy=report.accuracy_candidate,
            accuracy_drop=report.accuracy_drop,
            output_error=output_error(reference, candidate),
            passed=report.passed,
            verdict=report.verdict,
            unjudged=tuple(report.unjudged),
            judged=any(output.judged for output in report.outputs.values()),
            deciding=step_words(report),
        )

    def error(self, model: Path, samples: int) -> float:
        """The candidate's output error on the first `samples` of the slice (what a
        sensitivity probe ranks by: no verdict, no intervals)."""
        data = self.data.head(samples)
        reference = {name: array[: len(data)] for name, array in self.reference.items()}
        return output_error(reference, run_onnx(model, data))


def run_onnx(model: Path, data: ArraySet) -> dict[str, np.ndarray]:
    """Outputs of an ONNX model on every sample of `data` (ORT CPU)."""

    with OrtRunner(model) as runner:  # the CPU provider
        return run_batched(runner, data)
