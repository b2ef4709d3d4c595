"""fp32 and tf32 are decided by their values, as Polygraphy and trtexec decide them.

A conversion that computes the same function in the same precision can go wrong in one way: its
values move (a wrong op, a bad fusion, a lost layer). That shows on every sample as an error past
the tolerance, so "every element of every sample within atol" decides it on any number of
samples, where a rate bound (top-1 agreement 0.99) would need 381 agreeing samples whatever the
error. The decision rates are still measured and reported with their intervals; they do not
gate. Where a sample's decision could flip within the measured error (the reference's margin
between its two top classes is at most twice the sample's largest error), the sample is named:
such a flip is a near-tie, not a defect. A defect that touches only some inputs is bounded by the
sample count: every one of n samples within tolerance shows at 95% that fewer than 5% of inputs
exceed it once n >= 59 (below that the values check is inconclusive). An element is within at
the atol or at rtol x |reference| (tolerance.within_elements). See docs/verdicts.md.

An output without a gating values check (integer class ids with no tolerance of their own)
keeps its rate checks gating: nothing else would judge it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from trtconv.core.judging_options import CLASSES, OutputRole
from trtconv.outputs.confidence import samples_needed
from trtconv.outputs.judge import Judgement
from trtconv.outputs.tolerance import Tolerance
from trtconv.outputs.validation_result import Check, ValidationReport, as_reported

# Samples named at most in a margin line (the count is always given).
NAMED_SAMPLES = 10
REPORTED = "this precision is decided by its values"
# The values rule on few samples: all of them within tolerance must show, at the verdict's
# confidence, that fewer than this share of inputs exceed it (the success-run bound).
OUT_OF_TOLERANCE = 0.05


def values_decide(
    judgement: Judgement,
    role: OutputRole,
    want: np.ndarray,
    got: np.ndarray,
    tolerance: Tolerance,
) -> Judgement:
    """`judgement` as a precision decided by values judges it: with a gating values check, the
    rate checks become reported figures and a classes output gains its margin line. Unchanged
    when the tolerance's rates gate or the output has no gating values check."""
    if not tolerance.values_decide:
        return judgement
    values = [c for c in judgement.checks if c.gating and c.name.endswith(" values")]
    if not values or want.shape != got.shape:
        return judgement
    shown = _shown(values[0], len(want), tolerance.confidence)
    checks = [
        shown if check in values else check if not check.gating else as_reported(check, REPORTED)
        for check in judgement.checks
    ]
    margin = margin_check(values[0].output or "", role, want, got)
    if margin is not None:
        checks.append(margin)
    passed = all(check.passed for check in checks if check.gating)
    return Judgement(replace(judgement.comparison, passed=passed), checks)


def samples_for_values(confidence: float) -> int:
    """The fewest samples, all within tolerance, that show at `confidence` that fewer than
    OUT_OF_TOLERANCE of inputs exceed it: n with (1 - p)^n <= 1 - confidence (59 at 95%; 1
    with point decisions)."""
    if confidence <= 0:
        return 1
    return math.ceil(math.log(1 - confidence) / math.log(1 - OUT_OF_TOLERANCE))


def _shown(values: Check, samples: int, confidence: float) -> Check:
    """The values check, inconclusive when it passed on too few samples to show anything."""
    needed = samples_for_values(confidence)
    if not values.passed or samples >= needed:
        return values
    detail = (
        f"{values.detail}; inconclusive: every one of {samples} samples is within tolerance, "
        f"and {needed} would show at {confidence:.0%} confidence that fewer than "
        f"{OUT_OF_TOLERANCE:.0%} of inputs exceed it"
    )
    return replace(values, passed=False, detail=detail, inconclusive=True)


def margin_check(name: str, role: OutputRole, want: np.ndarray, got: np.ndarray) -> Check | None:
    """The samples of a classes output whose reference margin (top class minus runner-up) is
    at most twice their largest error: the only ones whose decision the error can flip. None
    for other roles and shapes."""
    if role.role != CLASSES or want.ndim != 2 or want.shape[1] < 2:
        return None
    if not np.issubdtype(want.dtype, np.floating) or not len(want):
        return None
    reference = want.astype(np.float64)
    top2 = np.sort(reference, axis=1)[:, -2:]
    margins = top2[:, 1] - top2[:, 0]
    errors = np.abs(got.astype(np.float64) - reference).max(axis=1)
    close = np.flatnonzero(margins <= 2 * errors)
    smallest = int(np.argmin(margins))
    if not close.size:
        detail = (
            f"no sample's top-2 margin is within twice its error (smallest margin "
            f"{margins[smallest]:.3g} at sample {smallest}, its error {errors[smallest]:.3g})"
        )
    else:
        named = ", ".join(
            f"{i} (margin {margins[i]:.3g}, error {errors[i]:.3g})" for i in close[:NAMED_SAMPLES]
        )
        more = f" and {close.size - NAMED_SAMPLES} more" if close.size > NAMED_SAMPLES else ""
        detail = (
            f"{close.size} sample(s) whose top-2 margin is within twice their error, where the "
            f"decision can flip on a near-tie: {named}{more}"
        )
    return Check(f"{name} margins", True, detail, name, gating=False)


def samples_to_decide(report: ValidationReport) -> int | None:
    """About how many samples would decide an inconclusive `report`: the most any of its
    undecided checks needs (a rate at the rate measured; the values rule its success run).
    None when it is not inconclusive or no count would decide it."""
    if report.verdict != "inconclusive":
        return None
    confidence, needed = report.confidence, []
    for check in report.checks:
        if not (check.gating and check.inconclusive):
            continue
        if check.name.endswith(" values"):
            needed.append(samples_for_values(confidence))
            continue
        rates = ("agreement", "within tolerance", "cosine")  # an embedding's: "NAME cosine >= B"
        if not any(words in check.name for words in rates):
            continue  # an accuracy drop: its own line says what would decide it
        output = report.outputs.get(check.output or "")
        within = output.within if output is not None else None
        if "within tolerance" in check.name and within is not None and within.minimum:
            count = samples_needed(within.share, within.minimum, confidence)
            needed.append(count if count is not None else 0)
        elif output is not None and output.agreement is not None:
            # its own minimum when its decisions judged it at fp32 (float32 not reproduced)
            minimum = output.agreement_minimum or report.min_top1_agreement
            count = samples_needed(output.agreement, minimum, confidence)
            needed.append(count if count is not None else 0)
    return max(needed) or None if needed else None
