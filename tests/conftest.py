"""Shared fixtures: a real digits-cnn SavedModel trained once per test session."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `gpu` tests unless an NVIDIA GPU is visible."""
    from trtconv.environment import nvidia_gpus

    if nvidia_gpus():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with TensorRT (none on this machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def digits_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A digits-cnn trained with AMP by trtconv itself: DIR/saved_model and DIR/trtconv.json."""
    from trtconv import api

    output = tmp_path_factory.mktemp("models") / "digits"
    api.train(model="digits-cnn", output=output, epochs=12)
    return output


@pytest.fixture(scope="session")
def digits_saved_model(digits_model_dir: Path) -> Path:
    return digits_model_dir / "saved_model"


@pytest.fixture(scope="session")
def digits_native(digits_saved_model: Path) -> Any:
    """The digits SavedModel loaded by TensorFlow once (activated SavedModelRunner)."""
    from trtconv.backends.tf_native import SavedModelRunner

    runner = SavedModelRunner(digits_saved_model)
    runner.activate()
    return runner


@pytest.fixture(scope="session")
def digits_held_out(digits_native: Any) -> Any:
    """The digits test split, fitted to the model's signature."""
    from trtconv.calib.readers import VALIDATION, read_model_data

    return read_model_data("digits", digits_native.signature, role=VALIDATION)


@pytest.fixture(scope="session")
def digits_reference(digits_native: Any, digits_held_out: Any) -> dict[str, Any]:
    """TensorFlow's outputs on the held-out digits."""
    from trtconv.validation import run_batched

    return run_batched(digits_native, digits_held_out)
