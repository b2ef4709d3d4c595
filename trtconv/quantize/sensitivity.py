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
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtconv.core.lazy import require

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
# The function calls of a TensorFlow graph, as tf2onnx keeps them in the names of the ops it
# inlines: the SavedModel's own call ("StatefulPartitionedCall/..."), and the calls inside it of
# functions that layers bring (a model revived from a Keras 2 SavedModel calls each layer's saved
# function: "model/front/cqt/StatefulPartitionedCall/StatefulPartitionedCall/MatMul"). Neither
# names a layer. And the tail tf2onnx adds to the helper nodes it creates ("BiasAdd__6").
TF_CALL = re.compile(r"^(Stateful)?PartitionedCall(_\d+)?$")
# What ONNX Runtime's quantiser appends to the name of a tensor it dequantises.
DQ_OUTPUT = "_DequantizeLinear_Output"
TF2ONNX_SUFFIX = re.compile(r"__\d+$")


@dataclass(frozen=True)
class QuantizedNode:
    """A node the Q/DQ model quantises, named as in the pre-processed model; `tensors` are the
    names it reads and writes, weights first (where its TensorFlow origin may show)."""

    name: str
    op_type: str
    tensors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """{node, op_type, tf_op, tf_layer}: the ONNX node and the TensorFlow op it came from."""
        return {"node": self.name, "op_type": self.op_type, **tf_origin(self.name, self.tensors)}


def tf_origin(node_name: str, tensors: tuple[str, ...] = ()) -> dict[str, str | None]:
    """The TensorFlow op and layer (name scope) an ONNX node of a tf2onnx export came from.

    tf2onnx keeps TensorFlow's op names ("StatefulPartitionedCall/functional_1/dense_1/MatMul"),
    function calls left out wherever they are (a nested model's "model/front/cqt/
    StatefulPartitionedCall/StatefulPartitionedCall/MatMul" is op "model/front/cqt/MatMul");
    ONNX Runtime's fusions append their own part ("/MatMulAddFusion"). The layer is the op's name
    scope as TensorFlow traced it (Keras 3 scopes carry a "_1" suffix: layer "dense" traces as
    "dense_1"). A node tf2onnx renamed ("Conv__339", after moving NHWC convolutions to NCHW)
    is placed by the first of `tensors` with a TensorFlow name: a tensor "scope/op/read:0" comes
    from op "scope/op" of layer "scope". Neither: None.
    """
    parts = _tf_parts(node_name)
    if parts and parts[-1].endswith("Fusion"):
        parts.pop()
    if len(parts) >= 2:
        return {"tf_op": "/".join(parts), "tf_layer": "/".join(parts[:-1])}
    for tensor in tensors:
        parts = _tf_parts(tensor.split(":")[0].removesuffix(DQ_OUTPUT))
        if len(parts) >= 3:
            return {"tf_op": "/".join(parts[:-1]), "tf_layer": "/".join(parts[:-2])}
    return {"tf_op": None, "tf_layer": None}


def _tf_parts(name: str) -> list[str]:
    """The scope parts of a tf2onnx name, without its function calls (TF_CALL) and the "__N"
    tail tf2onnx gives the nodes it adds."""
    parts = [TF2ONNX_SUFFIX.sub("", part) for part in name.split("/") if part]
    return [part for part in parts if not TF_CALL.match(part)]


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
