"""What each output of a model holds, which decides how a converted output is judged.

- `classes`: multi-class scores (probabilities or logits), or integer class ids: top-1 agreement,
  accuracy against labels;
- `binary`: one score per decision (a sigmoid): the decision at a threshold (0.5 for
  probabilities, 0 for logits): agreement, accuracy against 0/1 labels;
- `class_map`: class scores per element of a dense map (segmentation: `[N, H, W, K]`, the
  classes on the last axis; a language model's or a tagger's `[N, seq, K]` per token, over the
  tokens its padding mask marks valid): per-element top-1 agreement, pixel accuracy and mean
  IoU against per-element labels;
- `embedding`: a vector per sample (`[N, D]`) or per token (`[N, seq, D]`): the share of samples
  whose cosine similarity with the native vectors reaches the bound (trtconv.outputs.cosine);
- `regression`: values whose error matters: samples within tolerance; `regression:where=SCORE`
  judges them only where the output SCORE says an object is there (a box or landmark head);
- `tensor`: anything else: the values against an absolute tolerance.

A role is set by the user (`--output-role NAME=ROLE`, a release config, an artifact's manifest)
or inferred from the op that ends the output's graph (a `Softmax`, a `Sigmoid`, a `Tanh`), its
dtype, shape and name, the model's inputs and hidden size (trtconv.outputs.tokens: a text
model's), and the reference model's values. Every role says where it came from, and a role
judged per token the input that marks its valid tokens (`mask`).

The role names, their parsing and the settings a user states (`Judging`) are
trtconv.core.judging_options', so that options can hold them; here roles are inferred and
resolved, and a `Judging` meets the one recorded in a manifest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import (
    BINARY,
    CLASS_MAP,
    CLASSES,
    DECISIONS,
    EMBEDDING,
    REGRESSION,
    ROLES,
    TENSOR,
    Judging,
    OutputRole,
    Roles,
)
from trtconv.core.results import JsonResult, optional_key
from trtconv.outputs.tokens import InputEvidence, find_mask, text_role

PROBABILITY_THRESHOLD, LOGIT_THRESHOLD = 0.5, 0.0
SUM_TO_ONE = 1e-3  # rows of probabilities sum to 1 within this


@dataclass(frozen=True)
class RoleRecord:
    """How one output was judged: its role, where the role came from, its binary threshold or
    (embedding) the cosine bound it was judged by, (regression) the score output that gated it,
    and (class_map, embedding) the input that marked its valid tokens."""

    role: str
    source: str
    threshold: float | None = None
    # Each only when set: manifests written before read the same.
    where: str | None = optional_key()
    mask: str | None = optional_key()


@dataclass
class JudgingRecord(JsonResult):
    """How an artifact's outputs were judged: each output's role, whether unjudged outputs were
    allowed, the output labels were scored on (when set). `tolerances`, `min_within` and `rtols`
    are what an earlier trtconv recorded of the per-output tolerances (read, no longer written:
    the `contract` block holds every rule)."""

    roles: dict[str, RoleRecord] = field(default_factory=dict)
    tolerances: dict[str, float] | None = optional_key()
    allow_unjudged: bool = False
    labels_output: str | None = optional_key()
    min_within: dict[str, float] | None = optional_key()
    rtols: dict[str, float] | None = optional_key()


def resolve_roles(
    reference: Mapping[str, np.ndarray],
    final_ops: Mapping[str, str] | None = None,
    chosen: Mapping[str, OutputRole] | None = None,
    evidence: InputEvidence | None = None,
) -> Roles:
    """Every output's role: the `chosen` one where given, else inferred from `final_ops` (output
    -> the op that computes it, see trtconv.model.savedmodel_pb.output_ops), the `evidence` of
    the model's inputs (the arrays fed, its hidden size) and the reference model's values; a
    class map's or an embedding's sequence with the input that marks its valid tokens."""
    final_ops, chosen = final_ops or {}, chosen or {}
    marked = [name for name, op in final_ops.items() if op in ("Softmax", "Sigmoid")]
    roles: Roles = {}
    for name in sorted(reference):
        array = np.asarray(reference[name])
        if name in chosen:
            role = chosen[name]
            check_role_fits(name, role, array)
            if role.role == BINARY and role.threshold is None:
                role = replace(role, threshold=_threshold(array))
        else:
            others = [other for other in marked if other != name]
            role = infer_role(array, final_ops.get(name, ""), others, name, evidence)
        feeds = evidence.feeds if evidence is not None else None
        roles[name] = replace(role, mask=find_mask(name, role, array, feeds))
    for name, role in roles.items():
        if role.where is not None:
            check_gate(name, role, roles)
    return roles


def check_gate(name: str, role: OutputRole, roles: Roles) -> None:
    """Raise UsageError when `role.where` names no output of the model, or one that decides
    nothing (the gate is a binary score or class scores)."""
    gate = roles.get(role.where or "")
    if gate is None:
        raise UsageError(
            f"Output '{name}' is judged where '{role.where}' says an object is there, but the "
            f"model has no output '{role.where}'; its outputs are {', '.join(sorted(roles))}."
        )
    if gate.role not in DECISIONS:
        raise UsageError(
            f"Output '{name}' is judged where '{role.where}' says an object is there, but "
            f"'{role.where}' is {gate.role} ({gate.source}): the gate must be a binary score or "
            f"class scores (set --output-role {role.where}=binary)."
        )


def infer_role(
    array: np.ndarray,
    final_op: str = "",
    marked: Sequence[str] = (),
    name: str = "",
    evidence: InputEvidence | None = None,
) -> OutputRole:
    """The role of output `name` from the op that ends its graph, its dtype, shape and name,
    the `evidence` of its model's inputs (trtconv.outputs.tokens) and its values; `marked`
    names the model's other outputs that end in a softmax or sigmoid."""
    if final_op == "Softmax" and array.ndim >= 3 and array.shape[-1] > 1:
        why = f"inferred: Softmax over the last axis of shape {_shape(array)} (a class map)"
        return OutputRole(CLASS_MAP, why)
    if final_op == "Softmax" and array.ndim == 2 and array.shape[1] > 1:
        return OutputRole(CLASSES, "inferred: Softmax at the end of the graph")
    if final_op == "Sigmoid":
        return OutputRole(BINARY, "inferred: Sigmoid at the end of the graph", _threshold(array))
    columns = array.shape[1] if array.ndim == 2 else 1
    if not np.issubdtype(array.dtype, np.floating):
        if array.ndim == 1 or array.shape[1:] == (1,):
            return OutputRole(CLASSES, f"inferred: one {array.dtype} per sample (class ids)")
        # Integers are labels (class ids, counts): judged by agreement per element.
        why = f"inferred: {array.dtype} values of shape {_shape(array)} (labels per element)"
        return OutputRole(CLASSES, why)
    texts = text_role(name, array, final_op, evidence)
    if texts is not None:
        return texts
    if array.ndim > 2 and marked:
        # A box or offset map beside a score map (a proposal net's): values whose error matters.
        why = f"inferred: a {_shape(array)} map with no softmax or sigmoid, while "
        return OutputRole(REGRESSION, why + f"{', '.join(marked)} ends in one")
    if array.ndim > 2:
        return OutputRole(TENSOR, f"inferred: shape {_shape(array)} (not one row per sample)")
    if columns == 1:
        if _within_unit(array):
            why = "inferred: one column of values in [0, 1] (probabilities)"
            return OutputRole(BINARY, why, PROBABILITY_THRESHOLD)
        return OutputRole(REGRESSION, "inferred: one column of values outside [0, 1]")
    if _within_unit(array) and np.allclose(array.sum(axis=1), 1.0, atol=SUM_TO_ONE):
        return OutputRole(CLASSES, "inferred: rows of probabilities summing to 1")
    if marked:
        why = f"inferred: no softmax or sigmoid, while {', '.join(marked)} ends in one"
        return OutputRole(REGRESSION, why)
    return OutputRole(CLASSES, f"inferred: [batch, {columns}] float scores, taken as logits")


