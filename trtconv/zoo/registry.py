"""The registry: one ModelConfig per model name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trtconv.core.errors import UsageError
from trtconv.zoo.digits_cnn import build_digits_cnn
from trtconv.zoo.resnet import build_resnet50_v15


@dataclass(frozen=True)
class ModelConfig:
    """How to build and feed one zoo model.

    `build(input_shape, num_classes)` returns an uncompiled Keras model whose last layer computes
    in float32 and emits logits; `input_shape` excludes the batch dimension.
    """

    name: str
    description: str
    build: Callable[[tuple[int, ...], int], Any]
    input_shape: tuple[int, ...]
    num_classes: int
    input_name: str = "image"
    default_data: str = "digits"
    default_epochs: int = 20
    default_batch_size: int = 32
    learning_rate: float = 1e-3
    # Preprocessing recorded in the model card: image folders are decoded, resized to
    # input_shape[:2] and scaled as x * scale + offset.
    preprocessing: dict[str, Any] = field(
        default_factory=lambda: {"scale": 1.0 / 255.0, "offset": 0.0, "layout": "NHWC"}
    )


MODELS: dict[str, ModelConfig] = {
    config.name: config
    for config in (
        ModelConfig(
            name="digits-cnn",
            description="Small CNN for scikit-learn's 8x8 digits; trains in seconds on a CPU.",
            build=build_digits_cnn,
            input_shape=(8, 8, 1),
            num_classes=10,
            preprocessing={"scale": 1.0 / 16.0, "offset": 0.0, "layout": "NHWC"},
        ),
        ModelConfig(
            name="resnet50",
            description="ResNet-50 v1.5 (stride 2 on the 3x3 conv); any input size and classes.",
            build=build_resnet50_v15,
            input_shape=(224, 224, 3),
            num_classes=1000,
            default_data="synthetic",
            default_epochs=1,
            default_batch_size=32,
            learning_rate=0.1,
        ),
    )
}


def get_model(name: str) -> ModelConfig:
    """Look a model up by name; a wrong name lists the known ones."""
    try:
        return MODELS[name]
    except KeyError:
        known = ", ".join(sorted(MODELS))
        raise UsageError(f"Unknown model '{name}'; known models: {known}.") from None
