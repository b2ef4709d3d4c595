"""Kept layers are named by their Keras layer: the function calls a nested or revived Keras model
leaves in tf2onnx names (".../PartitionedCall/PartitionedCall/...") are no layer."""

from __future__ import annotations

from trtconv.cli._fp16 import kept_by_layer
from trtconv.onnxlib.fp16_result import KeptNode
from trtconv.onnxlib.tf_names import TfOrigin, tf_origin
from trtconv.quantize.ladder_result import float_node
from trtconv.quantize.ladder_text import kept_text
from trtconv.quantize.sensitivity import QuantizedNode

# As tf2onnx named the ops of a layer of a Keras 2 audio model, inside a model inside a model.
NESTED = "StatefulPartitionedCall/model_1/cq_t2010v2_1/PartitionedCall/PartitionedCall"


def test_function_calls_inside_a_name_are_no_layer() -> None:
    assert tf_origin(f"{NESTED}/Conv2D") == TfOrigin(
        "model_1/cq_t2010v2_1/Conv2D", "model_1/cq_t2010v2_1"
    )
    assert tf_origin(f"{NESTED}_1/StatefulPartitionedCall_2/stft/Reshape__7") == TfOrigin(
        "model_1/cq_t2010v2_1/stft/Reshape", "model_1/cq_t2010v2_1/stft"
    )
    renamed = tf_origin("Conv__12", (f"{NESTED}/Conv2D/ReadVariableOp:0",))
    assert renamed.tf_layer == "model_1/cq_t2010v2_1"


def test_the_ladder_and_fp16_print_the_keras_layer() -> None:
    node = QuantizedNode(f"{NESTED}/Conv2D", "Conv", (f"{NESTED}/Conv2D/ReadVariableOp:0",))
    origin = node.origin
    assert (
        kept_text(float_node(node.name, node.op_type, origin, None))
        == "model_1/cq_t2010v2_1 (Conv)"
    )
    why = "underflow: 100% of its input below 6.1e-05"
    kept = [KeptNode(node.name, node.op_type, origin.tf_op, origin.tf_layer, why)]
    assert kept_by_layer(kept) == [
        "model_1/cq_t2010v2_1: Conv (underflow: 100% of its input below 6.1e-05)"
    ]
