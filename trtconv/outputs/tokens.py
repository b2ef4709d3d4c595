"""Outputs of text models: which positions of a sequence are tokens (the padding mask), and what
a model's token inputs say about its outputs' roles.

**The mask rule.** An output judged per position (`class_map`, `embedding`, of shape
`[batch, seq, ...]`) counts only the positions its model's padding mask marks valid. The mask is
the input named with the role (`--output-role NAME=class_map:mask=INPUT`; `mask=none` counts
every position), else the one input that is

- integer or boolean, of shape `[batch, seq]` equal to the output's first two axes on the data
  judged, and
- named like a mask: `padding_mask`, `attention_mask`, `input_mask`, `mask` or any name ending
  in `_mask` (in that order of preference when several fit);

a position is valid where the mask is nonzero (1 marks a token, 0 padding, as keras-hub's
`padding_mask` and Hugging Face's `attention_mask` do). A model without such an input counts
every position. A sample with no valid position is not counted.

**Roles from the inputs.** A model with integer token inputs (`[batch, seq]`, the same seq as its
output) and a float output `[batch, seq, K]`: K far above the model's hidden size (at least
FAR_ABOVE times it) is a vocabulary or a tag set, class scores per token (`class_map`); K equal to
the hidden size is a sequence of token vectors (`embedding`). The hidden size is the commonest
length of the model's one-dimensional float weights (its normalisation scales and biases), read
from saved_model.pb (trtconv.model.savedmodel_pb.weights). Names say the rest: an output named
like logits or scores of shape `[batch, seq, K]` holds class scores; one named like an embedding
or a pooled output (`embedding`, `pooled_output`, ...) of shape `[batch, D]`, or like a sequence
output (`sequence_output`, `last_hidden_state`), holds vectors. A `[batch, D]` output ending in
a Tanh (a BERT pooler) or whose rows all have unit length (an L2-normalised embedding) is an
embedding when D is at least MIN_VECTOR (fewer columns are scores, not a vector space).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import (
    CLASS_MAP,
    EMBEDDING,
    MASKED,
    NO_MASK,
    OutputRole,
)

MASK_NAMES = ("padding_mask", "attention_mask", "input_mask", "mask")
# Class scores per token: at least this many times the hidden size (a vocabulary, a tag set).
FAR_ABOVE = 4
# A [batch, D] output is a vector (an embedding) from this many columns on.
MIN_VECTOR = 16
# Rows of an L2-normalised embedding have unit length within this.
UNIT_LENGTH = 1e-3
EMBEDDING_NAMES = ("embed", "pooled", "pooler")
SEQUENCE_NAMES = ("sequence_output", "hidden_state", "encoder_output")
SCORE_NAMES = ("logits", "scores")


@dataclass(frozen=True)
class InputEvidence:
    """What a model's inputs say about its outputs: the arrays fed on the data judged (token
    ids and masks among them) and the model's hidden size (None: not known)."""

    feeds: Mapping[str, np.ndarray] = field(default_factory=dict)
    hidden_size: int | None = None

    def token_inputs(self, array: np.ndarray) -> list[str]:
        """The integer `[batch, seq]` inputs whose shape is `array`'s first two axes."""
        if array.ndim < 3:
            return []
        return [
            name
            for name, fed in sorted(self.feeds.items())
            if fed.ndim == 2 and fed.shape == array.shape[:2] and _integer(fed)
        ]


def hidden_size(weight_shapes: Sequence[tuple[int, ...]]) -> int | None:
    """The commonest length of the one-dimensional weights (`weight_shapes`: the model's float
    weights), when at least two share it; None otherwise."""
    lengths = Counter(shape[0] for shape in weight_shapes if len(shape) == 1 and shape[0] > 1)
    if not lengths:
        return None
    length, count = lengths.most_common(1)[0]
    return length if count >= 2 else None


def is_mask_name(name: str) -> bool:
    """Whether an input's name says it is a mask (see the module's rule)."""
    lower = name.lower()
    return lower in MASK_NAMES or lower.endswith("_mask")


def _integer(array: np.ndarray) -> bool:
    return np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_


def _preference(name: str) -> tuple[int, str]:
    lower = name.lower()
    return (MASK_NAMES.index(lower) if lower in MASK_NAMES else len(MASK_NAMES), name)


def find_mask(
    name: str, role: OutputRole, array: np.ndarray, feeds: Mapping[str, np.ndarray] | None
) -> str | None:
    """The input that marks output `name`'s valid positions: the one `role` names (checked to
    fit), else the one the rule finds in `feeds`; NO_MASK when the role says none; None for a
    role or shape judged whole. Raises UsageError when the named input is not a mask of the
    output's `[batch, seq]`."""
    if role.mask not in (None, NO_MASK) and array.ndim < 3:
        raise UsageError(
            f"Output '{name}' (shape {list(array.shape)}) has no positions for mask={role.mask} "
            "to mark: a mask marks the tokens of a [batch, seq, ...] output."
        )
    if role.role not in MASKED or array.ndim < 3 or role.mask == NO_MASK:
        return role.mask if role.mask == NO_MASK else None
    if role.mask is not None:
        if feeds:  # checked where the inputs are known (the comparison checks them again)
            _check_mask(name, role.mask, array, feeds)
        return role.mask
    if not feeds:
        return None
    fitting = [
        input_name
        for input_name in InputEvidence(feeds).token_inputs(array)
        if is_mask_name(input_name)
    ]
    return min(fitting, key=_preference) if fitting else None


