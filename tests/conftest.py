"""Shared fixtures: a real digits-cnn SavedModel trained once per test session."""

from __future__ import annotations

import os
from pathlib import Path

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
