"""Where an ONNX node of a tf2onnx export came from in TensorFlow: its op and layer, read from the
names tf2onnx and ONNX Runtime give (what the fp16 report, the int8 ladder and OpenVINO's ladder
name a kept node by)."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
class TfOrigin:
    """The TensorFlow op an ONNX node came from and its layer (None: not known)."""

    tf_op: str | None = None
    tf_layer: str | None = None


def tf_origin(node_name: str, tensors: tuple[str, ...] = ()) -> TfOrigin:
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
        return TfOrigin("/".join(parts), "/".join(parts[:-1]))
    for tensor in tensors:
        parts = _tf_parts(tensor.split(":")[0].removesuffix(DQ_OUTPUT))
        if len(parts) >= 3:
            return TfOrigin("/".join(parts[:-1]), "/".join(parts[:-2]))
    return TfOrigin()


def _tf_parts(name: str) -> list[str]:
    """The scope parts of a tf2onnx name, without its function calls (TF_CALL) and the "__N"
    tail tf2onnx gives the nodes it adds."""
    parts = [TF2ONNX_SUFFIX.sub("", part) for part in name.split("/") if part]
    return [part for part in parts if not TF_CALL.match(part)]
