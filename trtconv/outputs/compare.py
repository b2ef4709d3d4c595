"""Converted versus native outputs, each judged by its role (trtconv.outputs.judge) against one
per-precision table of tolerances.

Like Optimum's `_run_validation`: every check is computed and recorded (a ✓/✗ line each), then
the caller decides; `raise_if_failed` turns a failed, inconclusive or unjudged result into one
AccuracyError (exit 4). `trtconv.validate` runs this on a converted artifact (`trtconv validate`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from trtconv.calib.readers import batches
from trtconv.calib.sources import ArraySet
from trtconv.core.errors import AccuracyError, UsageError, itemised
from trtconv.core.judging_options import (
    BINARY,
    CLASS_MAP,
    CLASSES,
    EMBEDDING,
    REGRESSION,
    TENSOR,
    Judging,
    Roles,
)
from trtconv.core.model_io import Feeds, ModelSignature, Outputs
from trtconv.core.results import JsonResult
from trtconv.model.paths import is_saved_model_dir
from trtconv.model.savedmodel import SERVING_KEY
from trtconv.model.savedmodel_pb.output_ops import final_ops
from trtconv.model.savedmodel_pb.weights import weight_shapes
from trtconv.outputs.confidence import percent, proportion_interval, samples_to_show
from trtconv.outputs.exact import values_decide
from trtconv.outputs.judge import judge_output
from trtconv.outputs.maps import gate_of
from trtconv.outputs.roles import resolve_roles
from trtconv.outputs.tokens import InputEvidence, hidden_size, valid_positions
from trtconv.outputs.tolerance import Tolerance
from trtconv.outputs.validation_result import FAILED, INCONCLUSIVE, Check, ValidationReport

log = logging.getLogger(__name__)


class Infers(Protocol):
    """Anything that runs a model on feeds (a backend's Runner)."""

    def infer(self, feeds: Feeds) -> Outputs: ...


VALIDATION_BATCH = 32


def run_batched(
    runner: Infers, data: ArraySet, batch_size: int = VALIDATION_BATCH, min_batch: int = 1
) -> Outputs:
    """Run `runner` over every sample of `data` in batches; outputs concatenated by name.

    A last batch smaller than `min_batch` (the smallest batch an engine was built for) is padded
    by repeating its rows, and the padding's outputs are dropped. A runner whose signature fixes
    the batch (`[1, 32, 32, 3]`) runs batches of exactly that size, whatever was asked.
    """
    fixed = _fixed_batch(runner)
    if fixed is not None:
        batch_size = min_batch = fixed
    collected: dict[str, list[np.ndarray]] = {}
    for feeds in batches(data, batch_size):
        rows = len(next(iter(feeds.values())))
        if rows < min_batch:
            feeds = {name: np.resize(a, (min_batch, *a.shape[1:])) for name, a in feeds.items()}
        for name, array in runner.infer(feeds).items():
            collected.setdefault(name, []).append(np.asarray(array)[:rows])
    return {name: np.concatenate(parts) for name, parts in collected.items()}


def _fixed_batch(runner: Infers) -> int | None:
    """The batch size a Runner's signature fixes (None for any batch, or no signature)."""
    signature = getattr(runner, "signature", None)  # a Runner's; test doubles may have none
    return signature.fixed_batch if isinstance(signature, ModelSignature) else None


def validation_batches(batch_range: tuple[int, int] | None) -> tuple[int, int]:
    """(batch size, smallest batch) for validating an artifact built for `batch_range`: 32 when
    that lies inside the range (or there is none), else the nearest end of the range."""
    if batch_range is None:
        return VALIDATION_BATCH, 1
    low, high = batch_range
    return max(low, min(VALIDATION_BATCH, high)), low


def compare(
    reference: Outputs,
    candidate: Outputs,
    tolerance: Tolerance,
    labels: np.ndarray | None = None,
    data_source: str = "",
    roles: Roles | None = None,
    allow_unjudged: bool = False,
    feeds: Feeds | None = None,
) -> ValidationReport:
    """Every check of `candidate` against `reference`, collected into one report: outputs
    present, and each output judged by its role (trtconv.outputs.judge); `labels` score the one
    decision output they fit; `feeds` (the inputs both ran on) hold the masks of the outputs
    judged per token. `roles` default to those inferred from the reference's values
    (`resolve_roles`; pass the graph's final ops there for a better guess). Raises UsageError
    when a role's mask is not among `feeds`."""
    samples = len(next(iter(reference.values()))) if reference else 0
    report = ValidationReport(
        samples, data_source, tolerance.min_top1_agreement, tolerance.max_accuracy_drop
    )
    report.allow_unjudged, report.confidence = allow_unjudged, tolerance.confidence
    roles = roles or resolve_roles(reference, evidence=InputEvidence(feeds or {}))
    missing = sorted(set(reference) - set(candidate))
    if missing:
        report.checks.append(Check("outputs present", False, f"missing {', '.join(missing)}"))
    report.labels_output = labels_output(roles, reference, labels)
    for name in sorted(set(reference) & set(candidate)):
        scored = labels if name == report.labels_output else None
        want, got = reference[name], candidate[name]
        valid = valid_positions(name, roles[name], np.asarray(want), feeds)
        gate = _gate(name, roles, reference)
        judgement = judge_output(name, roles[name], want, got, tolerance, scored, gate, valid)
        judgement = values_decide(judgement, roles[name], want, got, tolerance)
        report.outputs[name] = judgement.comparison
        report.checks += judgement.checks
    return report


def _gate(name: str, roles: Roles, reference: Outputs) -> np.ndarray | None:
    """Where output `name` is judged (its role's `where`: the reference's score output says an
    object is there); None: everywhere."""
    where = roles[name].where
    if where is None or where not in reference:
        return None
    return gate_of(where, roles[where], np.asarray(reference[where]), np.asarray(reference[name]))


TOP1 = "a top-1 agreement"
# The rate each role's check measures against the budget's minimum (roles absent: no rate).
RATE_WORDS = {
    CLASSES: "top-1 agreement",
    CLASS_MAP: "top-1 agreement",
    BINARY: "decision agreement",
    EMBEDDING: "share of samples reaching the cosine bound",
    REGRESSION: "share of samples within tolerance",
}


def rate_words(roles: Mapping[str, str], tolerance: Tolerance | None = None) -> str | None:
    """What the rate checks of outputs with these roles ({name: role}) measure, for a warning
    about the budget: 'a top-1 agreement' when every one is one, else 'a rate (decision
    agreement of onset, ...)'; None when no output has a rate check (nothing to warn about). A
    tensor has one at a lossy `tolerance` that gives it an atol (its share of samples within)."""
    found = {name: RATE_WORDS[role] for name, role in sorted(roles.items()) if role in RATE_WORDS}
    if tolerance is not None and not tolerance.exact_values:
        found |= {
            name: RATE_WORDS[REGRESSION]
            for name, role in sorted(roles.items())
            if role == TENSOR and tolerance.atol_for(name) is not None
        }
    if not found:
        return None
    if set(found.values()) == {RATE_WORDS[CLASSES]}:
        return TOP1
    listed = ", ".join(f"{words} of {name}" for name, words in sorted(found.items()))
    return f"a rate ({listed})"


def undecidable_warning(
    samples: int, tolerance: Tolerance, data: str, checked: str | None = TOP1
) -> str | None:
    """The warning that `samples` samples of `data` can never show the tolerance's minimum
    agreement at its confidence (even all of them agreeing leaves the interval below it); None
    when they can, with point decisions (confidence 0), or when no output has a rate check
    (`checked` None; else what the checks measure, see rate_words), or when the values decide
    (fp32, tf32: trtconv.outputs.exact)."""
    if tolerance.values_decide:
        return None
    minimum, confidence = tolerance.min_top1_agreement, tolerance.confidence
    if checked is None:
        return None
    fewest = samples_to_show(minimum, confidence) if confidence > 0 else 0
    if fewest is not None and samples >= fewest:
        return None
    best = proportion_interval(samples, samples, confidence)
    best = best and (math.floor(best[0] * 1000) / 1000, best[1])  # as interval_text rounds
    ceiling = (
        f"{samples} of {samples} agreeing gives a lower bound of {best[0]:.3f}; " if best else ""
    )
    fix = f"at least {fewest} held-out samples can" if fewest else "no sample count can"
    return (
        f"{samples} samples of {data} cannot show {checked} of {minimum:g} at "
        f"{percent(confidence)} confidence ({ceiling}{fix}): the verdict will be inconclusive "
        "at best (--confidence 0 decides on the point figure)"
    )


def labels_output(roles: Roles, reference: Outputs, labels: np.ndarray | None) -> str | None:
    """The one decision output `labels` can score (class ids below its class count, or 0/1 for
    one binary score per sample); None without labels or when several outputs fit."""
    if labels is None:
        return None
    chosen = [name for name, role in roles.items() if role.labels and name in reference]
    if chosen:
        return _chosen_labels_output(chosen[0], roles, reference, labels)
    fitting = [
        name
        for name, role in sorted(roles.items())
        if name in reference and _labels_fit(role.role, np.asarray(reference[name]), labels)
    ]
    if len(fitting) > 1:
        _say_once(
            f"labels fit several outputs ({', '.join(fitting)}): accuracy is not computed "
            "(name the labelled one with --labels-output NAME, or `labels_output` under "
            "[outputs] in a release config)"
        )
    return fitting[0] if len(fitting) == 1 else None


# What this process has warned about: a ladder compares dozens of times, one line says it.
_SAID: set[str] = set()


def _say_once(message: str) -> None:
    if message not in _SAID:
        _SAID.add(message)
        log.warning("%s", message)


def _chosen_labels_output(name: str, roles: Roles, reference: Outputs, labels: np.ndarray) -> str:
    """`name` (--labels-output) when the labels fit it. Raises UsageError when they do not."""
    scores = np.asarray(reference[name])
    if _labels_fit(roles[name].role, scores, labels):
        return name
    raise UsageError(
        f"--labels-output {name}: labels of shape {list(labels.shape)} (values "
        f"{int(labels.min())}..{int(labels.max())}) do not fit output '{name}' "
        f"({roles[name].role}, shape {list(scores.shape)})."
    )


def _labels_fit(role: str, scores: np.ndarray, labels: np.ndarray) -> bool:
    if role == CLASS_MAP:
        return _labels_fit_map(scores, labels)
    if len(labels) != len(scores) or labels.size != len(scores) or not len(labels):
        return False
    per_sample = scores.reshape(len(scores), -1).shape[1]
    low, high = int(labels.min()), int(labels.max())
    if role == CLASSES:
        integer_ids = not np.issubdtype(scores.dtype, np.floating) and per_sample == 1
        return low >= 0 and (integer_ids or (scores.ndim == 2 and high < scores.shape[1] > 1))
    return role == BINARY and per_sample == 1 and low >= 0 and high <= 1


def _labels_fit_map(scores: np.ndarray, labels: np.ndarray) -> bool:
    """Per-element labels of a class map: its shape without the class axis, ids below K."""
    if labels.shape != scores.shape[:-1] or not labels.size:
        return False
    return int(labels.min()) >= 0 and int(labels.max()) < scores.shape[-1]


WHY = {
    FAILED: "is outside tolerance",
    INCONCLUSIVE: "is not shown within tolerance on these samples (inconclusive)",
}


def raise_if_failed(
    report: ValidationReport, what: str, result: JsonResult | dict[str, Any] | None = None
) -> None:
    """Raise one AccuracyError (exit 4) listing every failed, inconclusive or unjudged check of
    `report`, carrying the command's full `result` (the report itself by default)."""
    if not report.passed:
        why = WHY.get(report.verdict, "has outputs not judged")
        message = itemised(f"{what} {why}", report.failure_lines())
        raise AccuracyError(message, report if result is None else result)


def output_roles(
    model: Path | None,
    reference_outputs: Outputs,
    judging: Judging,
    key: str = SERVING_KEY,
    feeds: Feeds | None = None,
) -> Roles:
    """Every output's role: set in `judging`, else inferred from the op ending its graph in the
    SavedModel `model` (if it is one; its signature `key`), its hidden size, the inputs both
    ran on (`feeds`) and the reference's values; with the input that marks the valid tokens of
    an output judged per token (trtconv.outputs.tokens)."""
    saved = model is not None and is_saved_model_dir(model)
    ops = final_ops(model, key) if saved and model is not None else {}
    hidden = hidden_size(weight_shapes(model)) if saved and model is not None else None
    evidence = InputEvidence(feeds or {}, hidden)
    roles = resolve_roles(reference_outputs, ops, judging.roles, evidence)
    return judging.mark_labelled(roles)
