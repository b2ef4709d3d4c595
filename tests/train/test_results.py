"""The typed results of `train` and `train --benchmark` print exactly the documents they printed
as dicts: the same keys in the same order (recorded from the code before the results were
typed), and a document read back with `from_json` prints the same again."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from trtconv.cli import app
from trtconv.train.benchmark import SingleBenchmarkResult, TrainBenchmarkResult
from trtconv.train.pipeline import TrainResult

pytestmark = pytest.mark.tensorflow

TRAIN_KEYS = [
    "schema_version",
    "model",
    "saved_model",
    "signature",
    "input",
    "output",
    "preprocessing",
    "labels",
    "data",
    "amp",
    "xla",
    "strategy",
    "epochs",
    "batch_size",
    "batch_size_per_replica",
    "seed",
    "final_loss",
    "test_accuracy",
    "train_images_per_s",
    "train_seconds",
    "exported_dtype",
    "trtconv_version",
    "environment",
]
TRAIN_BLOCKS = {
    "input": ["name", "shape", "dtype"],
    "output": ["name", "shape", "dtype"],
    "preprocessing": ["scale", "offset", "layout", "image_size"],
    "data": ["source", "train_samples", "test_samples", "split", "sha256"],
    "amp": ["policy", "reason", "loss_scaling", "training_compute_dtype"],
    "strategy": ["name", "workers", "replicas", "devices"],
    "environment": ["python", "platform", "cpu", "gpus", "libraries", "commit"],
}
BENCHMARK_KEYS = [
    "schema_version",
    "mode",
    "model",
    "input_shape",
    "batch_size",
    "warmup_steps",
    "num_iter",
    "amp",
    "xla",
    "strategy",
    "images_per_s",
    "step_ms_mean",
    "step_ms_median",
    "step_ms_p90",
    "step_ms_p99",
    "step_ms_min",
    "step_ms_max",
    "step_ms_std",
    "step_ms_cv",
    "warmup_seconds",
    "final_loss",
    "peak_rss_mb",
    "gpu_peak_memory_mb",
    "environment",
]
BENCHMARK_BLOCKS = {
    "amp": ["policy", "reason", "training_compute_dtype"],
    "strategy": ["name", "workers", "replicas", "devices"],
    "environment": TRAIN_BLOCKS["environment"],
}


def _json_document(*args: str) -> dict[str, Any]:
    """`trtconv ARGS --json` run in this process; the one document it printed."""
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _assert_keys(document: dict[str, Any], keys: list[str], blocks: dict[str, list[str]]) -> None:
    assert list(document) == keys
    assert {name: list(document[name]) for name in blocks} == blocks


@pytest.mark.slow
def test_train_json_keeps_its_keys_and_reads_back(tmp_path: Path) -> None:
    output = tmp_path / "model"
    document = _json_document("train", "--epochs", "1", "--output", str(output))
    _assert_keys(document, TRAIN_KEYS, TRAIN_BLOCKS)
    assert document["saved_model"] == str(output / "saved_model")
    card = TrainResult.from_json(document)
    assert card.saved_model == output / "saved_model"
    assert card.to_json() == document
    assert TrainResult.from_json(card.to_json()).to_json() == card.to_json()
    # The model card beside the SavedModel is the same document.
    assert TrainResult.load(output / "trtconv.json").to_json() == document


@pytest.mark.slow
def test_benchmark_json_keeps_its_keys_and_reads_back() -> None:
    document = _json_document(
        "train", "--benchmark", "--model", "digits-cnn", "--batch-size", "16",
        "--warmup-steps", "1", "--num-iter", "2",
    )  # flags beside values # fmt: skip
    _assert_keys(document, BENCHMARK_KEYS, BENCHMARK_BLOCKS)
    result = TrainBenchmarkResult.from_json(document)
    assert isinstance(result, SingleBenchmarkResult)
    assert (result.mode, result.batch_size, result.num_iter) == ("benchmark", 16, 2)
    assert result.to_json() == document
    assert SingleBenchmarkResult.from_json(result.to_json()).to_json() == document
