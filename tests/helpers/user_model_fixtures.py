"""Models as users bring them: one small CNN trained on the digits upsampled to 32x32 RGB, then
saved the ways users save theirs: with a fixed batch of 1, with a second signature, as a Keras
file, with dynamic height and width, and behind a tf.string input that decodes PNG bytes in the
graph. Built once per session (cached functions)."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

from tests.helpers.fixture_files import save_npz, save_signatures
from tests.helpers.model_cache import built_once, shared_dir
from trtconv.calib.sources import ArraySet, load_digits, split_holdout

DIGITS32 = 32


def digits32() -> ArraySet:
    """All digits as 32x32x3 float32 images in [0, 1] with labels."""
    digits = load_digits("all")
    images = digits.x.repeat(4, axis=1).repeat(4, axis=2).repeat(3, axis=3)
    return ArraySet({"x": images.astype(np.float32)}, digits.labels, "digits32")


@built_once
def digits32_npz() -> Path:
    """digits32 saved as an .npz with arrays x and y."""
    return save_npz(digits32(), "digits32.npz")


def build_cnn32(size: int | None = DIGITS32) -> object:
    """conv(16, stride 2) -> conv(16, stride 2) -> flatten (size None, any height and width:
    global average pooling) -> dense(10) logits."""
    import keras

    layers = keras.layers
    inputs = keras.Input((size, size, 3), name="image")
    x = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(inputs)
    x = layers.Conv2D(16, 3, strides=2, padding="same", activation="relu")(x)
    x = layers.Flatten()(x) if size else layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, layers.Dense(10, name="logits")(x))


@functools.cache
def cnn32() -> object:
    """build_cnn32 trained briefly on the calibration part of digits32 (a Keras model)."""
    import keras

    keras.utils.set_random_seed(0)
    train, _ = split_holdout(digits32())
    model = build_cnn32()
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(train.x, train.labels, epochs=8, batch_size=32, verbose=0)
    return model


@built_once
def fixed_batch_model() -> Path:
    """cnn32 exported with a fixed batch of 1: serving_default(image [1,32,32,3]) ->
    probabilities, as mobile and edge exports come."""
    import tensorflow as tf

    model = cnn32()
    spec = tf.TensorSpec([1, DIGITS32, DIGITS32, 3], tf.float32, name="image")
    serve = tf.function(
        lambda image: {"probabilities": tf.nn.softmax(model(image), axis=-1)},  # type: ignore[operator]
        input_signature=[spec],
    )
    return save_signatures("fixed1", {"serving_default": serve}, model)


@built_once
def two_signature_model(with_default: bool = True) -> Path:
    """cnn32 with serving_default -> probabilities and predict_logits -> logits (only
    predict_logits when not `with_default`)."""
    import tensorflow as tf

    model = cnn32()
    spec = tf.TensorSpec([None, DIGITS32, DIGITS32, 3], tf.float32, name="image")
    serve = tf.function(
        lambda image: {"probabilities": tf.nn.softmax(model(image), axis=-1)},  # type: ignore[operator]
        input_signature=[spec],
    )
    logits = tf.function(lambda image: {"logits": model(image)}, input_signature=[spec])  # type: ignore[operator]
    signatures = {"predict_logits": logits}
    if with_default:
        signatures["serving_default"] = serve
    return save_signatures(f"signatures-{with_default}", signatures, model)


@built_once
def keras_file(suffix: str = ".keras") -> Path:
    """cnn32 saved by Keras itself (`model.save`) as a .keras or .h5 file."""
    path = shared_dir() / f"cnn32{suffix}"
    cnn32().save(str(path))  # type: ignore[attr-defined]
    return path


@built_once
def dynamic_size_model() -> Path:
    """The CNN for any height and width, image [None, None, None, 3], with seeded random weights
    (what it is run on is random data: only the shapes matter)."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    model = build_cnn32(size=None)
    spec = tf.TensorSpec([None, None, None, 3], tf.float32, name="image")
    serve = tf.function(
        lambda image: {"probabilities": tf.nn.softmax(model(image), axis=-1)},  # type: ignore[operator]
        input_signature=[spec],
    )
    return save_signatures("dynamic", {"serving_default": serve}, model)


@built_once
def png_model() -> Path:
    """A TF-Serving-style model: serving_default(png: string [None]) decodes PNG bytes in the
    graph, scales them to [0, 1] and runs cnn32 -> probabilities."""
    import tensorflow as tf

    model = cnn32()
    size = DIGITS32

    def decode(data: tf.Tensor) -> tf.Tensor:
        image = tf.io.decode_png(data, channels=3)
        return tf.reshape(tf.cast(image, tf.float32) / 255.0, [size, size, 3])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="png")])
    def serve(png: tf.Tensor) -> dict[str, tf.Tensor]:
        images = tf.map_fn(decode, png, fn_output_signature=tf.float32)
        return {"probabilities": tf.nn.softmax(model(images), axis=-1)}  # type: ignore[operator]

    return save_signatures("png", {"serving_default": serve}, model)


@built_once
def png_npz(samples: int = 200) -> Path:
    """The first `samples` digits32 images encoded as PNG: an .npz holding `x`, an object
    array of bytes, and labels `y`."""
    import tensorflow as tf

    data = digits32().head(samples)
    pixels = np.round(data.x * 255).astype(np.uint8)
    encoded = np.empty(len(pixels), dtype=object)
    encoded[:] = [tf.io.encode_png(image).numpy() for image in pixels]
    path = shared_dir() / "png.npz"
    np.savez(path, x=encoded, y=data.labels)
    return path
