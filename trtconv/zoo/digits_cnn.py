"""digits-cnn: a small convolutional classifier for 8x8 grey images."""

from __future__ import annotations

from typing import Any

from trtconv.core.lazy import require


def build_digits_cnn(input_shape: tuple[int, ...], num_classes: int) -> Any:
    """Conv-BN-ReLU x2, pooling, and a dense head; logits out, last layer in float32."""
    keras = require("keras")
    layers = keras.layers
    inputs = keras.Input(shape=input_shape, name="image")
    x = layers.Conv2D(32, 3, padding="same", use_bias=False, name="conv1")(inputs)
    x = layers.BatchNormalization(name="bn1")(x)
    x = layers.ReLU(name="relu1")(x)
    x = layers.Conv2D(64, 3, padding="same", use_bias=False, name="conv2")(x)
    x = layers.BatchNormalization(name="bn2")(x)
    x = layers.ReLU(name="relu2")(x)
    x = layers.MaxPooling2D(name="pool")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(128, activation="relu", name="fc1")(x)
    x = layers.Dropout(0.3, name="dropout")(x)
    # Under mixed precision the logits must be float32 for a stable softmax and loss.
    logits = layers.Dense(num_classes, dtype="float32", name="logits")(x)
    return keras.Model(inputs, logits, name="digits_cnn")
