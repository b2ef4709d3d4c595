"""Models a lower precision breaks on any CPU while float32 keeps them, each trained briefly on
the digits and built once per session (cached functions): the outlier model (int8 loses its
agreement) and the overflow model (a plain float16 copy overflows)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.helpers.model_cache import built_once, shared_dir
from trtconv.calib.sources import load_digits

# The outlier model: a few hidden channels carry a huge constant offset that the next layer's
# bias cancels. In float nothing changes; int8 quantises that activation with one scale per
# tensor, so its normal channels fall between two steps and the model loses most of its
# agreement, on any CPU (the error is the quantisation's own, not a kernel's saturation).
OUTLIER_OFFSET = 1000.0
OUTLIER_CHANNELS = (0, 1, 2)
OUTLIER_LAYERS = ("hidden", "logits")


def build_outlier_model() -> object:
    """A small digits classifier: conv -> flatten -> dense 'hidden' (relu) -> dense 'logits'."""
    import keras

    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    x = layers.Conv2D(8, 3, padding="same", activation="relu", name="conv")(inputs)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(32, activation="relu", name="hidden")(x)
    return keras.Model(inputs, layers.Dense(10, name="logits")(x))


@built_once
def outlier_model() -> Path:
    """The outlier model trained briefly on the digits training split; its SavedModel."""
    import keras

    from trtconv.train.export import export_saved_model

    keras.utils.set_random_seed(0)
    train = load_digits("train")
    model = build_outlier_model()
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(train.x, train.labels, epochs=8, batch_size=32, verbose=0)
    hidden, logits = (model.get_layer(name) for name in OUTLIER_LAYERS)
    w_hidden, b_hidden = hidden.get_weights()
    w_logits, b_logits = logits.get_weights()
    channels = list(OUTLIER_CHANNELS)
    b_hidden[channels] += OUTLIER_OFFSET  # relu(x + offset) = x + offset: always positive
    b_logits -= OUTLIER_OFFSET * w_logits[channels].sum(axis=0)
    hidden.set_weights([w_hidden, b_hidden])
    logits.set_weights([w_logits, b_logits])
    path = shared_dir() / "outlier" / "saved_model"
    export_saved_model(model, path, "image", (8, 8, 1))
    return path


# The float16 overflow model: a digits classifier whose hidden Dense layer 'wide' is scaled so its
# activations reach ~7e4 (float16's largest value is 65504) and whose LayerNormalization 'norm'
# cancels the scale: TensorFlow's outputs do not change, a plain float16 copy overflows
# (un-normalised features, large logits and attention scores do this in real models).
OVERFLOW_PEAK = 7e4
OVERFLOW_LAYERS = ("wide", "norm")


def build_overflow_model() -> object:
    """conv -> flatten -> dense 'wide' (relu) -> LayerNormalization 'norm' -> dense 'hidden'
    (relu) -> dense 'logits'."""
    import keras

    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    x = layers.Conv2D(8, 3, padding="same", activation="relu", name="conv")(inputs)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(64, activation="relu", name="wide")(x)
    x = layers.LayerNormalization(name="norm")(x)
    x = layers.Dense(32, activation="relu", name="hidden")(x)
    return keras.Model(inputs, layers.Dense(10, name="logits")(x))


@built_once
def overflow_model() -> Path:
    """The overflow model trained briefly on the digits training split, then 'wide' scaled so the
    median over samples of its largest activation is OVERFLOW_PEAK; its SavedModel."""
    import keras

    from trtconv.train.export import export_saved_model

    keras.utils.set_random_seed(0)
    train = load_digits("train")
    model = build_overflow_model()
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(train.x, train.labels, epochs=8, batch_size=32, verbose=0)
    wide = model.get_layer("wide")
    features = keras.Model(model.inputs, wide.output)
    peaks = np.abs(features.predict(train.x, verbose=0)).max(axis=1)
    scale = OVERFLOW_PEAK / float(np.median(peaks))
    kernel, bias = wide.get_weights()
    wide.set_weights([kernel * scale, bias * scale])  # relu(s * z) = s * relu(z), s > 0
    path = shared_dir() / "overflow" / "saved_model"
    export_saved_model(model, path, "image", (8, 8, 1))
    return path
