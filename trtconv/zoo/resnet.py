"""ResNet-50 v1.5, as in NVIDIA's DeepLearningExamples: the stride-2 sits on the 3x3 conv."""

from __future__ import annotations

from typing import Any

from trtconv.core.lazy import require

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, first stride)


def _bottleneck(x: Any, width: int, stride: int, name: str) -> Any:
    keras = require("keras")
    layers = keras.layers
    shortcut = x
    if stride != 1 or x.shape[-1] != width * 4:
        shortcut = layers.Conv2D(width * 4, 1, strides=stride, use_bias=False, name=f"{name}_proj")(
            x
        )
        shortcut = layers.BatchNormalization(epsilon=1e-5, name=f"{name}_proj_bn")(shortcut)
    y = layers.Conv2D(width, 1, use_bias=False, name=f"{name}_conv1")(x)
    y = layers.BatchNormalization(epsilon=1e-5, name=f"{name}_bn1")(y)
    y = layers.ReLU(name=f"{name}_relu1")(y)
    # v1.5: the downsampling stride is on the 3x3 conv, not the first 1x1.
    y = layers.Conv2D(
        width, 3, strides=stride, padding="same", use_bias=False, name=f"{name}_conv2"
    )(y)
    y = layers.BatchNormalization(epsilon=1e-5, name=f"{name}_bn2")(y)
    y = layers.ReLU(name=f"{name}_relu2")(y)
    y = layers.Conv2D(width * 4, 1, use_bias=False, name=f"{name}_conv3")(y)
    y = layers.BatchNormalization(epsilon=1e-5, name=f"{name}_bn3")(y)
    y = layers.Add(name=f"{name}_add")([shortcut, y])
    return layers.ReLU(name=f"{name}_out")(y)


def build_resnet50_v15(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """ResNet-50 v1.5 for NHWC `input_shape` (any size >= 32) and `num_classes` classes."""
    keras = require("keras")
    layers = keras.layers
    inputs = keras.Input(shape=input_shape, name="image")
    x = layers.Conv2D(64, 7, strides=2, padding="same", use_bias=False, name="stem_conv")(inputs)
    x = layers.BatchNormalization(epsilon=1e-5, name="stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    x = layers.MaxPooling2D(3, strides=2, padding="same", name="stem_pool")(x)
    for stage, (width, blocks, stride) in enumerate(STAGES, start=1):
        for block in range(blocks):
            x = _bottleneck(x, width, stride if block == 0 else 1, f"s{stage}b{block + 1}")
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    logits = layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name="resnet50_v15")
