"""Models for the verdict tests: each a few-second Keras model on the digits, saved the way
users save theirs (tf.saved_model.save with a serving signature) with a model card naming its
data: two outputs (a box regression and a label), one sigmoid score, and a CNN over raw pixels
read from an image folder. Built once per session (cached functions)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.helpers.fixture_files import model_card, save_npz, save_serving
from tests.helpers.model_cache import built_once, shared_dir
from trtconv.calib.sources import ArraySet, load_digits, split_holdout

BOX_CLASSES = 3  # digits 0, 1, 2


def ink_boxes(images: np.ndarray) -> np.ndarray:
    """[top, left, bottom, right] / 8 of the pixels above 0.25 in each 8x8 digit."""
    boxes = np.zeros((len(images), 4), np.float32)
    for index, image in enumerate(images[..., 0] > 0.25):
        rows, cols = np.nonzero(image.any(axis=1))[0], np.nonzero(image.any(axis=0))[0]
        boxes[index] = (rows.min(), cols.min(), rows.max() + 1, cols.max() + 1)
    return boxes / 8.0


def box_label_data() -> ArraySet:
    """Digits 0-2 with their class labels (the `label` head's targets)."""
    digits = load_digits("all")
    assert digits.labels is not None
    keep = np.nonzero(digits.labels < BOX_CLASSES)[0]
    return digits.take(keep)


@built_once
def box_label_npz() -> Path:
    """box_label_data saved as an .npz with arrays x and y."""
    return save_npz(box_label_data(), "box_label.npz")


@built_once
def box_label_model() -> Path:
    """Two outputs: `box` [N, 4] (linear regression of the ink's bounding box) and `label`
    [N, 3] (softmax over digits 0-2). `box` sorts first and has more than one column."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    train, _ = split_holdout(box_label_data())
    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    x = layers.Flatten()(layers.Conv2D(8, 3, padding="same", activation="relu")(inputs))
    x = layers.Dense(32, activation="relu")(x)
    model = keras.Model(inputs, [layers.Dense(4, name="box")(x), layers.Dense(BOX_CLASSES)(x)])
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=["mse", keras.losses.SparseCategoricalCrossentropy(from_logits=True)],
    )
    model.fit(train.x, [ink_boxes(train.x), train.labels], epochs=30, batch_size=32, verbose=0)

    def outputs(image: tf.Tensor) -> dict[str, tf.Tensor]:
        box, logits = model(image, training=False)
        return {"box": box, "label": tf.nn.softmax(logits, axis=-1)}

    spec = tf.TensorSpec([None, 8, 8, 1], tf.float32, name="image")
    path = save_serving(model, outputs, shared_dir() / "box_label" / "saved_model", spec)
    return model_card(path, box_label_npz())


def binary_data() -> ArraySet:
    """All digits, labelled 1 for digits 5-9 and 0 for 0-4."""
    digits = load_digits("all")
    assert digits.labels is not None
    return ArraySet({"x": digits.x}, (digits.labels >= 5).astype(np.int64), "digits>=5")


@built_once
def binary_npz(scale: float = 1.0) -> Path:
    """binary_data with x multiplied by `scale` (100: data 100x off the model's scale)."""
    data = binary_data()
    scaled = ArraySet({"x": data.x * np.float32(scale)}, data.labels, data.source)
    return save_npz(scaled, f"binary-x{scale:g}.npz")


@built_once
def sigmoid_model() -> Path:
    """A binary classifier with one sigmoid output `score` [N, 1] (digit >= 5)."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    train, _ = split_holdout(binary_data())
    layers = keras.layers
    inputs = keras.Input((8, 8, 1), name="image")
    x = layers.Flatten()(layers.Conv2D(8, 3, padding="same", activation="relu")(inputs))
    x = layers.Dense(16, activation="relu")(x)
    model = keras.Model(inputs, layers.Dense(1, activation="sigmoid")(x))
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="binary_crossentropy")
    model.fit(train.x, train.labels, epochs=10, batch_size=32, verbose=0)
    spec = tf.TensorSpec([None, 8, 8, 1], tf.float32, name="image")
    path = save_serving(
        model,
        lambda image: {"score": model(image, training=False)},
        shared_dir() / "sigmoid" / "saved_model",
        spec,
    )
    return model_card(path, binary_npz(1.0))


IMAGE_SIZE, IMAGE_CLASSES = 16, 5
# The image model takes raw 0-255 pixels (its first layer rescales them, like Keras'
# MobileNetV3 with include_preprocessing): the reader's 1/255 default feeds it near-black images.
IMAGE_SCALE, IMAGE_OFFSET = 1.0, 0.0


@built_once
def image_folder() -> Path:
    """Digits 0-4 as 16x16 RGB PNGs in one folder per class, tinted so channels differ."""
    from PIL import Image

    digits = load_digits("all")
    assert digits.labels is not None
    root = shared_dir() / "images"
    tint = np.array([1.0, 0.6, 0.3], np.float32)
    for index, (image, label) in enumerate(zip(digits.x, digits.labels, strict=True)):
        if label >= IMAGE_CLASSES:
            continue
        grey = image.repeat(2, axis=0).repeat(2, axis=1)  # 16x16x1 in [0, 1]
        rgb = np.clip(grey * tint * 255 + 20, 0, 255).astype(np.uint8)
        folder = root / f"class{label}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rgb).save(folder / f"{index}.png")
    return root


@built_once
def image_model() -> Path:
    """A CNN over raw pixels (built-in rescaling) trained on image_folder; softmax output
    `probabilities`. No model card: what it expects travels only if the user says it."""
    import keras
    import tensorflow as tf

    from trtconv.calib.preprocessing import Preprocessing
    from trtconv.calib.sources import ImagePreprocessing, load_image_folder

    keras.utils.set_random_seed(0)
    pixels = Preprocessing(IMAGE_SCALE, IMAGE_OFFSET)
    prep = ImagePreprocessing((IMAGE_SIZE, IMAGE_SIZE), 3, pixels)
    train, _ = split_holdout(load_image_folder(image_folder(), prep))
    layers = keras.layers
    inputs = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3), name="image")
    x = layers.Rescaling(1 / 127.5, offset=-1.0)(inputs)
    x = layers.Conv2D(8, 3, strides=2, padding="same", activation="relu")(x)
    x = layers.Dense(32, activation="relu")(layers.Flatten()(x))
    model = keras.Model(inputs, layers.Dense(IMAGE_CLASSES)(x))
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(train.x, train.labels, epochs=8, batch_size=32, verbose=0)
    spec = tf.TensorSpec([None, IMAGE_SIZE, IMAGE_SIZE, 3], tf.float32, name="image")
    path = save_serving(
        model,
        lambda image: {"probabilities": tf.nn.softmax(model(image, training=False), axis=-1)},
        shared_dir() / "image" / "saved_model",
        spec,
    )
    return model_card(path, image_folder())
