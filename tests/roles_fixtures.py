"""Models whose outputs are not one row of class scores per sample (issue 18): a UNet-like
segmenter with a per-pixel softmax, and a classifier that also returns its int64 class id.
Each trains for a few seconds on the digits; built once per session (cached functions)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
from convert_fixtures import _save_serving, save_npz, work_dir

from trtconv.calib.sources import ArraySet, load_digits, split_holdout

MASK_CLASSES = 3  # background, light ink, dark ink


def masks(images: np.ndarray) -> np.ndarray:
    """[N, 8, 8] int64 per-pixel classes of 8x8 digits: 0 below 0.25, 1 up to 0.6, 2 above."""
    pixels = images[..., 0]
    return ((pixels > 0.25).astype(np.int64) + (pixels > 0.6)).astype(np.int64)


def mask_data() -> ArraySet:
    """All digits with per-pixel labels [N, 8, 8]."""
    digits = load_digits("all")
    return ArraySet({"x": digits.x}, masks(digits.x), "digit-masks")


@functools.cache
def mask_npz() -> Path:
    """mask_data saved as an .npz with arrays x and y (y of shape [N, 8, 8])."""
    return save_npz(mask_data(), "digit_masks.npz")


@functools.cache
def unet_model() -> Path:
    """A UNet-like segmenter: conv, pool, conv, upsample, skip concat, conv, and a per-pixel
    softmax `mask` [N, 8, 8, 3]."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    train, _ = split_holdout(mask_data())
    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    down = layers.Conv2D(8, 3, padding="same", activation="relu")(inputs)
    low = layers.Conv2D(16, 3, padding="same", activation="relu")(layers.MaxPooling2D()(down))
    up = layers.Concatenate()([down, layers.UpSampling2D()(low)])
    x = layers.Conv2D(8, 3, padding="same", activation="relu")(up)
    model = keras.Model(inputs, layers.Conv2D(MASK_CLASSES, 1, activation="softmax")(x))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    model.fit(train.x, train.labels, epochs=8, batch_size=32, verbose=0)
    spec = tf.TensorSpec([None, 8, 8, 1], tf.float32, name="image")
    return _save_serving(
        model,
        lambda image: {"mask": model(image, training=False)},
        work_dir() / "unet" / "saved_model",
        spec,
    )


@functools.cache
def class_id_model() -> Path:
    """A digits classifier returning `probabilities` [N, 10] (softmax) and `class_id` [N]
    (int64, tf.argmax of the probabilities)."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    digits = load_digits("all")
    train, _ = split_holdout(digits)
    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    x = layers.Flatten()(layers.Conv2D(8, 3, padding="same", activation="relu")(inputs))
    x = layers.Dense(32, activation="relu")(x)
    model = keras.Model(inputs, layers.Dense(10, activation="softmax")(x))
    # Trained briefly: close top-2 scores, so int8 flips a few class ids (as a real model's).
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy")
    model.fit(train.x, train.labels, epochs=2, batch_size=32, verbose=0)

    def outputs(image: tf.Tensor) -> dict[str, tf.Tensor]:
        probabilities = model(image, training=False)
        return {"probabilities": probabilities, "class_id": tf.argmax(probabilities, axis=-1)}

    spec = tf.TensorSpec([None, 8, 8, 1], tf.float32, name="image")
    return _save_serving(model, outputs, work_dir() / "class_id" / "saved_model", spec)


@functools.cache
def float16_model() -> Path:
    """A digits classifier built with Keras' mixed_float16 policy on every layer, the last
    included (the common mistake): its `probabilities` [N, 10] are float16."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    train, _ = split_holdout(load_digits("all"))
    layers, policy = keras.layers, "mixed_float16"  # per layer: no global policy to restore
    inputs = keras.Input((8, 8, 1), name="image")
    x = layers.Conv2D(8, 3, padding="same", activation="relu", dtype=policy)(inputs)
    x = layers.Dense(32, activation="relu", dtype=policy)(layers.Flatten(dtype=policy)(x))
    model = keras.Model(inputs, layers.Dense(10, activation="softmax", dtype=policy)(x))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="sparse_categorical_crossentropy")
    model.fit(train.x, train.labels, epochs=10, batch_size=32, verbose=0)
    spec = tf.TensorSpec([None, 8, 8, 1], tf.float32, name="image")
    return _save_serving(
        model,
        lambda image: {"probabilities": model(image, training=False)},
        work_dir() / "float16" / "saved_model",
        spec,
    )


@functools.cache
def digits_npz() -> Path:
    """All digits with their labels as an .npz."""
    return save_npz(load_digits("all"), "digits_all.npz")


if __name__ == "__main__":  # build the models into a directory to try the CLI on them
    import shutil
    import sys

    target = Path(sys.argv[1])
    models = (("unet", unet_model), ("class_id", class_id_model), ("float16", float16_model))
    for name, build in models:
        shutil.copytree(build(), target / name, dirs_exist_ok=True)
    shutil.copy(mask_npz(), target / "masks.npz")
    shutil.copy(digits_npz(), target / "digits.npz")
