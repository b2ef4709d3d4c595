"""What a decision output is judged by: the decisions themselves (top-1 class, the score
above its threshold, a class map's class per element), their agreement with the native model's
and, with labels, the accuracy drop, each a rate over samples with its interval decided at the
tolerance's confidence (trtconv.outputs.confidence). A class map of a text model counts only
its valid tokens (trtconv.outputs.tokens): per sample, the share of them whose top-1 agrees.

The rate checks here (`rate_check`, `map_check`) are what every rate of trtconv.outputs.judge
is decided by.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import BINARY, CLASS_MAP, CLASSES, OutputRole
from trtconv.outputs.confidence import (
    CI95,
    INCONCLUSIVE,
    PASSED,
    Rate,
    at_most,
    difference_samples_needed,
    interval_text,
    paired_difference_interval,
    percent,
    samples_needed,
)
from trtconv.outputs.maps import MapRate
from trtconv.outputs.tokens import sample_shares
from trtconv.outputs.validation_result import Check

if TYPE_CHECKING:
    from trtconv.outputs.tolerance import Tolerance


def decisions(name: str, role: OutputRole, scores: np.ndarray) -> np.ndarray | None:
    """What output `name` decides per sample: the top-1 class (classes role), the score above
    its threshold (binary); None for a role that decides nothing."""
    if role.role == CLASSES:
        return _class_ids(name, scores)
    if role.role == CLASS_MAP:
        return scores.argmax(axis=-1)  # the class of every element of the map
    if role.role == BINARY:
        return scores > threshold_of(role)
    return None


def threshold_of(role: OutputRole) -> float:
    return role.threshold if role.threshold is not None else 0.5


def decision_words(role: OutputRole) -> str:
    if role.role == CLASSES:
        return "top-1 agreement"
    if role.role == CLASS_MAP:
        return "per-element top-1 agreement"
    return f"decision agreement at {threshold_of(role):g}"


def _class_ids(name: str, scores: np.ndarray) -> np.ndarray:
    """Top-1 class per sample: argmax of [batch, classes] scores, or integer ids as they are."""
    per_sample = scores.reshape(len(scores), -1).shape[1]
    if not np.issubdtype(scores.dtype, np.floating):
        # Integer labels as they are, one per element (one per sample for class ids).
        return scores.reshape(len(scores)) if per_sample == 1 else scores
    if scores.ndim == 2 and scores.shape[1] > 1:
        return scores.argmax(axis=1)
    raise UsageError(
        f"Output '{name}' has shape [batch, {', '.join(map(str, scores.shape[1:]))}]: the "
        "classes role needs [batch, classes > 1] scores or integer class ids (one score per "
        "sample is --output-role NAME=binary)."
    )


def decision_checks(
    name: str,
    want: np.ndarray,
    got: np.ndarray,
    tolerance: Tolerance,
    labels: np.ndarray | None,
    what: str,
    figures: dict[str, Any],
    valid: np.ndarray | None = None,
) -> list[Check]:
    """Agreement of the decisions and, with labels, the accuracy drop; a class map's over the
    positions `valid` marks (a `[batch, seq]` mask; None: all), with the words saying how many
    tokens that is."""
    agreement = _rate(want == got, valid)
    figures["agreement"], figures["agreement_ci95"] = agreement.value, agreement.interval()
    figures["agreement_samples"] = agreement.samples
    counted = "" if valid is None else tokens_words(valid)
    checks = [rate_check(f"{name} {what}", name, agreement, counted, tolerance)]
    if labels is None:
        return checks
    truth = labels.reshape(want.shape)
    right = {"reference": want == truth, "candidate": got == truth}
    for model, correct in right.items():
        rate = _rate(correct, valid)
        figures[f"accuracy_{model}"] = rate.value
        figures[f"accuracy_{model}_ci95"] = rate.interval()
    # The drop's bootstrap resamples samples, not elements: a class map's correctness is
    # averaged per sample first (over its valid tokens, for a sequence).
    reference, candidate = (sample_shares(hits, valid)[0] for hits in right.values())
    return [*checks, _drop_check(name, reference, candidate, tolerance, figures)]


def _rate(hits: np.ndarray, valid: np.ndarray | None = None) -> Rate:
    """The share of True in `hits` as a Rate over its samples (its first axis): k of n, or for
    a map the sum of each sample's share (of its `valid` positions) over n (elements of one
    sample are not independent samples); samples with no valid position are not counted."""
    if hits.ndim <= 1:
        return Rate(int(np.count_nonzero(hits)), int(hits.size))
    shares, _ = sample_shares(hits, valid)
    hit = int(np.count_nonzero(shares))
    whole = hit == int(np.count_nonzero(shares == 1))  # every sample all or nothing
    return Rate(hit if whole else float(shares.sum()), len(shares))


def tokens_words(valid: np.ndarray) -> str:
    """' over valid tokens (1,234 of 2,048 positions; 3 sample(s) with none not counted)'."""
    marks = valid.reshape(len(valid), -1)
    positions = marks.size
    empty = int(np.count_nonzero(~marks.any(axis=1)))
    skipped = f"; {empty} sample(s) with none not counted" if empty else ""
    return f" over valid tokens ({int(marks.sum()):,} of {positions:,} positions{skipped})"


def map_check(
    name: str,
    found: MapRate,
    tolerance: Tolerance,
    figures: dict[str, Any],
    minimum: float | None = None,
) -> Check:
    """A rate over samples from trtconv.outputs.maps, as a check against `minimum` (the
    budget's minimum rate by default)."""
    figures["agreement"], figures["agreement_ci95"] = found.rate.value, found.rate.interval()
    figures["agreement_samples"] = found.rate.samples
    if found.bound is not None:
        figures["tolerance"] = found.bound
    return rate_check(f"{name} {found.check}", name, found.rate, found.what, tolerance, minimum)


def rate_check(
    name: str,
    output: str,
    rate: Rate,
    what: str,
    tolerance: Tolerance,
    minimum: float | None = None,
) -> Check:
    """`rate` against `minimum` (the tolerance's minimum rate by default), decided at its
    confidence: '0.981 (0.898-0.997, n=52; minimum 0.97)' + `what`, and the samples that would
    decide it when inconclusive."""
    confidence = tolerance.confidence
    minimum = tolerance.min_top1_agreement if minimum is None else minimum
    verdict = rate.decide(minimum, confidence)
    decided = rate.interval(confidence) if confidence not in (0, CI95) else None
    note = f"{_level_text(confidence, decided)}minimum {minimum:g}"
    detail = interval_text(rate.value, rate.interval(), rate.samples, note=note) + what
    if verdict == INCONCLUSIVE:
        needed = samples_needed(rate.value, minimum, confidence)
        detail += _undecided(rate.samples, needed, confidence, "at this rate")
    return Check(name, verdict == PASSED, detail, output, inconclusive=verdict == INCONCLUSIVE)


def _drop_check(
    name: str,
    reference: np.ndarray,
    candidate: np.ndarray,
    tolerance: Tolerance,
    figures: dict[str, Any],
) -> Check:
    """Reference accuracy minus candidate accuracy on the same samples, against the maximum
    drop: its interval is the paired bootstrap's (trtconv.outputs.confidence)."""
    before, after = figures["accuracy_reference"], figures["accuracy_candidate"]
    drop, limit, confidence = before - after, tolerance.max_accuracy_drop, tolerance.confidence
    figures["accuracy_drop_ci95"] = ci95 = paired_difference_interval(reference, candidate)
    decided = ci95 if confidence == CI95 else None
    if confidence not in (0, CI95):
        decided = paired_difference_interval(reference, candidate, confidence)
    verdict = at_most(drop, decided, limit)
    note = f"{_level_text(confidence, decided if confidence != CI95 else None)}maximum {limit:g}"
    figure = interval_text(drop, ci95, len(reference), signed=True, note=note)
    detail = f"{before:.4f} -> {after:.4f}, drop {figure}"
    if verdict == INCONCLUSIVE and decided is not None:
        needed = difference_samples_needed(drop, decided, limit, len(reference))
        detail += _undecided(len(reference), needed, confidence, "at this drop")
    return Check(
        f"{name} accuracy drop",
        verdict == PASSED,
        detail,
        name,
        inconclusive=verdict == INCONCLUSIVE,
    )


def _level_text(confidence: float, decided: tuple[float, float] | None) -> str:
    """How the check was decided, when not by the 95% interval shown: '' (95%), 'point
    decision; ' (confidence 0), else 'decided on the 99% interval 0.950-0.999; '."""
    if confidence == 0:
        return "point decision; "
    if decided is None:
        return ""
    return f"decided on the {percent(confidence)} interval {decided[0]:.3f}-{decided[1]:.3f}; "


def _undecided(samples: int, needed: int | None, confidence: float, at: str) -> str:
    """The sentence an inconclusive check ends with: the samples seen and those that would
    decide it."""
    seen = f"inconclusive: its {percent(confidence)} interval straddles the bound"
    seen += f" on {samples} samples"
    if needed is None:
        return f"; {seen}, and no sample count decides a figure measured at the bound"
    return f"; {seen}; about {needed} {at} would decide it"


def mean_iou(predicted: np.ndarray, truth: np.ndarray, classes: int) -> float:
    """Intersection over union averaged over the classes present in `predicted` or `truth`."""
    scores = []
    for label in range(classes):
        union = int(np.logical_or(predicted == label, truth == label).sum())
        if union:
            both = int(np.logical_and(predicted == label, truth == label).sum())
            scores.append(both / union)
    return float(np.mean(scores)) if scores else 1.0


def mean_iou_check(
    name: str,
    scores: np.ndarray,
    want: np.ndarray,
    got: np.ndarray,
    labels: np.ndarray,
    valid: np.ndarray | None = None,
) -> Check:
    """Mean IoU of the reference and converted class maps against per-element labels, over the
    `valid` positions (None: all) (reported: the pixel accuracy drop is what gates)."""
    truth, classes = labels.reshape(want.shape), scores.shape[-1]
    if valid is not None:
        want, got, truth = want[valid], got[valid], truth[valid]
    reference, candidate = mean_iou(want, truth, classes), mean_iou(got, truth, classes)
    detail = f"{reference:.4f} -> {candidate:.4f} over {classes} classes"
    return Check(f"{name} mean IoU", True, detail, name, False)