def fitting_roles(array: np.ndarray) -> list[str]:
    """The roles an output of this dtype and shape can have (`tensor` always fits)."""
    floating = np.issubdtype(array.dtype, np.floating)
    fits = {
        CLASSES: not floating or (array.ndim == 2 and array.shape[1] > 1),
        BINARY: array.ndim >= 1,  # decided per element at its threshold
        CLASS_MAP: floating and array.ndim >= 3 and array.shape[-1] > 1,
        EMBEDDING: floating and array.ndim >= 2 and array.shape[-1] > 1,
        REGRESSION: array.ndim >= 1,
        TENSOR: True,
    }
    return [role for role in ROLES if fits[role]]


def check_role_fits(name: str, role: OutputRole, array: np.ndarray) -> None:
    """Raise UsageError naming output `name`, its shape, where the role was set and the roles
    that fit, when `role` cannot judge an output like `array`."""
    fitting = fitting_roles(array)
    if role.role in fitting:
        return
    where = {
        "option": f"--output-role {name}=ROLE",
        "release config": f'[outputs] roles = {{{name} = "ROLE"}} in the release config',
    }.get(role.source, f"its role ({role.source})")
    raise UsageError(
        f"Output '{name}' ({array.dtype}, shape {_shape(array)}) cannot be judged as "
        f"{role.role}: the roles that fit it are {', '.join(fitting)}; set one with {where}."
    )


def _threshold(array: np.ndarray) -> float:
    """0.5 for probabilities, 0 for logits (values outside [0, 1])."""
    return PROBABILITY_THRESHOLD if _within_unit(array) else LOGIT_THRESHOLD


def _within_unit(array: np.ndarray) -> bool:
    return bool(array.size) and float(array.min()) >= 0.0 and float(array.max()) <= 1.0


def _shape(array: np.ndarray) -> str:
    return "[batch, " + ", ".join(str(d) for d in array.shape[1:]) + "]"


def over_recorded(judging: Judging, recorded: JudgingRecord | None) -> Judging:
    """`judging` over the roles recorded in a manifest (`judging` block): roles given in
    `judging` win, the recorded ones fill in (their source says "manifest")."""
    recorded = recorded or JudgingRecord()
    roles = {
        name: OutputRole(
            data.role,
            f"manifest ({data.source})",
            data.threshold,
            where=data.where,
            mask=data.mask,
        )
        for name, data in recorded.roles.items()
    }
    labelled = judging.labels_output or recorded.labels_output
    return Judging(
        roles={**roles, **judging.roles},
        allow_unjudged=judging.allow_unjudged,
        labels_output=labelled,
    )


def judging_record(judging: Judging, resolved: Roles) -> JudgingRecord:
    """The manifest's `judging` block: every output's role (with its source); the tolerances
    are the contract's (trtconv.outputs.contract)."""
    return JudgingRecord(
        roles={
            name: RoleRecord(role.role, role.source, role.threshold, role.where, role.mask)
            for name, role in resolved.items()
        },
        allow_unjudged=judging.allow_unjudged,
        labels_output=judging.labels_output or None,
    )
