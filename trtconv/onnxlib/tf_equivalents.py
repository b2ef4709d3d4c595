"""TensorFlow ops tf2onnx 1.17 leaves unconverted although ONNX computes them exactly, each
registered as a tf2onnx op handler (its own extension point, `tf2onnx.handler.tf_op`) in the
export process before the conversion starts.

TensorFlow 2.21 writes exact GELU (`tf.nn.gelu`, Keras 3's default `gelu`) with `Erfc`, which
2.17 wrote with `Erf`; tf2onnx has no handler for it and leaves the TensorFlow op in the graph,
which the ONNX checker then refuses ("No Op registered for Erfc"). Erfc(x) = 1 - Erf(x): the
same function; in float32 it loses only the far tail's relative precision (erfc(5) = 1.5e-12
becomes 0), which GELU multiplies by a bounded x and so never shows in an absolute error.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

# What tf2onnx says of a TensorFlow op it leaves unconverted (its conversion log).
UNSUPPORTED = re.compile(
    r"Tensorflow op \[(?P<node>[^\]]*?): (?P<op>[A-Za-z0-9_]+)\] is not supported"
)


class _Erfc:
    """Erfc(x) -> Sub(1, Erf(x)), the constant in x's dtype (float16, float32 or float64)."""

    @classmethod
    def version_9(cls, ctx: Any, node: Any, **kwargs: Any) -> None:  # Erf: opset 9
        from tf2onnx import utils

        source = node.input[0]
        dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(source))
        one = ctx.make_const(utils.make_name(f"{node.name}/one"), np.array(1, dtype=dtype))
        erf = ctx.make_node("Erf", [source], op_name_scope=node.name)
        node.type = "Sub"
        ctx.replace_inputs(node, [one.output[0], erf.output[0]])


# TensorFlow op -> its tf2onnx handler (docs/backends.md names what each becomes).
HANDLERS: dict[str, type] = {"Erfc": _Erfc}


def register() -> None:
    """Register the handlers of HANDLERS with tf2onnx (call it in the export process, before
    tf2onnx converts)."""
    from tf2onnx.handler import tf_op

    for op, handler in HANDLERS.items():
        tf_op(op)(handler)


def unsupported_ops(log: str) -> dict[str, list[str]]:
    """The TensorFlow ops tf2onnx's log says it left unconverted: op type -> node names."""
    found: dict[str, list[str]] = {}
    for match in UNSUPPORTED.finditer(log):
        found.setdefault(match.group("op"), []).append(match.group("node"))
    return found


def unsupported_text(found: dict[str, list[str]]) -> str:
    """'Erfinv (2 nodes, e.g. model/dense/Erfinv)': the ops ONNX has no operator for, named."""
    return ", ".join(
        f"{op} ({len(nodes)} node{'s' if len(nodes) > 1 else ''}, e.g. {nodes[0]})"
        for op, nodes in sorted(found.items())
    )
