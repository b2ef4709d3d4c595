"""Report writers and plots on a result assembled from known raw samples (no models run)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from trtconv.bench.accuracy import AccuracySet, judge_models
from trtconv.bench.messages import WorkerReport
from trtconv.bench.models import BenchPlan, ModelEntry
from trtconv.bench.rows import assemble, model_info, model_rows, round_totals
from trtconv.calib.sources import ArraySet
from trtconv.core.data_contract import DataContract
from trtconv.core.errors import UsageError
from trtconv.core.model_io import ModelSignature, Outputs, TensorSpec
from trtconv.facts.environment import BenchEnvironment
from trtconv.facts.hardware import CpuBlock
from trtconv.measure.bench_result import (
    ROW_KEYS,
    SCHEMA_VERSION,
    BenchResult,
    BenchRow,
    ModelInfo,
    Settings,
)
from trtconv.report.writers import bench_markdown, write_report

SIGNATURE = ModelSignature(
    inputs=(TensorSpec("image", (None, 8, 8, 1), "float32"),),
    outputs=(TensorSpec("probabilities", (None, 10), "float32"),),
)
LABELS = np.array([0, 1, 2, 3])


def entry(label: str, backend: str, precision: str) -> ModelEntry:
    path = Path(f"/models/{label}")
    kind = "saved_model" if backend == "tf" else "artifact"
    return ModelEntry(
        label=label, path=path, kind=kind, backend=backend, precision=precision, signature=SIGNATURE
    )


def one_hot(predictions: list[int]) -> dict[str, np.ndarray]:
    """Class-probability outputs whose top-1 is `predictions`."""
    return {"probabilities": np.eye(10, dtype=np.float32)[predictions]}


def document(scale: float, pid: int) -> dict[str, Any]:
    """A worker's raw output: latencies proportional to batch size times `scale`."""
    batches = []
    for batch_size in (1, 8):
        latencies = [scale * batch_size * (1 + 0.01 * i) for i in range(50)]
        batches.append(
            {
                "batch_size": batch_size,
                "latencies_ms": latencies,
                "wall_ns": int(sum(latencies) * 1e6),
                "warmup_iterations": 5,
                "transfer_ms": None,
            }
        )
    return {
        "label": "m",
        "pid": pid,
        "load_ms": 100.0,
        "first_inference_ms": 150.0,
        "peak_rss_mb": 300.0,
        "gpu_memory_mb": None,
        "harness_overhead_ms": 0.0002,
        "batches": batches,
    }


def make_result(with_eval: bool = True) -> BenchResult:
    settings = Settings(
        batch_sizes=(1, 8),
        warmup_iterations=5,
        iterations=50,
        threads=2,
        data="digits",
        device="auto",
    )
    models = [
        (entry("digits", "tf", "fp32"), document(1.0, 101), [0, 1, 2, 3]),
        (entry("digits-ort-int8", "ort", "int8"), document(0.25, 102), [0, 1, 2, 0]),
    ]
    infos: list[ModelInfo] = []
    rows: list[BenchRow] = []
    outputs: dict[str, Outputs | None] = {}
    for model, document_, predictions in models:
        doc = WorkerReport.from_json(document_)
        infos.append(model_info(model, doc, model.label == "digits"))
        rows += model_rows(infos[-1], doc, settings)
        outputs[model.label] = one_hot(predictions)
    if with_eval:
        evaluation = AccuracySet(ArraySet({"x": np.zeros((4, 1))}, LABELS, "eval"), DataContract())
        judge_models(infos, infos[0], outputs, evaluation, None)
    entries = [model for model, _, _ in models]
    plan = BenchPlan(entries, entries[0], "the first SavedModel given")
    result = assemble(plan, settings, infos, rows)
    result.environment = BenchEnvironment(
        cpu=CpuBlock(model="test cpu", logical_cores=2), threads=2
    )
    assert result.schema_version == SCHEMA_VERSION
    assert result.order == ["digits", "digits-ort-int8"]
    return result


def test_comparisons_from_known_samples() -> None:
    result = make_result()
    rows = {(r.label, r.batch_size): r for r in result.results}
    assert rows["digits", 8].speedup_vs_baseline == pytest.approx(1.0)
    assert rows["digits-ort-int8", 8].speedup_vs_baseline == pytest.approx(4.0)
    assert rows["digits-ort-int8", 1].accuracy == pytest.approx(0.75)
    assert rows["digits-ort-int8", 1].top1_agreement == pytest.approx(0.75)
    assert rows["digits", 1].top1_agreement == 1.0
    assert rows["digits", 1].is_baseline and not rows["digits-ort-int8", 1].is_baseline
    # 50 samples < 100: one warning that p99 is close to the maximum.
    assert any("fewer than 100" in w for w in result.warnings)


