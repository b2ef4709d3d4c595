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
  (reported); a sequence's (`[batch, seq, K]`) over the tokens its model's padding mask marks
  valid (trtconv.outputs.tokens), whose padding is left out of every figure of the output;
- embedding: the share of samples whose cosine similarity reaches the bound (gating;
  trtconv.outputs.cosine), a sequence's over its valid tokens;
- at a lossy precision, a decision output's (or an embedding's) share of samples within
  tolerance is reported, not gating (its decisions judge it), unless the user gave it a
  tolerance (--tolerance X or NAME=X);
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

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from trtconv.core.judging_options import (
    AGREEING,
    BINARY,
    CLASS_MAP,
    DECISIONS,
    EMBEDDING,
    REGRESSION,
    OutputRole,
)
from trtconv.outputs.cosine import cosine_rate
from trtconv.outputs.decisions import (
    decision_checks,
    decision_words,
    decisions,
    map_check,
    mean_iou_check,
    rate_check,
    threshold_of,
)
from trtconv.outputs.maps import MapRate, decision_map_rate, is_decision_map, regression_rate
from trtconv.outputs.roles import fitting_roles
from trtconv.outputs.tokens import spread
from trtconv.outputs.tolerance import resolution_atol
from trtconv.outputs.validation_result import (
    Check,
    OutputComparison,
    WithinTolerance,
    as_reported,
)
from trtconv.outputs.values import (
    as_not_reproduced,
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
# The figures a role's checks measure, as OutputComparison names them (None: not measured).
FIGURES = (
    "agreement",
    "accuracy_reference",
    "accuracy_candidate",
    "tolerance",
    "agreement_minimum",
    "agreement_samples",
    *INTERVAL_FIELDS,
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
    valid: np.ndarray | None = None,
) -> Judgement:
    """Judge the converted output `got` against the reference `want` as `role` says; `labels`
    (for the one output they score) adds accuracy; `gate` (a regression role's `where`: a
    boolean array of `want`'s shape) says where its values are judged; `valid` (a class map's
    or an embedding's `[batch, seq]` mask of tokens) which positions count at all. Raises
    UsageError for a role the output's shape cannot have (classes on one float column)."""
    atol, rtol = _atol(name, role, want, tolerance), _rtol(name, role, want, tolerance)
    if want.shape != got.shape:
        return _shape_mismatch(name, role, (want, got), atol, rtol)
    if valid is not None:
        # Padding is not compared: the converted values there are taken as the native ones,
        # and only the valid positions are counted by the per-sample figures.
        gate = spread(valid, want.shape)
        got = np.where(gate, got, want)
    values, max_abs, max_rel = values_check(name, want, got, atol, tolerance.exact_values, rtol)
    figures: dict[str, Any] = {}
    deciding, reproduced = tolerance, not not_reproduced(values, role, want, got, tolerance)
    if not reproduced:
        values = as_not_reproduced(values, max_abs, tolerance.lossy_atol)
        deciding = tolerance.for_decisions()
        figures["agreement_minimum"] = deciding.min_within_for(name)
    threshold = _threshold(role, deciding)
    pair = (want, got)
    checks = [values, *_agreement_checks(name, role, pair, deciding, labels, figures, valid)]
    within, share_checks = _per_sample_values(
        name, role, pair, (atol, rtol), tolerance, gate, figures, valid is not None
    )
    checks += share_checks
    judged = any(check.gating for check in checks)
    if not judged:
        why = _unjudged_reason(name, role, want)
        checks.append(Check(f"{name} not judged", False, why, name, False))
    passed = all(check.passed for check in checks if check.gating)
    measured: dict[str, Any] = {key: figures.get(key) for key in FIGURES}
    measured |= {"threshold": threshold, "within": within, "rtol": rtol}
    measured["values_not_reproduced"] = not reproduced
    comparison = OutputComparison(
        max_abs_error=max_abs,
        max_rel_error=max_rel,
        atol=atol,
        passed=passed,
        shape_matches=True,
        role=role.role,
        role_source=role.source,
        judged=judged,
        **measured,
    )
    if comparison.agreement_samples == len(want):  # recorded only when some were not counted
        comparison = replace(comparison, agreement_samples=None)
    return Judgement(comparison, checks)


def _shape_mismatch(
    name: str,
    role: OutputRole,
    pair: tuple[np.ndarray, np.ndarray],
    atol: float | None,
    rtol: float | None,
) -> Judgement:
    """An output whose converted shape is not the reference's: failed, nothing else measured."""
    want, got = pair
    check = Check(f"{name} shape", False, f"expected {want.shape}, found {got.shape}", name)
    comparison = OutputComparison(
        max_abs_error=None,
        max_rel_error=None,
        atol=atol,
        passed=False,
        shape_matches=False,
        role=role.role,
        role_source=role.source,
        judged=True,
        rtol=rtol,
    )
    return Judgement(comparison, [check])


def _threshold(role: OutputRole, tolerance: Tolerance) -> float | None:
    """A binary output's decision threshold, an embedding's cosine bound (its own, else the
    tolerance's); None for other roles."""
    if role.role == EMBEDDING:
        return role.threshold if role.threshold is not None else tolerance.min_cosine
    return role.threshold if role.role == BINARY else None


def _agreement_checks(
    name: str,
    role: OutputRole,
    pair: tuple[np.ndarray, np.ndarray],
    tolerance: Tolerance,
    labels: np.ndarray | None,
    figures: dict[str, Any],
    valid: np.ndarray | None,
) -> list[Check]:
    """What a role judged by its agreement is judged by: a decision map's share of samples with
    a high F1, an embedding's share of samples whose cosine reaches its bound, else the
    agreement of the decisions and, with labels, the accuracy drop (and a class map's mean
    IoU), over the `valid` tokens of a sequence. Nothing for other roles. `pair`: (the
    reference's output, the converted one)."""
    want, got = pair
    if is_decision_map(role, want):
        threshold = threshold_of(role)
        rate = decision_map_rate(want > threshold, got > threshold, threshold)
        return [map_check(name, rate, tolerance, figures)]
    if role.role == EMBEDDING:
        bound = _threshold(role, tolerance)
        assert bound is not None  # an embedding's
        found = cosine_rate(want, got, bound, valid, role.mask)
        minimum = tolerance.min_within_for(name)
        if minimum != tolerance.min_top1_agreement:  # its own (--tolerance NAME=X:MIN)
            figures["agreement_minimum"] = minimum
        return [map_check(name, found, tolerance, figures, minimum)]
    if role.role not in DECISIONS:
        return []
    want_ids, got_ids = decisions(name, role, want), decisions(name, role, got)
    assert want_ids is not None and got_ids is not None  # a decision role
    words = decision_words(role)
    checks = decision_checks(name, want_ids, got_ids, tolerance, labels, words, figures, valid)
    if role.role == CLASS_MAP and labels is not None:
        checks.append(mean_iou_check(name, want, want_ids, got_ids, labels, valid))
    return checks


def _per_sample_values(
    name: str,
    role: OutputRole,
    pair: tuple[np.ndarray, np.ndarray],
    bounds: tuple[float | None, float | None],
    tolerance: Tolerance,
    gate: np.ndarray | None,
    figures: dict[str, Any],
    masked: bool = False,
) -> tuple[WithinTolerance | None, list[Check]]:
    """(the samples within tolerance, the check on their share). A regression output's share
    always gates (its bound without an atol: a share of the reference's spread); at a lossy
    precision a tensor's gates, and a decision output's gates only when the user gave it a
    tolerance, else it is reported beside its decisions. fp32 and tf32 only count the samples
    (their values line decides). `bounds`: the output's (atol, rtol); `masked`: `gate` is the
    output's valid tokens, which count for every role."""
    (want, got), (atol, rtol) = pair, bounds
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
    gating = role.role not in AGREEING or tolerance.stated_for(name)
    found = regression_rate(want, got, atol, gate if masked else None, rtol=rtol)
    return _within_check(name, found, tolerance, figures, gating, role.role in AGREEING)


def _counted(samples: int | None, judged: int) -> int | None:
    """The samples an agreement counted, when not every sample judged (else None)."""
    return samples if samples is not None and samples != judged else None


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
        bound=found.bound,
        samples_within=int(rate.successes),
        samples=rate.samples,
        share=rate.value if rate.samples else 0.0,
        share_ci95=rate.interval(),
        minimum=minimum,
        gating=gating,
        rtol=found.rtol,
    )
    if keep_agreement:
        check = rate_check(f"{name} {found.check}", name, rate, found.what, tolerance, minimum)
    else:
        check = map_check(name, found, tolerance, figures, minimum)
    return within, [check if gating else as_reported(check, "its decisions judge it")]


def _unjudged_reason(name: str, role: OutputRole, want: np.ndarray) -> str:
    """Why `name` is not judged, and the roles its shape fits: a `[batch, seq, K]` float
    output is named as class scores per position (class_map) or a vector per position
    (embedding), what a text model's logits or hidden states are."""
    what = "a tensor" if role.role == "tensor" else f"role {role.role}"
    fitting = [fit for fit in fitting_roles(want) if fit not in ("tensor", role.role)]
    roles = f"--output-role {name}={'|'.join(fitting)}" if fitting else ""
    shape = "[batch, " + ", ".join(str(d) for d in want.shape[1:]) + "]"
    if CLASS_MAP in fitting and EMBEDDING in fitting:
        roles = (
            f"--output-role {name}=class_map if its {shape} holds {want.shape[-1]} class scores "
            f"per position (a language model's logits, a tagger's), {name}=embedding if a "
            "vector per position"
        )
    elif EMBEDDING in fitting and want.ndim == 2:
        roles += f" ({name}=embedding if its {shape} is a vector per sample)"
    give = f"give --tolerance {name}=X, or {roles}" if roles else f"give --tolerance {name}=X"
    return (
        f"{what} ({role.source}) with no tolerance at this precision: {give}, or --allow-unjudged"
    )
