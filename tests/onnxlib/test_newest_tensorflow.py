"""Models written by the TensorFlow and Keras of this environment (2.21 and Keras 3.15 at the
newest end of the range, 2.17 at the oldest) through the ONNX export: exact GELU (which 2.21
writes with `Erfc`, an op tf2onnx leaves unconverted), tanh-approximate GELU, LayerNormalization
and MultiHeadAttention, saved with Keras 3's `model.export` and as a `.keras` file. Each artifact
is checked against TensorFlow by ONNX Runtime run here directly, not through trtconv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.cli_runner import run_cli
from trtconv.calib.sources import load_digits

pytestmark = [pytest.mark.tensorflow, pytest.mark.slow]

SAMPLES = 300  # held-out digits each model is validated on


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("newest")


@pytest.fixture(scope="module")
def digits(work: Path) -> dict[str, Path]:
    """The digits as 8x8x1 images: `train` (what the models fit), `held_out` (the rest)."""
    data = load_digits("all")
    order = np.random.default_rng(0).permutation(len(data.x))
    paths = {}
    for name, part in (("train", order[:-SAMPLES]), ("held_out", order[-SAMPLES:])):
        paths[name] = work / f"{name}.npz"
        np.savez(paths[name], image=data.x[part].astype(np.float32), y=data.labels[part])
    return paths


def _fit(model: Any, data: Path, epochs: int) -> Any:
    import keras

    keras.utils.set_random_seed(0)
    arrays = np.load(data)
    model.compile(keras.optimizers.Adam(3e-3), "sparse_categorical_crossentropy")
    model.fit(arrays["image"], arrays["y"], epochs=epochs, batch_size=64, verbose=0)
    return model


def vision_transformer() -> Any:
    """2x2 patches of an 8x8 digit as 16 tokens; two blocks of LayerNormalization,
    MultiHeadAttention and a GELU MLP: exact GELU in the first, tanh-approximate in the second."""
    import keras

    keras.utils.set_random_seed(0)
    image = keras.Input((8, 8, 1), name="image")
    tokens = keras.layers.Reshape((16, 24))(keras.layers.Conv2D(24, 2, strides=2)(image))
    for approximate in (False, True):
        h = keras.layers.LayerNormalization()(tokens)
        tokens = tokens + keras.layers.MultiHeadAttention(num_heads=2, key_dim=12)(h, h)
        h = keras.layers.Dense(48)(keras.layers.LayerNormalization()(tokens))
        h = keras.layers.Activation(
            lambda t, approximate=approximate: keras.activations.gelu(t, approximate=approximate)
        )(h)
        tokens = tokens + keras.layers.Dense(24)(h)
    # Flatten, not pooling: with no position embedding, the tokens' order must reach the head.
    pooled = keras.layers.Flatten()(keras.layers.LayerNormalization()(tokens))
    return keras.Model(image, keras.layers.Dense(10, activation="softmax")(pooled))


def gelu_cnn() -> Any:
    """A CNN with exact GELUs (Keras' "gelu", which a .keras file names and reloads)."""
    import keras

    keras.utils.set_random_seed(0)
    image = keras.Input((8, 8, 1), name="image")
    x = keras.layers.Conv2D(16, 3, padding="same", activation="gelu")(image)
    x = keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="gelu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(image, keras.layers.Dense(10, activation="softmax")(x))


@pytest.fixture(scope="module")
def vit(work: Path, digits: dict[str, Path]) -> Path:
    """The vision transformer, trained (0.94 test accuracy), written by Keras 3's `model.export`."""
    path = work / "vit"
    _fit(vision_transformer(), digits["train"], epochs=8).export(str(path))
    return path


def convert(
    model: Path, output: Path, precision: str, digits: dict[str, Path], *flags: str
) -> dict[str, Any]:
    done = run_cli("convert", model, "--backend", "ort", "--precision", precision,
                   "--calib-data", digits["train"], "--validate-data", digits["held_out"],
                   "--output", output, "--json", *flags)  # flags beside values # fmt: skip
    assert done.returncode in (0, 4), done.stderr
    return dict(json.loads(done.stdout))


def onnx_outputs(artifact: Path, images: np.ndarray) -> np.ndarray:
    """The artifact's ONNX model run by ONNX Runtime directly."""
    import onnxruntime as ort

    manifest = json.loads((artifact / "manifest.json").read_text())
    session = ort.InferenceSession(str(artifact / manifest["payload"]))
    return np.asarray(session.run(None, {"image": images})[0])


def tensorflow_outputs(saved_model: Path, images: np.ndarray) -> np.ndarray:
    import tensorflow as tf

    serve = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    return np.asarray(next(iter(serve(image=tf.constant(images)).values())))


def op_types(artifact: Path) -> set[str]:
    import onnx

    manifest = json.loads((artifact / "manifest.json").read_text())
    return {node.op_type for node in onnx.load(str(artifact / manifest["payload"])).graph.node}


def held_out_images(digits: dict[str, Path]) -> np.ndarray:
    return np.asarray(np.load(digits["held_out"])["image"])


def test_exact_gelu_layer_norm_and_attention_pass_fp32_through_onnx_runtime(
    work: Path, digits: dict[str, Path], vit: Path
) -> None:
    artifact = work / "vit-fp32"
    result = convert(vit, artifact, "fp32", digits)
    assert result["validation"]["verdict"] == "passed", result["validation"]["checks"]
    assert "Erfc" not in op_types(artifact)  # rewritten to Erf where TensorFlow wrote Erfc
    assert {"Erf", "Tanh"} <= op_types(artifact)  # exact GELU, and the tanh approximation
    images = held_out_images(digits)
    np.testing.assert_allclose(
        onnx_outputs(artifact, images), tensorflow_outputs(vit, images), atol=1e-5
    )


def test_int8_vision_transformer_gets_the_verdict_of_its_own_agreement(
    work: Path, digits: dict[str, Path], vit: Path
) -> None:
    artifact = work / "vit-int8"
    # The full int8 model, judged: the ladder (layers kept in float) is another test's subject.
    validation = convert(vit, artifact, "int8", digits, "--no-fallback")["validation"]
    images = held_out_images(digits)
    agree = onnx_outputs(artifact, images).argmax(1) == tensorflow_outputs(vit, images).argmax(1)
    assert validation["samples"] == SAMPLES
    assert validation["top1_agreement"] == pytest.approx(agree.mean())
    low, high = validation["top1_agreement_ci95"]
    minimum = validation["min_top1_agreement"]
    # The verdict is the interval's: passed above the minimum, failed below, else inconclusive.
    expected = "passed" if low >= minimum else "failed" if high < minimum else "inconclusive"
    assert validation["verdict"] == expected


def test_a_keras_file_with_exact_gelu_passes_fp32(work: Path, digits: dict[str, Path]) -> None:
    model = _fit(gelu_cnn(), digits["train"], epochs=2)
    path = work / "gelu_cnn.keras"
    model.save(path)
    artifact = work / "gelu_cnn-fp32"
    result = convert(path, artifact, "fp32", digits)
    assert result["validation"]["verdict"] == "passed", result["validation"]["checks"]
    assert "Erfc" not in op_types(artifact) and "Erf" in op_types(artifact)
    images = held_out_images(digits)
    expected = np.asarray(model.predict(images, verbose=0))
    np.testing.assert_allclose(onnx_outputs(artifact, images), expected, atol=1e-5)


def test_erfc_itself_is_exported_as_one_minus_erf(work: Path) -> None:
    """tf.math.erfc written directly (an Erfc op at either end of the range), on the far tail
    too: the rewrite loses only relative precision there, never absolute."""
    import tensorflow as tf

    class Erfc(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 5], tf.float32, name="x")])
        def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"y": tf.math.erfc(x)}

    module = Erfc()
    tf.saved_model.save(module, str(work / "erfc"), signatures={"serving_default": module.serve})
    x = np.concatenate(
        [
            np.linspace(-6, 6, 5, dtype=np.float32)[None],
            np.random.default_rng(0).normal(size=(99, 5)),
        ]
    ).astype(np.float32)
    np.savez(work / "erfc.npz", x=x)
    done = run_cli("convert", work / "erfc", "--backend", "ort", "--precision", "fp32",
                   "--calib-data", work / "erfc.npz", "--output", work / "erfc-fp32",
                   "--allow-unjudged")  # flags beside values # fmt: skip
    assert done.returncode == 0, done.stderr
    import onnxruntime as ort

    session = ort.InferenceSession(str(work / "erfc-fp32" / "model.onnx"))
    got = session.run(None, {"x": x})[0]
    np.testing.assert_allclose(got, tf.math.erfc(x).numpy(), atol=1e-6)


def test_an_op_onnx_cannot_compute_is_named_with_the_backends_that_need_no_onnx(
    work: Path,
) -> None:
    import tensorflow as tf

    class Gamma(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"y": tf.math.lgamma(tf.abs(x) + 1.0) + x}

    module = Gamma()
    tf.saved_model.save(module, str(work / "gamma"), signatures={"serving_default": module.serve})
    np.savez(work / "gamma.npz", x=np.random.default_rng(0).normal(size=(64, 4)).astype("f4"))
    done = run_cli("convert", work / "gamma", "--backend", "ort", "--precision", "fp32",
                   "--calib-data", work / "gamma.npz", "--output", work / "gamma-fp32")  # fmt: skip
    assert done.returncode == 1
    said = done.stderr.strip().splitlines()[-1]
    assert "has no conversion for the TensorFlow op(s) Lgamma (1 node, e.g. " in said
    assert "converts the SavedModel itself, without the ONNX export" in said
    assert not (work / "gamma-fp32").exists()
