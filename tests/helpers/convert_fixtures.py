"""Expensive things the conversion tests share, built once per test session (cached functions).

Plain cached functions rather than fixtures: several test modules (calib, backends, cli, root)
need the same ONNX export and the same small ResNet, and pytest would build a module-level
fixture once per importing module.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from tests.helpers.model_cache import built_once, export_onnx_once, shared_dir
from trtconv.calib.sources import ArraySet, load_digits, split_holdout

RESNET_SIZE = 16  # digits upsampled 2x to 16x16, grey repeated to 3 channels


@functools.cache
def work_dir() -> Path:
    """One scratch directory for the session's shared models, removed at exit."""
    path = Path(tempfile.mkdtemp(prefix="trtconv-convert-tests-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def model_card(saved_model: Path, data: Path) -> Path:
    """Say in a model card beside `saved_model` that it trained on `data` (its 80% part, the
    split `trtconv train` uses), as `trtconv train` would: convert and validate then keep the
    file's held-out part for validation. Returns `saved_model`."""
    card = {"data": {"source": str(data), "split": "held-out 20%"}}
    (saved_model.parent / "trtconv.json").write_text(json.dumps(card))
    return saved_model


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


def save_npz(data: ArraySet, name: str) -> Path:
    """`data` as shared_dir()/NAME with arrays x and y (its labels)."""
    path = shared_dir() / name
    np.savez(path, x=data.x, y=data.labels)
    return path


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


# ---------------------------------------------------------------- models for the verdict tests
# Each is a few-second Keras model on the digits, saved the way users save theirs
# (tf.saved_model.save with a serving signature, no trtconv model card).

BOX_CLASSES = 3  # digits 0, 1, 2


def _save_serving(model: object, model_fn: object, path: Path, input_spec: object) -> Path:
    """Save `model_fn` (inputs -> dict of outputs, calling the Keras `model`) as a SavedModel
    with serving_default."""
    import tensorflow as tf

    @tf.function(input_signature=[input_spec])
    def serve(image: tf.Tensor) -> dict[str, tf.Tensor]:
        return model_fn(image)  # type: ignore[operator, no-any-return]

    module = tf.Module()
    module.serve = serve
    module.model = model  # tracked: its variables are saved with the module
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return path


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
    path = _save_serving(model, outputs, shared_dir() / "box_label" / "saved_model", spec)
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
    path = _save_serving(
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
    path = _save_serving(
        model,
        lambda image: {"probabilities": tf.nn.softmax(model(image, training=False), axis=-1)},
        shared_dir() / "image" / "saved_model",
        spec,
    )
    return model_card(path, image_folder())


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


# ------------------------------------------------------------------ models as users bring them
# One small CNN trained on the digits upsampled to 32x32 RGB, then saved the ways users save
# theirs: with a fixed batch of 1, with a second signature, as a Keras file, with dynamic
# height and width, and behind a tf.string input that decodes PNG bytes in the graph.

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


def _save_signatures(name: str, signatures: dict[str, object], model: object) -> Path:
    """tf.saved_model.save of a module tracking `model`, with these signatures."""
    import tensorflow as tf

    module = tf.Module()
    module.model = model  # tracked: its variables are saved with the module
    path = shared_dir() / name / "saved_model"
    tf.saved_model.save(module, str(path), signatures=signatures)
    return path


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
    return _save_signatures("fixed1", {"serving_default": serve}, model)


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
    return _save_signatures(f"signatures-{with_default}", signatures, model)


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
    return _save_signatures("dynamic", {"serving_default": serve}, model)


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

    return _save_signatures("png", {"serving_default": serve}, model)


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
