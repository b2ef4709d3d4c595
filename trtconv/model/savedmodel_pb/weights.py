"""The shapes of a SavedModel's float weights, read from saved_model.pb (no TensorFlow): what a
model's hidden size is inferred from (trtconv.outputs.tokens.hidden_size).

A TensorFlow 2 SavedModel declares each variable in its top-level graph as a `VarHandleOp` node
whose attributes hold its `dtype` and `shape`:

    MetaGraphDef.graph_def = 2; GraphDef.node = 1; NodeDef.op = 2, .attr = 5 (map<string,
    AttrValue>); AttrValue.shape = 7, .type = 6; TensorShapeProto.dim = 2; Dim.size = 1
"""

from __future__ import annotations

import logging
from pathlib import Path

from trtconv.core.protowire import fields, int64, map_entries, messages, string

log = logging.getLogger(__name__)

FLOAT_TYPES = {1, 2, 14, 19}  # DT_FLOAT, DT_DOUBLE, DT_BFLOAT16, DT_HALF


def _varint_field(data: bytes, number: int) -> int | None:
    return next(
        (v for n, w, v in fields(data) if n == number and w == 0 and isinstance(v, int)), None
    )


def _attr(attrs: dict[str, bytes], key: str) -> bytes:
    """A NodeDef's attribute (an AttrValue message; empty when absent)."""
    return attrs.get(key, b"")


def _shape(node: bytes) -> tuple[int, ...] | None:
    """A float VarHandleOp's shape; None for another node or dtype."""
    if string(node, 2) != "VarHandleOp":
        return None
    attrs = map_entries(node, 5)
    if _varint_field(_attr(attrs, "dtype"), 6) not in FLOAT_TYPES:
        return None
    shape = _attr(attrs, "shape")
    dims = [int64(_varint_field(dim, 1) or 0) for dim in messages(b"".join(messages(shape, 7)), 2)]
    return tuple(dims)


def weight_shapes(saved_model: Path) -> list[tuple[int, ...]]:
    """The shapes of the float variables of `saved_model`'s graph (one per variable handle);
    [] when saved_model.pb cannot be read or declares none (a TF1 graph keeps its weights as
    other ops)."""
    try:
        data = (Path(saved_model) / "saved_model.pb").read_bytes()
        graph = b"".join(messages(messages(data, 2)[0], 2))
        found = (_shape(node) for node in messages(graph, 1))
        return [shape for shape in found if shape is not None]
    except (OSError, ValueError, IndexError, UnicodeDecodeError) as exc:
        log.debug("could not read the weights of %s: %s", saved_model, exc)
        return []
