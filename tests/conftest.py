"""Shared fixtures: a real digits-cnn SavedModel trained once per test session."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests unless an NVIDIA GPU is visible, and `no_gpu` tests when one is."""
    from trtconv.facts import probe_gpus

    if probe_gpus():
        marker, why = "no_gpu", "expects a machine without an NVIDIA GPU (this one has one)"
    else:
        marker, why = "gpu", "needs an NVIDIA GPU with TensorRT (none on this machine)"
    skip = pytest.mark.skip(reason=why)
    for item in items:
        if item.get_closest_marker(marker) is not None:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def digits_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A digits-cnn trained with AMP by trtconv itself: DIR/saved_model and DIR/trtconv.json."""
    from trtconv import api

    output = tmp_path_factory.mktemp("models") / "digits"
    api.train(api.TrainOptions(model="digits-cnn", output=output, epochs=12))
    return output


@pytest.fixture(scope="session")
def digits_saved_model(digits_model_dir: Path) -> Path:
    return digits_model_dir / "saved_model"


@pytest.fixture(scope="session")
def digits_native(digits_saved_model: Path) -> Any:
    """The digits SavedModel loaded by TensorFlow once (activated SavedModelRunner)."""
    from trtconv.backends.tf_native import SavedModelRunner

    runner = SavedModelRunner(digits_saved_model)
    runner.activate()  # for the whole session: TensorFlow frees it at exit
    return runner


@pytest.fixture(scope="session")
def digits_held_out(digits_native: Any) -> Any:
    """The digits test split, fitted to the model's signature."""
    from trtconv.calib.readers import VALIDATION, read_model_data

    return read_model_data("digits", digits_native.signature, role=VALIDATION)


@pytest.fixture(scope="session")
def digits_reference(digits_native: Any, digits_held_out: Any) -> dict[str, Any]:
    """TensorFlow's outputs on the held-out digits."""
    from trtconv.outputs.compare import run_batched

    return run_batched(digits_native, digits_held_out)
