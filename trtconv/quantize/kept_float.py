"""The nodes Q/DQ quantisation leaves in float whatever the ladder decides, read from the graph."""

from __future__ import annotations

from pathlib import Path

from trtconv.core.lazy import require


def softmax_nodes(path: Path) -> list[str]:
    """Names of the Softmax nodes, which quantisation must leave in float.

    A quantised Softmax maps every probability of a low-confidence output (a random-weight
    ResNet-50: ~0.001 each) to the same uint8 step, so the top-1 class degenerates to index 0
    (top-1 agreement 0.0 measured); in float it costs nothing measurable on ORT CPU and the
    class ranking survives.
    """
    onnx = require("onnx")
    model = onnx.load(str(path), load_external_data=False)
    return [node.name for node in model.graph.node if node.op_type == "Softmax"]
