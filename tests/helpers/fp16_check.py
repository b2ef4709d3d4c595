"""An independent faithful float16 emulation for the tests (written with plain onnx and
onnxruntime, not trtconv's): a float32 copy of a float16 ONNX model in which every float16 tensor
is rounded through float16 where it is made, run with graph optimisations off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def independent_emulation(path: Path) -> Any:
    """An ONNX Runtime session (graph optimisations off) for a float32 copy of the float16 model
    at `path` in which every float16 tensor is rounded through float16 where it is made."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(path))
    inferred = onnx.shape_inference.infer_shapes(model).graph.value_info
    half = {v.name for v in inferred if v.type.tensor_type.elem_type == TensorProto.FLOAT16}
    graph = model.graph
    for tensor in [*graph.initializer, *(a.t for n in graph.node for a in n.attribute)]:
        if tensor.data_type == TensorProto.FLOAT16:
            values = numpy_helper.to_array(tensor).astype(np.float32)
            tensor.CopyFrom(numpy_helper.from_array(values, tensor.name))
    nodes = []
    for node in graph.node:
        nodes.append(node)
        for index, name in enumerate(node.output):
            if name in half:
                node.output[index] = f"{name}/computed"
                nodes.append(
                    helper.make_node("Cast", [f"{name}/computed"], [f"{name}/half"], to=10)
                )
                nodes.append(helper.make_node("Cast", [f"{name}/half"], [name], to=1))
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
