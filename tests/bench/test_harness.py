"""`trtconv bench` end to end on the real digits-cnn: native TF, XLA and an ONNX Runtime artifact.

Few iterations: these tests check structure and ordering, never speed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from tests.helpers.cli_runner import run_cli
from tests.helpers.conversions import passing_validation
from trtconv import api
from trtconv.measure.bench_result import (
    MODEL_KEYS,
    ROW_KEYS,
    SCHEMA_VERSION,
    TOP_LEVEL_KEYS,
    BenchResult,
    BenchRow,
    ModelInfo,
    Settings,
)
from trtconv.options.bench import BenchOptions, SpeedGoal
from trtconv.options.convert import ConvertOptions
from trtconv.outputs.confidence import INCONCLUSIVE, at_least
from trtconv.release.gates import evaluate_gates
from trtconv.release.settings import GateSettings
from trtconv.release.verdict import measures_for

QUICK: dict[str, Any] = {"warmup": 2, "iterations": 5}


@pytest.fixture(scope="module")
def ort_artifact(digits_saved_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """digits-cnn converted to an ONNX Runtime fp32 artifact by trtconv itself."""
    output = tmp_path_factory.mktemp("artifacts") / "digits-ort-fp32"
    api.convert(
        ConvertOptions(
            digits_saved_model,
            precision="fp32",
            backend="ort",
            output=output,
            calib_data="digits",
            batch_sizes=(1, 4),
            validate_samples=450,  # every held-out digit: fewer cannot show fp32's 0.99
        )
    )
    return output


@pytest.fixture(scope="module")
def benched(digits_saved_model: Path, ort_artifact: Path) -> BenchResult:
    options = BenchOptions(
        (digits_saved_model, ort_artifact),
        batch_sizes=(1, 4),
        data="digits",
        eval_data="digits",
        xla=True,
        threads=1,
        **QUICK,
    )
    return api.bench(options)


@pytest.fixture(scope="module")
def result(benched: BenchResult) -> dict[str, Any]:
    """The document `bench --json` prints for that run."""
    return benched.to_json()


def trtconv(*args: str) -> subprocess.CompletedProcess[str]:
    """`trtconv ARGS` in this process (tests/helpers/cli_runner.py)."""
    return run_cli(*args)


def trtconv_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m trtconv ARGS`: the bench contract's one test in a real process."""
    return subprocess.run(
        [sys.executable, "-m", "trtconv", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.slow
def test_document_schema(result: dict[str, Any]) -> None:
    assert set(TOP_LEVEL_KEYS) <= set(result)
    assert result["schema_version"] == SCHEMA_VERSION
    assert result["order"] == ["digits", "digits+xla", "digits-ort-fp32"]
    assert result["baseline"] == "digits"
    assert result["baseline_reason"] == "the first SavedModel given"
    assert [m["label"] for m in result["models"]] == result["order"]
    assert all(set(MODEL_KEYS) == set(m) for m in result["models"])
    assert result["threads"] == 1 and result["environment"]["threads"] == 1
    assert {"cpu", "libraries", "commit"} <= set(result["environment"])
    assert result["harness_overhead_ms"] > 0
    json.dumps(result)  # JSON-ready as it is


@pytest.mark.slow
def test_the_typed_result_round_trips_through_its_document(benched: BenchResult) -> None:
    document = benched.to_json()
    again = BenchResult.from_json(json.loads(json.dumps(document)))
    assert again.to_json() == document
    assert isinstance(again.settings, Settings) and again.settings.batch_sizes == (1, 4)
    assert all(isinstance(model, ModelInfo) for model in again.models)
    assert all(isinstance(row, BenchRow) for row in again.results)
    assert again.results == benched.results and again.models == benched.models
    assert "report" not in document  # only with --report


@pytest.mark.slow
@pytest.mark.no_gpu
def test_every_row_is_complete_and_ordered(result: dict[str, Any]) -> None:
    rows = result["results"]
    assert [(r["label"], r["batch_size"]) for r in rows] == [
        (label, b) for label in result["order"] for b in (1, 4)
    ]
    for row in rows:
        assert set(row) == set(ROW_KEYS)
        assert row["iterations"] == 5 and row["warmup_iterations"] == 2
        assert 0 < row["latency_ms_min"] <= row["latency_ms_p50"] <= row["latency_ms_p99"]
        assert row["latency_ms_p99"] <= row["latency_ms_max"]
        assert row["latency_ms_min"] <= row["latency_ms_trimmed_mean"] <= row["latency_ms_max"]
        assert row["throughput_per_s"] > 0 and row["peak_rss_mb"] > 0
        assert row["first_inference_ms"] >= row["load_ms"] > 0
        assert row["gpu_memory_mb"] is None and row["transfer_ms_mean"] is None  # no GPU here
        assert 0.9 <= row["accuracy"] <= 1.0
    by_key = {(r["label"], r["batch_size"]): r for r in rows}
    assert by_key["digits", 4]["speedup_vs_baseline"] == pytest.approx(1.0)
    assert by_key["digits", 1]["top1_agreement"] == 1.0
    assert by_key["digits-ort-fp32", 1]["backend"] == "ort"
    assert by_key["digits+xla", 1]["xla"] is True
    assert by_key["digits-ort-fp32", 1]["top1_agreement"] >= 0.99


@pytest.mark.slow
def test_each_model_ran_in_its_own_process(result: dict[str, Any]) -> None:
    pids = {m["label"]: m["worker_pid"] for m in result["models"]}
    assert len(set(pids.values())) == 3
    assert os.getpid() not in pids.values()
    for row in result["results"]:
        assert row["worker_pid"] == pids[row["label"]]


@pytest.mark.slow
def test_speedup_interval_and_a_gate_inside_it_is_inconclusive(result: dict[str, Any]) -> None:
    """QUICK's 5 calls run as 5 interleaved rounds of one call; the speed-up's interval comes
    from them, and a min_speedup gate set inside it can be neither passed nor failed."""
    assert result["settings"]["rounds"] == 10  # 5 calls: 5 rounds
    row = next(
        r for r in result["results"] if (r["label"], r["batch_size"]) == ("digits-ort-fp32", 4)
    )
    assert row["rounds"] == 5 and row["iterations"] == 5
    low, high = row["speedup_vs_baseline_ci95"]
    assert low <= row["speedup_vs_baseline"] <= high and low < high
    low_t, high_t = row["throughput_per_s_ci95"]
    assert low_t <= row["throughput_per_s"] <= high_t
    assert row["latency_ms_p99_ci95"][0] <= row["latency_ms_p99"] <= row["latency_ms_p99_ci95"][1]
    inside = (low + high) / 2
    settings = GateSettings(min_speedup=inside, gate_batch_size=4)
    measured = measures_for(passing_validation(), None, BenchRow.from_json(row))
    [validated, gate] = evaluate_gates(settings, measured)
    assert validated.passed and gate.name == "min_speedup"
    assert gate.verdict == "inconclusive" and not gate.passed
    assert list(gate.measured_ci95 or ()) == [low, high]


@pytest.mark.slow
@pytest.mark.serial
def test_a_speed_goal_adds_rounds_until_decided_or_out_of_time(
    benched: BenchResult, digits_saved_model: Path, ort_artifact: Path
) -> None:
    """A goal inside the first run's interval: the bench adds rounds at the goal's batch size
    for up to its time limit; what it ends with is decided, or a warning says it is not."""
    first = next(r for r in benched.results if (r.label, r.batch_size) == ("digits-ort-fp32", 4))
    assert first.speedup_vs_baseline_ci95 is not None
    inside = sum(first.speedup_vs_baseline_ci95) / 2
    goal = SpeedGoal(batch_size=4, min_speedup=inside, time_limit_s=3.0)
    options = BenchOptions(
        (digits_saved_model, ort_artifact),
        batch_sizes=(1, 4),
        data="digits",
        threads=1,
        warmup=2,
        iterations=8,
        rounds=4,
        goal=goal,
    )
    again = api.bench(options)
    rows = {(r.label, r.batch_size): r for r in again.results}
    assert rows["digits", 1].rounds == rows["digits-ort-fp32", 1].rounds == 4
    row = rows["digits-ort-fp32", 4]
    assert row.rounds == rows["digits", 4].rounds >= 4
    assert row.speedup_vs_baseline_ci95 is not None
    verdict = at_least(inside, row.speedup_vs_baseline_ci95, inside)
    undecided = [w for w in again.warnings if "still undecided against the speed goal" in w]
    assert bool(undecided) == (verdict == INCONCLUSIVE)
    assert again.settings.goal == goal


@pytest.mark.slow
def test_artifact_alone_brings_its_source_model_as_baseline(
    ort_artifact: Path, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()  # an existing but empty directory (a caller's staging dir) needs no --force
    options = BenchOptions(
        (ort_artifact,), batch_sizes=(2,), data="random", report=staging, **QUICK
    )
    alone = api.bench(options)
    assert alone.report is not None and Path(alone.report["json"]) == staging / "results.json"
    assert (staging / "results.csv").is_file() and (staging / "report.md").is_file()
    written = json.loads((staging / "results.json").read_text())
    assert written == {key: value for key, value in alone.to_json().items() if key != "report"}
    manifest = json.loads((ort_artifact / "manifest.json").read_text())
    assert alone.order == ["digits", "digits-ort-fp32"]
    assert alone.baseline_model == manifest["source_model"]["path"]
    assert alone.baseline_reason == f"the source model of artifact {ort_artifact}"
    assert alone.results[1].accuracy is None


@pytest.mark.slow
def test_an_artifact_alone_with_baseline_first_is_measured_alone(ort_artifact: Path) -> None:
    """Where TensorFlow is not installed, an artifact can still be benched: no source model
    is added, so no worker starts TensorFlow."""
    options = BenchOptions((ort_artifact,), batch_sizes=(2,), baseline="first", **QUICK)
    alone = api.bench(options)
    assert alone.order == ["digits-ort-fp32"] and alone.baseline == "digits-ort-fp32"
    assert alone.baseline_reason == "the first model given (--baseline first)"
    assert [(row.backend, row.speedup_vs_baseline) for row in alone.results] == [("ort", 1.0)]
    assert all("source model" not in warning for warning in alone.warnings)


@pytest.mark.slow
def test_cli_json_and_report(digits_saved_model: Path, tmp_path: Path) -> None:
    report = tmp_path / "report"
    completed = trtconv_process(
        "bench", str(digits_saved_model), "--batch-sizes", "1,2", "--iterations", "3",
        "--warmup", "1", "--data", "digits", "--eval-data", "digits",
        "--report", str(report), "--json",
    )  # flags beside values # fmt: skip
    assert completed.returncode == 0, completed.stderr
    document = json.loads(completed.stdout)  # exactly one JSON document on stdout
    assert document["order"] == ["digits"]
    assert [r["batch_size"] for r in document["results"]] == [1, 2]
    for row in document["results"]:  # 3 calls: 3 rounds, intervals over them
        assert row["rounds"] == 3 and len(row["throughput_per_s_ci95"]) == 2
    files = sorted(p.name for p in report.iterdir())
    assert files == [
        "accuracy_vs_speedup.png",
        "latency_vs_batch.png",
        "report.md",
        "results.csv",
        "results.json",
        "throughput_vs_batch.png",
    ]
    for png in report.glob("*.png"):
        with Image.open(png) as image:
            image.verify()
    assert "fewer than 100 timed iterations" in completed.stderr  # warnings go to stderr


@pytest.mark.slow
def test_cli_human_table(digits_saved_model: Path) -> None:
    completed = trtconv(
        "bench", str(digits_saved_model), "--batch-sizes", "1", "--iterations", "3",
        "--warmup", "1",
    )  # flags beside values # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert "p50 ms" in completed.stdout and "samples/s" in completed.stdout
    assert "baseline: digits" in completed.stdout
    assert "Measured in 3 interleaved round(s) per batch size" in completed.stdout
    assert "warning" not in completed.stdout


# ---------------------------------------------------------------- bad input: one line, exit code


def one_error_line(completed: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("trtconv: error: ")
    return lines[0]


def test_neither_saved_model_nor_artifact(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    completed = trtconv("bench", str(tmp_path), "--json")
    assert completed.returncode == 1
    assert "neither a SavedModel" in one_error_line(completed)
    assert json.loads(completed.stdout)["error"]["type"] == "InputError"


def test_missing_model_path(tmp_path: Path) -> None:
    completed = trtconv("bench", str(tmp_path / "nowhere"))
    assert completed.returncode == 2
    assert "does not exist" in one_error_line(completed)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--batch-sizes", "0"], "at least 1"),
        (["--batch-sizes", "1,x"], "not an integer"),
        (["--iterations", "5", "--duration", "1"], "not both"),
        (["--warmup", "5", "--warmup-s", "1"], "not both"),
        (["--threads", "0"], "at least 1"),
        (["--baseline", "native"], "choose source or first"),
    ],
)
def test_usage_errors(options: list[str], message: str, tmp_path: Path) -> None:
    completed = trtconv("bench", str(tmp_path), *options)
    assert completed.returncode == 2
    assert message in one_error_line(completed)


@pytest.mark.slow
def test_data_that_does_not_fit(digits_saved_model: Path, tmp_path: Path) -> None:
    data = tmp_path / "wrong.npz"
    np.savez(data, x=np.zeros((4, 5, 5, 1), np.float32))
    completed = trtconv("bench", str(digits_saved_model), "--data", str(data))
    assert completed.returncode == 1
    line = one_error_line(completed)
    assert "5x5x1" in line and "8x8x1" in line


@pytest.mark.slow
def test_existing_report_needs_force(digits_saved_model: Path, tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_text("keep")
    completed = trtconv("bench", str(digits_saved_model), "--report", str(tmp_path))
    assert completed.returncode == 2
    assert "--force" in one_error_line(completed)
    assert [p.name for p in tmp_path.iterdir()] == ["old.txt"]


@pytest.mark.slow
def test_a_model_that_fails_in_its_worker_names_the_model(
    digits_saved_model: Path, ort_artifact: Path, tmp_path: Path
) -> None:
    import shutil

    broken = tmp_path / "broken-ort"
    shutil.copytree(ort_artifact, broken)
    (broken / "model.onnx").write_bytes(b"not an onnx model")
    completed = trtconv(
        "bench", str(digits_saved_model), str(broken), "--batch-sizes", "1",
        "--iterations", "2", "--json",
    )  # flags beside values # fmt: skip
    assert completed.returncode == 1
    line = one_error_line(completed)
    assert "Benchmark of broken-ort failed" in line and "could not load" in line
    assert json.loads(completed.stdout)["error"]["type"] == "InputError"


def test_each_artifact_is_judged_by_its_own_roles(ort_artifact: Path, tmp_path: Path) -> None:
    """An artifact converted with other roles (here its output judged as a regression, which has
    no top-1 check) named first must not take the next artifact's top-1 agreement away."""
    regression = tmp_path / "as-regression"
    shutil.copytree(ort_artifact, regression)
    manifest = json.loads((regression / "manifest.json").read_text())
    for role in manifest["judging"]["roles"].values():
        role.update(role="regression", source="option", threshold=None)
    (regression / "manifest.json").write_text(json.dumps(manifest))
    options = BenchOptions(
        (regression, ort_artifact), batch_sizes=(2,), data="digits", eval_data="digits", **QUICK
    )
    rows = {row.label: row for row in api.bench(options).results}
    assert rows["as-regression"].top1_agreement is None
    assert rows["digits-ort-fp32"].top1_agreement == pytest.approx(1.0, abs=0.01)