def _check_mask(name: str, mask: str, array: np.ndarray, feeds: Mapping[str, np.ndarray]) -> None:
    if mask not in feeds:
        raise UsageError(
            f"Output '{name}' is judged over the positions input '{mask}' marks, but the model's "
            f"inputs are {', '.join(sorted(feeds))}; name one with "
            f"--output-role {name}=ROLE:mask=INPUT (or mask=none)."
        )
    fed = feeds[mask]
    if fed.ndim != 2 or fed.shape != array.shape[:2] or not _integer(fed):
        raise UsageError(
            f"Output '{name}' (shape {list(array.shape)}) is judged over the positions input "
            f"'{mask}' marks, but '{mask}' is {fed.dtype} of shape {list(fed.shape)}: a mask is "
            f"integer or boolean [batch, seq] = {list(array.shape[:2])}."
        )


def valid_positions(
    name: str, role: OutputRole, array: np.ndarray, feeds: Mapping[str, np.ndarray] | None
) -> np.ndarray | None:
    """Where output `name` is judged: a boolean `[batch, seq]` (True: a token), from the input
    `role.mask` names; None: every position. Raises UsageError when that input was not fed."""
    if role.role not in MASKED or role.mask in (None, NO_MASK) or array.ndim < 3:
        return None
    assert role.mask is not None
    if feeds is None or role.mask not in feeds:
        raise UsageError(
            f"Output '{name}' is judged over the tokens input '{role.mask}' marks, and the "
            "inputs were not given to the comparison."
        )
    _check_mask(name, role.mask, array, feeds)
    return np.asarray(feeds[role.mask]) != 0


def spread(valid: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A `[batch, seq]` mask broadcast over an output of `shape` (`[batch, seq, ...]`)."""
    extra = len(shape) - valid.ndim
    return np.broadcast_to(valid.reshape(valid.shape + (1,) * extra), shape)


def sample_shares(hits: np.ndarray, valid: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(per counted sample, the share of its valid positions where `hits` holds; which samples
    were counted: those with a valid position). `hits` is `[batch, ...]`; `valid` its
    `[batch, seq]` mask (None: every position)."""
    flat = hits.reshape(len(hits), -1).astype(np.float64)
    if valid is None:
        return flat.mean(axis=1) if flat.shape[1] else np.ones(len(flat)), np.ones(len(hits), bool)
    marks = spread(valid, hits.shape).reshape(len(hits), -1)
    counts = marks.sum(axis=1)
    counted = counts > 0
    shares = (flat * marks).sum(axis=1)[counted] / counts[counted]
    return shares, counted


def text_role(
    name: str, array: np.ndarray, final_op: str, evidence: InputEvidence | None
) -> OutputRole | None:
    """The role the rules of the module's docstring give a float output, None when none
    applies."""
    if not np.issubdtype(array.dtype, np.floating):
        return None
    lower = name.lower()
    if array.ndim == 2 and array.shape[1] > 1:
        return _vector_role(lower, array, final_op)
    if array.ndim != 3 or array.shape[-1] < 2:
        return None
    shape = "[batch, " + ", ".join(str(d) for d in array.shape[1:]) + "]"
    width = array.shape[-1]
    if any(word in lower for word in SCORE_NAMES):
        return OutputRole(CLASS_MAP, f"inferred: {shape} named '{name}' (class scores per token)")
    if any(word in lower for word in SEQUENCE_NAMES):
        return OutputRole(EMBEDDING, f"inferred: {shape} named '{name}' (a vector per token)")
    tokens = evidence.token_inputs(array) if evidence is not None else []
    hidden = evidence.hidden_size if evidence is not None else None
    if not tokens or hidden is None:
        return None
    fed = f"integer inputs ({', '.join(tokens)}) feed {shape}"
    if width >= FAR_ABOVE * hidden:
        why = f"{fed}, {width} classes over a hidden size of {hidden} (class scores per token)"
        return OutputRole(CLASS_MAP, f"inferred: {why}")
    if width == hidden:
        why = f"{fed}, the model's hidden size (a vector per token)"
        return OutputRole(EMBEDDING, f"inferred: {why}")
    return None


def _vector_role(lower: str, array: np.ndarray, final_op: str) -> OutputRole | None:
    """An embedding `[batch, D]`: named like one, or a Tanh or unit-length rows with D at
    least MIN_VECTOR."""
    width = array.shape[1]
    if any(word in lower for word in EMBEDDING_NAMES):
        return OutputRole(EMBEDDING, f"inferred: [batch, {width}] named like an embedding")
    if width < MIN_VECTOR:
        return None
    if final_op == "Tanh":
        return OutputRole(EMBEDDING, f"inferred: Tanh at the end of [batch, {width}] (a vector)")
    norms = np.linalg.norm(array.astype(np.float64), axis=1)
    if len(norms) and bool(np.all(np.abs(norms - 1.0) <= UNIT_LENGTH)):
        why = f"inferred: [batch, {width}] rows of unit length (an L2-normalised embedding)"
        return OutputRole(EMBEDDING, why)
    return None
