"""Export a trained model as a float32 inference SavedModel with a named serving signature."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtconv.core.lazy import require
from trtconv.train.amp import set_policy
from trtconv.zoo import ModelConfig

OUTPUT_NAME = "probabilities"


def float32_copy(
    weights: list[Any], config: ModelConfig, input_shape: tuple[int, ...], num_classes: int
) -> Any:
    """Rebuild the graph under the float32 policy and load the trained (float32) `weights`.

    Under mixed precision the variables are already float32 but the graph computes in
    bfloat16/float16; converters need a float32 graph (tf2onnx fails on bfloat16) and pick their
    own precision.
    """
    previous = set_policy("float32")
    try:
        model = config.build(input_shape, num_classes)
    finally:
        set_policy(previous.name)
    model.set_weights(weights)
    return model


def export_saved_model(
    model: Any, path: Path, input_name: str, input_shape: tuple[int, ...]
) -> None:
    """Write `model` (logits out) as a SavedModel: `serving_default(input_name) -> probabilities`.

    The batch dimension is dynamic.
    """
    tf = require("tensorflow")
    spec = tf.TensorSpec([None, *input_shape], tf.float32, name=input_name)

    @tf.function(input_signature=[spec])
    def serve(image: Any) -> dict[str, Any]:
        return {OUTPUT_NAME: tf.nn.softmax(model(image, training=False), axis=-1)}

    module = tf.Module()
    module.model = model  # tracked: its variables are saved with the module
    module.serve = serve
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
