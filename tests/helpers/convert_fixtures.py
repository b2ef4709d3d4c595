"""Expensive things the conversion tests share, built once per test session (cached functions):
the digits SavedModel's ONNX export, a small ResNet on digits upsampled to 16x16 RGB, and an
attention model over token ids with a dynamic sequence length.

Plain cached functions rather than fixtures: several test modules (calib, backends, cli, root)
need the same ONNX export and the same small ResNet, and pytest would build a module-level
fixture once per importing module. The models a precision breaks are in precision_fixtures, the
verdict tests' models in verdict_fixtures, the models saved as users save theirs in
user_model_fixtures.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import numpy as np

from tests.helpers.fixture_files import model_card, save_npz
from tests.helpers.model_cache import built_once, export_onnx_once, shared_dir
from trtconv.calib.sources import ArraySet, load_digits, split_holdout

RESNET_SIZE = 16  # digits upsampled 2x to 16x16, grey repeated to 3 channels


@functools.cache
def work_dir() -> Path:
    """One scratch directory for the session's shared models, removed at exit."""
    path = Path(tempfile.mkdtemp(prefix="trtconv-convert-tests-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


@built_once
def digits_onnx(saved_model: Path) -> Path:
    """The digits SavedModel exported to ONNX (tf2onnx, opset 17) once."""
    from trtconv.model.savedmodel import load_saved_model

    output = shared_dir() / "digits.onnx"
    export_onnx_once(saved_model, output, load_saved_model(saved_model).signature)
    return output


def digits_rgb16() -> ArraySet:
    """All digits as 16x16x3 float32 images in [0, 1] with labels (for the small ResNet)."""
    digits = load_digits("all")
    images = digits.x.repeat(2, axis=1).repeat(2, axis=2).repeat(3, axis=3)
    return ArraySet({"x": images.astype(np.float32)}, digits.labels, "digits16")


@built_once
def digits_rgb16_npz() -> Path:
    """digits_rgb16 saved as an .npz with arrays x and y."""
    return save_npz(digits_rgb16(), "digits16.npz")


def build_small_resnet(num_classes: int = 10) -> object:
    """Stem conv + two residual blocks (one strided, with a projection) with BatchNorm."""
    import keras

    layers = keras.layers
    inputs = keras.Input((RESNET_SIZE, RESNET_SIZE, 3), name="image")
    x = layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    x = layers.ReLU()(layers.BatchNormalization(momentum=0.9)(x))
    for width, stride in ((16, 1), (32, 2)):
        shortcut = x
        if stride != 1 or x.shape[-1] != width:
            shortcut = layers.Conv2D(width, 1, strides=stride, use_bias=False)(x)
            shortcut = layers.BatchNormalization(momentum=0.9)(shortcut)
        y = layers.Conv2D(width, 3, strides=stride, padding="same", use_bias=False)(x)
        y = layers.ReLU()(layers.BatchNormalization(momentum=0.9)(y))
        y = layers.Conv2D(width, 3, padding="same", use_bias=False)(y)
        y = layers.BatchNormalization(momentum=0.9)(y)
        x = layers.ReLU()(layers.Add()([shortcut, y]))
    x = layers.GlobalAveragePooling2D()(x)
    logits = layers.Dense(num_classes)(x)
    return keras.Model(inputs, logits)


@built_once
def small_resnet() -> Path:
    """A small residual CNN trained briefly on the calibration part of digits16; its SavedModel.

    Trained (not random) so activations and BatchNorm statistics are realistic for INT8.
    """
    import keras

    from trtconv.train.export import export_saved_model

    keras.utils.set_random_seed(0)
    train, _ = split_holdout(digits_rgb16())
    model = build_small_resnet()
    model.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(train.x, train.labels, epochs=4, batch_size=32, verbose=0)
    path = shared_dir() / "resnet16" / "saved_model"
    export_saved_model(model, path, "image", (RESNET_SIZE, RESNET_SIZE, 3))
    return model_card(path, digits_rgb16_npz())


TEXT_VOCAB, TEXT_CLASSES = 32, 3


def text_tokens(samples: int = 1000, seed: int = 0) -> ArraySet:
    """Token sequences of varying content (int32 ids) labelled by which of tokens 1-3 is most
    frequent: a task attention can learn. 1000: the held-out 200 can show int8's 0.97 budget
    (120, from 600, could never: 125 agreeing samples are the fewest)."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(4, TEXT_VOCAB, (samples, 12)).astype(np.int32)
    labels = rng.integers(0, TEXT_CLASSES, samples)
    for row, label in enumerate(labels):
        tokens[row, rng.choice(12, 5, replace=False)] = label + 1
    return ArraySet({"x": tokens}, labels.astype(np.int64), "tokens")


@built_once
def text_model() -> Path:
    """A SavedModel over int32 token ids with a dynamic sequence length: embedding,
    multi-head self-attention, pooling, softmax; trained briefly. Input `tokens` [batch, None]."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    inputs = keras.Input((None,), dtype="int32", name="tokens")
    x = keras.layers.Embedding(TEXT_VOCAB, 16)(inputs)
    x = keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)(x, x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    model = keras.Model(inputs, keras.layers.Dense(TEXT_CLASSES)(x))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    train, _ = split_holdout(text_tokens())
    model.fit(train.x, train.labels, epochs=8, batch_size=32, verbose=0)
    spec = tf.TensorSpec([None, None], tf.int32, name="tokens")

    @tf.function(input_signature=[spec])
    def serve(tokens: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"probabilities": tf.nn.softmax(model(tokens, training=False), axis=-1)}

    module = tf.Module()
    module.model, module.serve = model, serve
    path = shared_dir() / "text" / "saved_model"
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return model_card(path, text_tokens_npz())


@built_once
def text_tokens_npz() -> Path:
    """text_tokens saved as an .npz with arrays x (int32) and y."""
    return save_npz(text_tokens(), "tokens.npz")
