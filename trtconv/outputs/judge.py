"""Judge one converted output against the reference by what it holds (its role).

Every output gets a values line (max abs and rel error). How its values decide depends on the
precision:

- fp32 and tf32 (`Tolerance.exact_values`): every element of every sample within tolerance,
  an element within at the atol or at rtol x |reference| (trtconv.outputs.exact says why); the
  line says how many samples exceeded it, and by how much. A decision output past it but finite
  is judged by its decisions against fp16's budget instead: float32 is not reproduced between
  the two runtimes (trtconv.outputs.values).
- the lossy precisions (fp16, bf16, int8) judge values per sample, never by the single worst
  element: a sample is within when its values are (maps.sample_errors: every value, or 95% of
  a dense output's, by the same element test), and the share of samples within is a rate
  against a minimum share (the output's own, --tolerance NAME=X:MIN, else the budget's
  minimum). A maximum over n samples can only grow with n; a share of samples is estimated
  better the more samples there are.

The role adds what matters to it:

- classes: top-1 agreement (gating) and, with labels, the accuracy drop (gating);
- binary: agreement of the decisions at the threshold (gating), accuracy drop with labels; a
  decision map (more than one decision per sample) by the share of samples whose F1 of the
  positives is high enough (trtconv.outputs.maps);
- class_map: per-element top-1 agreement over the last (class) axis, averaged per sample
  (gating), and with per-element labels the pixel accuracy drop (gating) and the mean IoU
  (reported);
- at a lossy precision, a decision output's share of samples within tolerance is reported, not
  gating (its decisions judge it), unless the user gave it a tolerance (--tolerance X or
  NAME=X);
- regression: the share of samples whose values lie within tolerance (gating; maps.py says how,
  and where a score output gates them); without an absolute tolerance (int8) the bound is
  maps.REGRESSION_SPREAD of the reference's spread;
- tensor: the share of samples within its tolerance (gating); without a tolerance the output is
  not judged.

Rates (agreement, the share within tolerance, accuracies) count samples, never elements (a
map's elements are averaged per sample first), and they and the accuracy drop carry their 95%
interval, and their checks are decided by the interval at the tolerance's confidence
(trtconv.outputs.confidence): passed, failed, or inconclusive with the samples that would
decide it. A converted output holding NaN or Inf fails whatever the precision.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import (
    BINARY,
    CLASS_MAP,
    CLASSES,
    DECISIONS,
    REGRESSION,
    TENSOR,
    OutputRole,
)
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
from trtconv.outputs.maps import (
    MapRate,
    decision_map_rate,
    is_decision_map,
    per_sample,
    regression_rate,
)
from trtconv.outputs.tolerance import resolution_atol
from trtconv.outputs.validation_result import (
    Check,
    OutputComparison,
    WithinTolerance,
    as_reported,
)
from trtconv.outputs.values import (
    as_not_reproduced,
    decisions_budget,
    exact_within,
    not_reproduced,
    values_check,
)

if TYPE_CHECKING:
    from trtconv.outputs.tolerance import Tolerance

INTERVAL_FIELDS = (
    "agreement_ci95",
    "accuracy_reference_ci95",
    "accuracy_candidate_ci95",
    "accuracy_drop_ci95",
)


@dataclass
class Judgement:
    """What judging one output produced: its comparison and its checks, in order."""

    comparison: OutputComparison
    checks: list[Check] = field(default_factory=list)


def judge_output(
    name: str,
    role: OutputRole,
    want: np.ndarray,
    got: np.ndarray,
    tolerance: Tolerance,
    labels: np.ndarray | None = None,
    gate: np.ndarray | None = None,
) -> Judgement:
    """Judge the converted output `got` against the reference `want` as `role` says; `labels`
    (for the one output they score) adds accuracy; `gate` (a regression role's `where`: a
    boolean array of `want`'s shape) says where its values are judged. Raises UsageError for a
    role the output's shape cannot have (classes on one float column)."""
    atol, rtol = _atol(name, role, want, tolerance), _rtol(name, role, want, tolerance)
    if want.shape != got.shape:
        check = Check(f"{name} shape", False, f"expected {want.shape}, found {got.shape}", name)
        comparison = OutputComparison(
            None, None, atol, False, False, role.role, role.source, judged=True, rtol=rtol
        )
        return Judgement(comparison, [check])
    values, max_abs, max_rel = values_check(name, want, got, atol, tolerance.exact_values, rtol)
    figures: dict[str, Any] = {}
    deciding = tolerance
    if not_reproduced(values, role, want, got, tolerance):
        values, deciding = as_not_reproduced(values, max_abs), decisions_budget(tolerance)
        figures["agreement_minimum"] = deciding.min_top1_agreement
    checks = [values, *_decision_role_checks(name, role, want, got, deciding, labels, figures)]
    within, share_checks = _per_sample_values(
        name, role, want, got, (atol, rtol), tolerance, gate, figures
    )
    checks += share_checks
    judged = any(check.gating for check in checks)
    if not judged:
        checks.append(Check(f"{name} not judged", False, _unjudged_reason(name, role), name, False))
    passed = all(check.passed for check in checks if check.gating)
    comparison = OutputComparison(
        max_abs,
        max_rel,
        atol,
        passed,
        True,
        role.role,
        role.source,
        judged,
        agreement=figures.get("agreement"),
        accuracy_reference=figures.get("accuracy_reference"),
        accuracy_candidate=figures.get("accuracy_candidate"),
        threshold=role.threshold if role.role == BINARY else None,
        tolerance=figures.get("tolerance"),
        within=within,
        rtol=rtol,
        values_not_reproduced="agreement_minimum" in figures,
        agreement_minimum=figures.get("agreement_minimum"),
        **{key: figures.get(key) for key in INTERVAL_FIELDS},
    )
    return Judgement(comparison, checks)


def _decision_role_checks(
    name: str,
    role: OutputRole,
    want: np.ndarray,
    got: np.ndarray,
    tolerance: Tolerance,
    labels: np.ndarray | None,
    figures: dict[str, Any],
) -> list[Check]:
    """What a decision role is judged by: a decision map's share of samples with a high F1,
    else the agreement of the decisions and, with labels, the accuracy drop (and a class map's
    mean IoU). Nothing for other roles."""
    if is_decision_map(role, want):
        rate = decision_map_rate(want > _threshold(role), got > _threshold(role), _threshold(role))
        return [_map_check(name, rate, tolerance, figures)]
    if role.role not in DECISIONS:
        return []
    want_ids, got_ids = decisions(name, role, want), decisions(name, role, got)
    assert want_ids is not None and got_ids is not None  # a decision role
    words = _decision_words(role)
    checks = _decision_checks(name, want_ids, got_ids, tolerance, labels, words, figures)
    if role.role == CLASS_MAP and labels is not None:
        checks.append(_mean_iou_check(name, want, want_ids, got_ids, labels))
    return checks


def _per_sample_values(
    name: str,
    role: OutputRole,
    want: np.ndarray,
    got: np.ndarray,
    bounds: tuple[float | None, float | None],
    tolerance: Tolerance,
    gate: np.ndarray | None,
    figures: dict[str, Any],
) -> tuple[WithinTolerance | None, list[Check]]:
    """(the samples within tolerance, the check on their share). A regression output's share
    always gates (its bound without an atol: a share of the reference's spread); at a lossy
    precision a tensor's gates, and a decision output's gates only when the user gave it a
    tolerance, else it is reported beside its decisions. fp32 and tf32 only count the samples
    (their values line decides). `bounds`: the output's (atol, rtol)."""
    atol, rtol = bounds
    if role.role == REGRESSION:
        rate = regression_rate(want, got, atol, gate, role.where, rtol)
        within, checks = _within_check(name, rate, tolerance, figures, gating=True)
        if tolerance.exact_values and atol is not None:  # the values line decides
            within = exact_within(want, got, atol, rtol)
        return within, checks
    if atol is None:
        return None, []
    if tolerance.exact_values:
        return exact_within(want, got, atol, rtol), []
    gating = role.role not in DECISIONS or tolerance.stated_for(name)
    found = regression_rate(want, got, atol, rtol=rtol)
    return _within_check(name, found, tolerance, figures, gating, role.role in DECISIONS)


def _atol(name: str, role: OutputRole, want: np.ndarray, tolerance: Tolerance) -> float | None:
    """The output's absolute tolerance. Integer outputs judged as labels (class ids, counts)
    are judged by their agreement, as class scores are: their values line gates only with a
    tolerance of their own (--tolerance NAME=X); other integers either match or do not."""
    if np.issubdtype(want.dtype, np.floating):
        return _at_resolution(name, want, tolerance)
    if role.role in DECISIONS:
        return tolerance.output_atol.get(name)
    atol = tolerance.atol_for(name)
    return 0.0 if atol is None else atol


def _rtol(name: str, role: OutputRole, want: np.ndarray, tolerance: Tolerance) -> float | None:
    """The output's relative tolerance: its own, else the precision's; integer labels have one
    only of their own (as their atol), other integers none of the precision's."""
    if np.issubdtype(want.dtype, np.floating):
        return tolerance.rtol_for(name)
    return tolerance.output_rtol.get(name)


def _at_resolution(name: str, want: np.ndarray, tolerance: Tolerance) -> float | None:
    """A float output's atol, at least what its dtype resolves (a float16 output: a few float16
    steps at its magnitude, see resolution_atol) unless --tolerance NAME=X sets its own."""
    atol = tolerance.atol_for(name)
    floor = resolution_atol(want)
    if atol is None or floor is None or name in tolerance.output_atol:
        return atol
    return max(atol, floor)


def _within_check(
    name: str,
    found: MapRate,
    tolerance: Tolerance,
    figures: dict[str, Any],
    gating: bool,
    keep_agreement: bool = False,
) -> tuple[WithinTolerance, list[Check]]:
    """The share of samples within tolerance against the output's minimum share; reported
    (`gating` False) beside the decisions that judge a decision output (`keep_agreement`: its
    `agreement` figure stays the decisions')."""
    minimum = tolerance.min_within_for(name)
    rate = found.rate
    assert found.bound is not None  # a within-tolerance rate has its bound
    within = WithinTolerance(
        found.bound,
        int(rate.successes),
        rate.samples,
        rate.value if rate.samples else 0.0,
        rate.interval(),
        minimum,
        gating,
        found.rtol,
    )
    if keep_agreement:
        check = _rate_check(f"{name} {found.check}", name, rate, found.what, tolerance, minimum)
    else:
        check = _map_check(name, found, tolerance, figures, minimum)
    return within, [check if gating else as_reported(check, "its decisions judge it")]


def decisions(name: str, role: OutputRole, scores: np.ndarray) -> np.ndarray | None:
    """What output `name` decides per sample: the top-1 class (classes role), the score above
    its threshold (binary); None for a role that decides nothing."""
    if role.role == CLASSES:
        return _class_ids(name, scores)
    if role.role == CLASS_MAP:
        return scores.argmax(axis=-1)  # the class of every element of the map
    if role.role == BINARY:
        return scores > _threshold(role)
    return None


def _threshold(role: OutputRole) -> float:
    return role.threshold if role.threshold is not None else 0.5


def _decision_words(role: OutputRole) -> str:
    if role.role == CLASSES:
        return "top-1 agreement"
    if role.role == CLASS_MAP:
        return "per-element top-1 agreement"
    return f"decision agreement at {_threshold(role):g}"


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


def _decision_checks(
    name: str,
    want: np.ndarray,
    got: np.ndarray,
    tolerance: Tolerance,
    labels: np.ndarray | None,
    what: str,
    figures: dict[str, Any],
) -> list[Check]:
    """Agreement of the decisions and, with labels, the accuracy drop."""
    agreement = _rate(want == got)
    figures["agreement"], figures["agreement_ci95"] = agreement.value, agreement.interval()
    checks = [_rate_check(f"{name} {what}", name, agreement, "", tolerance)]
    if labels is None:
        return checks
    truth = labels.reshape(want.shape)
    right = {"reference": want == truth, "candidate": got == truth}
    for model, correct in right.items():
        rate = _rate(correct)
        figures[f"accuracy_{model}"] = rate.value
        figures[f"accuracy_{model}_ci95"] = rate.interval()
    # The drop's bootstrap resamples samples, not elements: a class map's correctness is
    # averaged per sample first (the same mean, since every sample has as many elements).
    per_sample = {model: hits.reshape(len(hits), -1).mean(axis=1) for model, hits in right.items()}
    reference, candidate = per_sample["reference"], per_sample["candidate"]
    return [*checks, _drop_check(name, reference, candidate, tolerance, figures)]


def _rate(hits: np.ndarray) -> Rate:
    """The share of True in `hits` as a Rate over its samples (its first axis): k of n, or for
    a map the sum of each sample's share over n (elements of one sample are not independent
    samples)."""
    if hits.ndim <= 1:
        return Rate(int(np.count_nonzero(hits)), int(hits.size))
    shares = per_sample(hits).mean(axis=1)
    hit = int(np.count_nonzero(shares))
    whole = hit == int(np.count_nonzero(shares == 1))  # every sample all or nothing
    return Rate(hit if whole else float(shares.sum()), len(shares))


def _map_check(
    name: str,
    found: MapRate,
    tolerance: Tolerance,
    figures: dict[str, Any],
    minimum: float | None = None,
) -> Check:
    """A rate over samples from trtconv.outputs.maps, as a check against `minimum` (the
    budget's minimum rate by default)."""
    figures["agreement"], figures["agreement_ci95"] = found.rate.value, found.rate.interval()
    if found.bound is not None:
        figures["tolerance"] = found.bound
    return _rate_check(f"{name} {found.check}", name, found.rate, found.what, tolerance, minimum)


def _rate_check(
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


def _mean_iou_check(
    name: str, scores: np.ndarray, want: np.ndarray, got: np.ndarray, labels: np.ndarray
) -> Check:
    """Mean IoU of the reference and converted class maps against per-element labels
    (reported: the pixel accuracy drop is what gates)."""
    truth, classes = labels.reshape(want.shape), scores.shape[-1]
    reference, candidate = mean_iou(want, truth, classes), mean_iou(got, truth, classes)
    detail = f"{reference:.4f} -> {candidate:.4f} over {classes} classes"
    return Check(f"{name} mean IoU", True, detail, name, False)


def _unjudged_reason(name: str, role: OutputRole) -> str:
    what = "a tensor" if role.role == TENSOR else f"role {role.role}"
    return (
        f"{what} ({role.source}) with no tolerance at this precision: give --tolerance "
        f"{name}=X, or --output-role {name}=classes|binary|class_map|regression, or "
        "--allow-unjudged"
    )
