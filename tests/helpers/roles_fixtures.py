"""Models whose outputs are not one row of class scores per sample: a UNet-like
segmenter with a per-pixel softmax, and a classifier that also returns its int64 class id.
Each trains for a few seconds on the digits; built once per session (cached functions)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.helpers.fixture_files import save_npz, save_serving
from tests.helpers.model_cache import built_once, shared_dir
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


@built_once
def mask_npz() -> Path:
    """mask_data saved as an .npz with arrays x and y (y of shape [N, 8, 8])."""
    return save_npz(mask_data(), "digit_masks.npz")


@built_once
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
    return save_serving(
        model,
        lambda image: {"mask": model(image, training=False)},
        shared_dir() / "unet" / "saved_model",
        spec,
    )


@built_once
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
    return save_serving(model, outputs, shared_dir() / "class_id" / "saved_model", spec)


@built_once
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
    return save_serving(
        model,
        lambda image: {"probabilities": model(image, training=False)},
        shared_dir() / "float16" / "saved_model",
        spec,
    )


FRAMES, BINS, LIVE_BINS = 32, 24, 12  # a [N, 32, 24] "spectrogram"; notes in the first 12 bins


def frames(samples: int = 1000) -> np.ndarray:
    """[N, 32, 24] frames in [0, 0.3] with sparse notes (about 4% of the live bins) in [0.6, 1]."""
    rng = np.random.default_rng(7)
    x = rng.uniform(0.0, 0.3, (samples, FRAMES, BINS))
    notes = rng.random(x.shape) < 0.04
    notes[..., LIVE_BINS:] = False
    return np.where(notes, rng.uniform(0.6, 1.0, x.shape), x).astype(np.float32)


@built_once
def frames_npz() -> Path:
    """frames() as an .npz holding only `x` (no labels)."""
    path = shared_dir() / "frames.npz"
    np.savez(path, x=frames())
    return path


@built_once
def frame_map_model(lost: bool = False) -> Path:
    """Per-frame sigmoid maps `onset` [N, 32, 24]: a Dense over the bins, weights set by hand.

    Good: logit 20 (x - 0.5) on every bin: notes at +2..+10, the rest at -10..-4. `lost`: the
    notes sit just above the threshold (logit 0.6 (x - 0.45): +0.09..+0.33) while the upper
    bins are switched off at -200; one int8 scale over that range (~0.8 a step) rounds every
    note's logit to 0 or below: int8 loses the positives, as on a real model with a wide range.
    """
    import keras
    import tensorflow as tf

    inputs = keras.Input((FRAMES, BINS), name="frames")
    dense = keras.layers.Dense(BINS, name="notes")
    model = keras.Model(inputs, keras.layers.Activation("sigmoid")(dense(inputs)))
    scale, centre = (0.6, 0.45) if lost else (20.0, 0.5)
    kernel = np.eye(BINS, dtype=np.float32) * scale
    bias = np.full(BINS, -scale * centre, np.float32)
    if lost:
        kernel[:, LIVE_BINS:] = 0.0
        bias[LIVE_BINS:] = -200.0
    dense.set_weights([kernel, bias])
    spec = tf.TensorSpec([None, FRAMES, BINS], tf.float32, name="frames")
    name = "frames_lost" if lost else "frames_good"
    return save_serving(
        model,
        lambda x: {"onset": model(x, training=False)},
        shared_dir() / name / "saved_model",
        spec,
    )


def proposal_images(samples: int = 1000) -> np.ndarray:
    """[N, 16, 16, 1] images: noise with one bright 4x4 square (a "face") in most of them."""
    rng = np.random.default_rng(3)
    x = rng.uniform(0.0, 0.2, (samples, 16, 16, 1))
    for image, (row, col), face in zip(
        x, rng.integers(0, 12, (samples, 2)), rng.random(samples) < 0.8, strict=True
    ):
        if face:
            image[row : row + 4, col : col + 4] = rng.uniform(0.7, 1.0)
    return x.astype(np.float32)


@built_once
def proposal_npz() -> Path:
    """proposal_images() as an .npz holding only `x`."""
    path = shared_dir() / "proposals.npz"
    np.savez(path, x=proposal_images())
    return path


@built_once
def proposal_model() -> Path:
    """A fully convolutional proposal net (as a face detector's first stage): two 3x3 convs,
    then a 1x1 sigmoid `face_prob` [N, 12, 12, 1] and a 1x1 box map `bbox` [N, 12, 12, 4]
    (no activation), random weights with the score biased so that bright squares light it."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    layers = keras.layers
    inputs = keras.Input((16, 16, 1), name="image")
    x = layers.Conv2D(8, 3, activation="relu")(inputs)
    x = layers.Conv2D(8, 3, activation="relu")(x)
    score = layers.Conv2D(1, 1, activation="sigmoid", name="face_prob")(x)
    boxes = layers.Conv2D(4, 1, name="bbox")(x)
    model = keras.Model(inputs, [score, boxes])
    # The score: the mean of the feature map against a threshold between noise and squares.
    features = keras.Model(inputs, x).predict(proposal_images(200), verbose=0)
    pooled = features.mean(axis=-1)
    cut = float(np.quantile(pooled, 0.9))
    score_layer = model.get_layer("face_prob")
    # logit 60 (mean / cut - 1): 0 at the cut, steep enough that int8 keeps the decisions.
    weight = np.full((1, 1, 8, 1), 60.0 / (8 * max(cut, 1e-3)), np.float32)
    score_layer.set_weights([weight, np.array([-60.0], np.float32)])

    def outputs(image: tf.Tensor) -> dict[str, tf.Tensor]:
        found = model(image, training=False)
        return {"face_prob": found[0], "bbox": found[1]}

    spec = tf.TensorSpec([None, 16, 16, 1], tf.float32, name="image")
    return save_serving(model, outputs, shared_dir() / "proposals" / "saved_model", spec)


@built_once
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