def test_the_document_round_trips_as_the_typed_result() -> None:
    result = make_result()
    document = result.to_json()
    assert tuple(document["results"][0]) == ROW_KEYS
    assert document["settings"]["batch_sizes"] == [1, 8]
    assert document["settings"]["warmup_s"] is None and document["settings"]["iterations"] == 50
    assert BenchResult.from_json(document).to_json() == document
    assert BenchResult.from_json(document).results == result.results
    assert isinstance(BenchResult.from_json(document).results[0], BenchRow)


def test_report_directory_holds_every_file(tmp_path: Path) -> None:
    result = make_result()
    written = write_report(result, tmp_path / "report")
    names = sorted(p.name for p in (tmp_path / "report").iterdir())
    assert names == [
        "accuracy_vs_speedup.png",
        "latency_vs_batch.png",
        "report.md",
        "results.csv",
        "results.json",
        "throughput_vs_batch.png",
    ]
    assert json.loads(Path(written["json"]).read_text()) == result.to_json()
    with Path(written["csv"]).open() as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames or ()) == ROW_KEYS
        lines = list(reader)
    assert [(r["label"], r["batch_size"]) for r in lines] == [
        ("digits", "1"),
        ("digits", "8"),
        ("digits-ort-int8", "1"),
        ("digits-ort-int8", "8"),
    ]
    for png in ("latency_vs_batch", "throughput_vs_batch", "accuracy_vs_speedup"):
        with Image.open(written[png]) as image:
            image.verify()
            assert image.format == "PNG"
    markdown = Path(written["markdown"]).read_text()
    assert "Baseline: **digits**" in markdown
    assert "| digits-ort-int8 | ort int8 | 8 |" in markdown
    assert "![latency_vs_batch](latency_vs_batch.png)" in markdown


def test_no_eval_data_no_accuracy_plot(tmp_path: Path) -> None:
    write_report(make_result(with_eval=False), tmp_path / "report")
    assert not (tmp_path / "report" / "accuracy_vs_speedup.png").exists()
    assert (tmp_path / "report" / "throughput_vs_batch.png").exists()


def test_existing_report_is_kept_without_force(tmp_path: Path) -> None:
    target = tmp_path / "report"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    with pytest.raises(UsageError, match="already exists"):
        write_report(make_result(), target)
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".partial-")]
    write_report(make_result(), target, force=True)
    assert not (target / "keep.txt").exists() and (target / "results.json").is_file()


def test_markdown_marks_missing_figures() -> None:
    markdown = bench_markdown(make_result(with_eval=False))
    assert "| digits * | tf fp32 | 1 |" in markdown
    assert "| - | - |" in markdown  # accuracy and agreement without eval data


def rounds_document(scale: float, pid: int, drift: list[float]) -> dict[str, Any]:
    """A worker's raw output in rounds: each round's latencies scaled by the machine's `drift`."""
    single = document(scale, pid)
    rounds = []
    for factor in drift:
        for measured in single["batches"]:
            latencies = [value * factor for value in measured["latencies_ms"]]
            rounds.append(
                {**measured, "latencies_ms": latencies, "wall_ns": int(sum(latencies) * 1e6)}
            )
    return {**single, "batches": rounds}


def test_rounds_give_intervals_in_rows_table_and_plots(tmp_path: Path) -> None:
    settings = Settings(
        batch_sizes=(1, 8),
        warmup_iterations=5,
        iterations=200,
        rounds=4,
        data="digits",
        device="auto",
    )
    drift = [1.0, 1.3, 0.9, 1.1]  # shared by both models, round by round
    models = [
        (entry("digits", "tf", "fp32"), WorkerReport.from_json(rounds_document(1.0, 101, drift))),
        (
            entry("digits-ort-int8", "ort", "int8"),
            WorkerReport.from_json(rounds_document(0.25, 102, drift)),
        ),
    ]
    infos, rows, totals = [], [], {}
    for model, doc in models:
        infos.append(model_info(model, doc, model.label == "digits"))
        rows += model_rows(infos[-1], doc, settings)
        totals.update(round_totals(model.label, doc))
    plan = BenchPlan([m for m, _ in models], models[0][0], "the first SavedModel given")
    result = assemble(plan, settings, infos, rows, totals)
    by_key = {(r.label, r.batch_size): r for r in result.results}
    fast = by_key["digits-ort-int8", 8]
    assert fast.rounds == 4 and fast.iterations == 200
    # The drift hits both models in the same rounds: the paired speed-up is exactly 4.
    assert fast.speedup_vs_baseline == pytest.approx(4.0)
    assert fast.speedup_vs_baseline_ci95 == pytest.approx((4.0, 4.0))
    low, high = fast.throughput_per_s_ci95 or (0.0, 0.0)
    assert low < fast.throughput_per_s < high  # the drift itself is not hidden
    markdown = bench_markdown(result)
    assert "4.00× (4.00-4.00)" in markdown and "interleaved in 4 round(s)" in markdown
    written = write_report(result, tmp_path / "report")
    with Image.open(written["throughput_vs_batch"]) as image:
        image.verify()
