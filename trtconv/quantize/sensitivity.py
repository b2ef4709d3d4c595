"""Which quantised nodes hurt the output: a one-node-at-a-time probe on the search data.

For every node the full Q/DQ model quantises (convolutions, matrix products, additions, ...),
a model with *only that node* quantised is built from the cached calibration (ONNX Runtime's
`nodes_to_quantize`) and run on the search data; its output error against the float model is
that node's contribution. Measured alone, a node's error does not depend on which others are
quantised: two nodes that quantise the same tensor (a producer quantises its output, the consumer
its input) both show it, and keeping both in float is what removes it. ONNX Runtime's
`qdq_loss_debug` compares tensors instead (each activation's float vs dequantised value); that
says where the values drift, not how much each node costs the output, which is what the ladder
trades against speed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from trtconv.core.lazy import require
from trtconv.onnxlib.tf_names import TfOrigin, tf_origin

log = logging.getLogger(__name__)

# Ops whose quantised output reuses their input's scale: no rounding of their own, nothing to
# gain by keeping them in float.
DATA_MOVEMENT = frozenset(
    {
        "Reshape",
        "Transpose",
        "Squeeze",
        "Unsqueeze",
        "Flatten",
        "Gather",
        "Slice",
        "Split",
        "MaxPool",
        "Resize",
        "Pad",
        "Identity",
        "DepthToSpace",
        "SpaceToDepth",
    }
)


@dataclass(frozen=True)
class QuantizedNode:
    """A node the Q/DQ model quantises, named as in the pre-processed model; `tensors` are the
    names it reads and writes, weights first (where its TensorFlow origin may show)."""

    name: str
    op_type: str
    tensors: tuple[str, ...] = ()

    @property
    def origin(self) -> TfOrigin:
        """The TensorFlow op and layer this node came from."""
        return tf_origin(self.name, self.tensors)


def quantized_nodes(qdq_model: Path, kept_float: Collection[str] = ()) -> list[QuantizedNode]:
    """The nodes of a Q/DQ model that ONNX Runtime quantised, in graph order.

    Those of a quantisable op type reading a dequantised input, except the nodes in
    `kept_float` (Softmax reads the dequantised logits but stays float) and pure data movement
    (DATA_MOVEMENT).
    """
    onnx = require("onnx")
    registry = require("onnxruntime.quantization.registry")
    # What quantize_static quantises when given no op types, less what has nothing to gain.
    quantizable = (set(registry.QDQRegistry) | set(registry.QLinearOpsRegistry)) - DATA_MOVEMENT
    model = onnx.load(str(qdq_model), load_external_data=False)
    dequantized = {
        output
        for node in model.graph.node
        if node.op_type == "DequantizeLinear"
        for output in node.output
    }
    return [
        QuantizedNode(node.name, node.op_type, (*node.input[1:], *node.output, *node.input[:1]))
        for node in model.graph.node
        if node.op_type in quantizable
        and node.name not in kept_float
        and any(name in dequantized for name in node.input)
    ]


# error_of(nodes quantised alone) -> output error, or None when that probe could not run.
ProbeError = Callable[[QuantizedNode], float | None]


def rank_by_sensitivity(
    nodes: list[QuantizedNode],
    error_of: ProbeError,
    out_of_time: Callable[[], bool],
    report: Callable[[str], None],
) -> list[tuple[QuantizedNode, float]]:
    """(node, output error with only that node quantised), worst first.

    Stops early when `out_of_time()` says so: the ranking then holds the nodes probed so far.
    """
    measured: list[tuple[QuantizedNode, float]] = []
    for index, node in enumerate(nodes):
        if out_of_time():
            log.warning(
                "int8 ladder: time limit reached after probing %d of %d nodes", index, len(nodes)
            )
            break
        report(f"sensitivity {index + 1}/{len(nodes)}: {node.name}")
        error = error_of(node)
        if error is not None:
            measured.append((node, error))
    return sorted(measured, key=lambda item: item[1], reverse=True)
