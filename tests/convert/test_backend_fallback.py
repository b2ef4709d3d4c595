"""`--backend auto` moves to the next backend when one cannot take the model, in one line, and
a failed ONNX export names the backends that convert without it. The model: a bfloat16 matmul,
which tf2onnx 1.17 cannot export ("Unable to convert type dtype(bfloat16)")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.cli_runner import run_cli

pytestmark = pytest.mark.tensorflow


@pytest.fixture(scope="module")
def bf16_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a SavedModel computing in bfloat16 inside, an .npz of its float32 inputs)."""
    import tensorflow as tf

    work = tmp_path_factory.mktemp("bf16")
    weights = np.random.default_rng(0).normal(0, 0.5, (12, 4)).astype(np.float32)

    class Model(tf.Module):
        def __init__(self) -> None:
            self.w = tf.Variable(weights)

        @tf.function(input_signature=[tf.TensorSpec([None, 12], tf.float32, name="x")])
        def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
            h = tf.matmul(tf.cast(x, tf.bfloat16), tf.cast(self.w, tf.bfloat16))
            return {"scores": tf.cast(tf.nn.relu(h), tf.float32)}

    model = Model()
    tf.saved_model.save(model, str(work / "model"), signatures={"serving_default": model.serve})
    data = work / "x.npz"
    np.savez(data, x=np.random.default_rng(1).normal(0, 1, (64, 12)).astype(np.float32))
    return work / "model", data


def test_a_failed_export_names_the_backends_that_convert_without_it(
    bf16_model: tuple[Path, Path], tmp_path: Path
) -> None:
    model, data = bf16_model
    done = run_cli(
        "convert",
        model,
        "--precision",
        "fp32",
        "--backend",
        "ort",
        "--calib-data",
        data,
        "--output",
        tmp_path / "a",
    )
    assert done.returncode == 1
    assert "tf2onnx could not export" in done.stderr
    assert "(--backend openvino converts the SavedModel itself, without the ONNX export)" in (
        done.stderr
    )
    assert not (tmp_path / "a").exists()


def test_auto_tries_the_next_backend_saying_why(
    bf16_model: tuple[Path, Path], tmp_path: Path
) -> None:
    model, data = bf16_model
    done = run_cli("convert", model, "--precision", "fp32", "--calib-data", data,
                   "--output", tmp_path / "a")  # flags beside values # fmt: skip
    said = done.stderr
    assert "auto: ort could not convert" in said and "; trying openvino" in said
    assert "to openvino fp32" in said  # the next backend ran, saying why ort is not it
    assert "ort could not take this model" in said
    assert "internal error" not in said
