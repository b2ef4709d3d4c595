"""Loading SavedModels: signatures are read, never assumed; bad models get one sentence."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from trtconv.backends.registry import open_runner
from trtconv.backends.tf_native import SavedModelRunner
from trtconv.core.errors import InputError, UsageError
from trtconv.model.savedmodel import load_saved_model


def test_signature_is_read_from_the_model(digits_saved_model: Path) -> None:
    model = load_saved_model(digits_saved_model)
    assert model.signature.input_names == ["image"]
    assert model.signature.output_names == ["probabilities"]
    assert model.signature.inputs[0].shape == (None, 8, 8, 1)
    assert model.signature.inputs[0].dtype == "float32"


def test_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        load_saved_model(tmp_path / "nope")


def test_directory_without_saved_model_pb(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a SavedModel"):
        load_saved_model(tmp_path)


def test_corrupt_saved_model_pb(tmp_path: Path, digits_saved_model: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(digits_saved_model, broken)
    (broken / "saved_model.pb").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(InputError, match="could not be loaded"):
        load_saved_model(broken)


def test_runner_runs_and_checks_feeds(digits_saved_model: Path) -> None:
    runner = open_runner(digits_saved_model)
    assert isinstance(runner, SavedModelRunner) and not runner.is_active  # nothing loaded yet
    batch = np.zeros((3, 8, 8, 1), np.float32)
    with runner:
        probabilities = runner.infer({"image": batch})["probabilities"]
        assert probabilities.shape == (3, 10)
        np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
        with pytest.raises(InputError, match="expects dtype float32, found float64"):
            runner.infer({"image": batch.astype(np.float64)})
        with pytest.raises(InputError, match=r"expects shape image: float32\[\?,8,8,1\]"):
            runner.infer({"image": np.zeros((3, 8, 8), np.float32)})
        with pytest.raises(InputError, match="the model expects"):
            runner.infer({"pixels": batch})
    assert not runner.is_active


def test_open_runner_rejects_other_paths(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        open_runner(tmp_path / "missing")
    with pytest.raises(InputError, match="neither a SavedModel"):
        open_runner(tmp_path)


@pytest.mark.tensorflow
def test_missing_serving_signature_names_what_was_found(tmp_path: Path) -> None:
    import tensorflow as tf

    module = tf.Module()
    module.double = tf.function(
        lambda x: {"y": 2.0 * x}, input_signature=[tf.TensorSpec([None, 2], tf.float32)]
    )
    tf.saved_model.save(module, str(tmp_path / "other"), signatures={"double": module.double})
    # A usage error (exit 2): the model is fine, --signature chooses what to convert.
    with pytest.raises(
        UsageError,
        match=r"no 'serving_default' signature \(found: double\); "
        "choose one with --signature NAME",
    ):
        load_saved_model(tmp_path / "other")
    assert load_saved_model(tmp_path / "other", "double").signature.name == "double"
