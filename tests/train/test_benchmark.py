"""`train --benchmark`: synthetic-data training throughput, single cell and grid."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trtconv import api
from trtconv.core.errors import UsageError
from trtconv.facts import probe_cpu
from trtconv.options.train import TrainBenchmarkOptions
from trtconv.train.benchmark import (
    GridBenchmarkResult,
    SingleBenchmarkResult,
    TrainBenchmarkResult,
    peak_rss_mb,
    step_statistics,
)


def test_step_statistics_in_milliseconds() -> None:
    stats = step_statistics([0.010, 0.020, 0.030, 0.040])
    assert stats["step_ms_mean"] == pytest.approx(25.0)
    assert stats["step_ms_median"] == pytest.approx(25.0)
    assert stats["step_ms_min"] == pytest.approx(10.0)
    assert stats["step_ms_max"] == pytest.approx(40.0)
    assert stats["step_ms_p99"] == pytest.approx(39.7)
    assert stats["step_ms_cv"] == pytest.approx(11.1803 / 25.0, rel=1e-4)


def test_peak_rss_is_plausible() -> None:
    assert 10 < peak_rss_mb() < 64 * 1024


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_iter": 0}, "--num-iter"),
        ({"warmup_steps": -1}, "--warmup-steps"),
        ({"model": "vgg"}, "Unknown model"),
        ({"image_size": 0}, "--image-size"),
    ],
)
def test_bad_benchmark_options_are_usage_errors(options: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        api.train_benchmark(TrainBenchmarkOptions(**options))


@pytest.mark.slow
@pytest.mark.no_gpu
@pytest.mark.tensorflow
def test_resnet50_benchmark_at_small_size() -> None:
    result = api.train_benchmark(
        TrainBenchmarkOptions(
            model="resnet50", batch_size=2, warmup_steps=1, num_iter=2, image_size=32
        )
    )
    assert isinstance(result, SingleBenchmarkResult)
    assert result.input_shape == [None, 32, 32, 3]
    assert result.batch_size == 2
    assert result.num_iter == 2
    assert result.images_per_s > 0
    assert result.step_ms_min <= result.step_ms_mean <= result.step_ms_max
    # 2 images / (mean step) must agree with the reported throughput.
    assert result.images_per_s == pytest.approx(2000.0 / result.step_ms_mean, rel=1e-6)
    assert result.peak_rss_mb > 100  # TensorFlow and a 25M-parameter model are resident
    assert result.gpu_peak_memory_mb is None  # no GPU here
    if probe_cpu().has_bf16:
        assert result.amp.training_compute_dtype == "bfloat16"


# The keys of the grid's --json document and of each of its rows, recorded before the grid's
# result became typed (GridBenchmarkResult): the document must not change.
GRID_KEYS = [
    "schema_version",
    "mode",
    "model",
    "input_shape",
    "warmup_steps",
    "num_iter",
    "amp_dtype",
    "baseline",
    "rows",
    "environment",
]
GRID_ROW_KEYS = [
    "mode",
    "batch_size",
    "policy",
    "xla",
    "images_per_s",
    "step_ms_mean",
    "step_ms_p99",
    "step_ms_cv",
    "peak_rss_mb",
    "gpu_peak_memory_mb",
    "speedup",
]
GRID_ARGS = "train --grid --model digits-cnn --batch-sizes 16 --warmup-steps 1 --num-iter 3 --json"


@pytest.mark.slow
@pytest.mark.tensorflow
def test_grid_runs_each_cell_in_its_own_process_via_the_cli() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "trtconv", *GRID_ARGS.split()],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    result = json.loads(completed.stdout)
    assert list(result) == GRID_KEYS
    assert all(list(row) == GRID_ROW_KEYS for row in result["rows"])
    grid = TrainBenchmarkResult.from_json(result)
    assert isinstance(grid, GridBenchmarkResult) and grid.to_json() == result
    assert [row["mode"] for row in result["rows"]] == ["fp32", "amp", "amp+xla"]
    assert all(row["batch_size"] == 16 for row in result["rows"])
    first, amp, amp_xla = result["rows"]
    assert first["speedup"] == pytest.approx(1.0)
    assert first["policy"] == "float32"
    assert amp_xla["xla"] and not amp["xla"]
    for row in result["rows"]:
        assert "error" not in row
        assert row["speedup"] == pytest.approx(row["images_per_s"] / first["images_per_s"])
        assert row["peak_rss_mb"] > 100
