"""Keras files (.keras, .h5) taken by every command and by the release config, each exported to
a SavedModel for the run (Keras' own `model.export`), the user's file named in every result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.cli_runner import run_cli
from tests.helpers.user_model_fixtures import digits32_npz, keras_file
from trtconv import api
from trtconv.inspect.pipeline import SavedModelInspection, inspect_path
from trtconv.options.bench import BenchOptions
from trtconv.options.convert import ConvertOptions
from trtconv.options.validate import ValidateOptions
from trtconv.release.config import load_config

pytestmark = pytest.mark.tensorflow  # builds, converts or serves Keras models

QUICK = {"warmup": 2, "iterations": 5, "rounds": 2}


@pytest.fixture(scope="module")
def h5_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """cnn32.h5 converted to ort fp32 (convert exports it itself)."""
    output = tmp_path_factory.mktemp("keras") / "cnn32-ort"
    options = ConvertOptions(
        keras_file(".h5"),
        "fp32",
        backend="ort",
        output=output,
        calib_data=str(digits32_npz()),
        confidence=0,
    )
    api.convert(options)
    return output


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_inspect_a_keras_file(suffix: str) -> None:
    """Before: "is not a SavedModel (saved_model.pb), a trtconv artifact ... or an .onnx file"."""
    model = keras_file(suffix)
    inspection = inspect_path(model)
    assert isinstance(inspection, SavedModelInspection)
    assert inspection.path == model and inspection.size_bytes == model.stat().st_size
    serving = inspection.signatures["serving_default"]
    assert serving.input_names == ["image"]
    assert inspection.op_histogram and inspection.op_histogram.get("Conv2D") == 2


def test_bench_a_keras_file_as_the_baseline(h5_artifact: Path) -> None:
    """Before: "is neither a SavedModel (saved_model.pb) nor a trtconv artifact"."""
    model = keras_file(".h5")
    data = str(digits32_npz())
    options = BenchOptions(
        (model, h5_artifact), batch_sizes=(2,), data=data, eval_data=data, **QUICK
    )
    result = api.bench(options)
    assert result.order == ["cnn32", "cnn32-ort"]
    assert result.baseline_model == str(model)
    rows = {row.label: row for row in result.results}
    assert rows["cnn32-ort"].top1_agreement == pytest.approx(1.0, abs=0.01)


def test_an_artifact_alone_benches_against_its_keras_source(h5_artifact: Path) -> None:
    """Before: its source "is not a SavedModel here; speedups are relative to" the artifact."""
    result = api.bench(BenchOptions((h5_artifact,), batch_sizes=(2,), data="random", **QUICK))
    assert result.order == ["cnn32", "cnn32-ort"]
    assert result.baseline_model == str(keras_file(".h5").resolve())
    assert not result.warnings or all("not a SavedModel" not in w for w in result.warnings)


def test_validate_against_a_keras_reference(h5_artifact: Path) -> None:
    model = keras_file(".h5")
    validated = api.validate(ValidateOptions(h5_artifact, reference=model, confidence=0))
    assert validated.passed and validated.reference == model


def test_release_config_takes_a_keras_file(tmp_path: Path) -> None:
    """Before: "model.path: SavedModel cnn32.h5 holds no saved_model.pb"."""
    config = tmp_path / "release.toml"
    config.write_text(_release_toml(keras_file(".h5"), gates=""))
    assert load_config(config).model.path == keras_file(".h5")


@pytest.mark.slow
def test_release_of_a_keras_file(tmp_path: Path) -> None:
    model = keras_file(".h5")
    config = tmp_path / "release.toml"
    config.write_text(_release_toml(model, gates="min_top1_agreement = 0.9\n"))
    completed = run_cli("release", config, "--output", tmp_path / "out", "--json")
    assert completed.returncode == 0, completed.stderr[-3000:]
    document = json.loads(completed.stdout)
    assert document["source_model"]["path"] == str(model)
    assert all(t["status"] != "failed" for t in document["targets"]), document["targets"]


def _release_toml(model: Path, gates: str) -> str:
    data = digits32_npz()
    return (
        f'[model]\npath = "{model}"\n\n[[targets]]\nbackend = "ort"\nprecision = "fp32"\n\n'
        f'[calibration]\ndata = "{data}"\n\n[eval]\ndata = "{data}"\nconfidence = 0\n\n'
        "[bench]\nbatch_sizes = [2]\niterations = 5\nwarmup = 2\n\n"
        f"[gates]\n{gates}"
    )
