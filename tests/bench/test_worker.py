"""The worker's timing loop and batching, on a do-nothing runner (no model, no timing asserts)."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trtconv.bench.messages import WorkerReport
from trtconv.bench.worker import NullRunner, make_batches, measure_batch, time_loop
from trtconv.core.errors import InputError
from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.measure.loop_budget import Budget
from trtconv.protocol.runner import CallTimings

SIGNATURE = ModelSignature(
    inputs=(TensorSpec("image", (None, 8, 8, 1), "float32"),),
    outputs=(TensorSpec("probabilities", (None, 10), "float32"),),
)


class CountingRunner(NullRunner):
    """Records the batches it was given, in order."""

    def __init__(self) -> None:
        super().__init__(SIGNATURE)
        self.seen: list[int] = []

    def infer_impl(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.seen.append(int(feeds["image"][0, 0, 0, 0]))
        return {}


def batches(count: int, batch_size: int = 2) -> list[dict[str, np.ndarray]]:
    return [{"image": np.full((batch_size, 8, 8, 1), index, np.float32)} for index in range(count)]


def test_iteration_budgets_give_exact_counts_and_drop_warmup() -> None:
    runner = CountingRunner()
    timing = time_loop(runner, batches(3), Budget(iterations=4), Budget(iterations=7))
    assert timing.warmup_iterations == 4
    assert len(timing.latencies_ns) == 7
    assert all(ns > 0 for ns in timing.latencies_ns)
    assert timing.wall_ns >= sum(timing.latencies_ns)
    # Batches cycle in order through warm-up and timed calls alike.
    assert runner.seen == [i % 3 for i in range(11)]
    assert timing.transfer_ms == []


def test_time_budget_still_makes_the_minimum_iterations() -> None:
    timing = time_loop(
        NullRunner(SIGNATURE),
        batches(1),
        Budget(iterations=0),
        Budget(seconds=0.0, min_iterations=25),
    )
    assert timing.warmup_iterations == 0
    assert len(timing.latencies_ns) == 25


def test_budget_done() -> None:
    assert Budget(iterations=3).done(3, 0)
    assert not Budget(iterations=3).done(2, 10**12)
    assert not Budget(seconds=1.0, min_iterations=10).done(9, 2 * 10**9)
    assert not Budget(seconds=1.0, min_iterations=10).done(10, 10**8)
    assert Budget(seconds=1.0, min_iterations=10).done(10, 10**9)


def test_feeds_are_checked_before_any_timed_call() -> None:
    runner = CountingRunner()
    bad = [*batches(2), {"image": np.zeros((2, 4, 4, 1), np.float32)}]
    with pytest.raises(InputError, match="expects shape"):
        time_loop(runner, bad, Budget(iterations=1), Budget(iterations=1))
    assert runner.seen == []


def test_make_batches_wraps_small_data_and_caps_the_count() -> None:
    inputs = {"image": np.arange(5, dtype=np.float32).reshape(5, 1, 1, 1)}
    made = make_batches(inputs, 4, max_batches=8)
    assert [b["image"].ravel().tolist() for b in made] == [[0, 1, 2, 3], [4, 0, 1, 2]]
    assert len(make_batches(inputs, 1, max_batches=3)) == 3
    assert all(b["image"].flags.c_contiguous for b in made)


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
def test_peak_rss_is_the_workers_own_not_its_parents() -> None:
    """ru_maxrss survives fork and exec: a worker of a big parent reported the parent's peak."""
    child = "from trtconv.bench.worker import peak_rss_mb; print(peak_rss_mb())"
    ballast = bytearray(400 * 1024 * 1024)
    ballast[::4096] = b"\1" * len(ballast[::4096])  # touch every page: 400 MB resident
    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    del ballast
    assert inherited > 400
    assert float(done.stdout) < 200  # the child imports numpy and trtconv, nothing more


class DeviceRunner(NullRunner):
    """Reports its device copies after each call, as TrtRunner does with CUDA events."""

    def infer_impl(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.last_timings = CallTimings(0.25, 1.0, 0.5)
        return {}


def test_transfer_time_of_a_runner_that_reports_it_reaches_the_bench_row() -> None:
    """Before, the worker looked for `last_transfer_ms`, which no runner sets: never recorded."""
    from trtconv.bench.models import ModelEntry
    from trtconv.bench.rows import model_info, model_rows
    from trtconv.measure.bench_result import Settings
    from trtconv.measure.stats import summarize

    warmup, measure = Budget(iterations=1), Budget(iterations=4)
    measured = measure_batch(DeviceRunner(SIGNATURE), batches(2), warmup, measure)
    assert measured.transfer_ms == [0.75] * 4  # host-to-device + device-to-host, per call
    document = {
        "label": "engine",
        "pid": 1,
        "load_ms": 1.0,
        "first_inference_ms": 2.0,
        "peak_rss_mb": 3.0,
        "harness_overhead_ms": 0.001,
        "batches": [measured.to_json()],
    }
    report = WorkerReport.from_json(json.loads(json.dumps(document)))  # as a worker prints it
    assert report.batches == [measured] and report.finished.warnings == []
    entry = ModelEntry(
        label="engine",
        path=Path("engine"),
        kind="artifact",
        backend="trt",
        precision="fp16",
        signature=SIGNATURE,
    )
    settings = Settings(
        batch_sizes=(2,), warmup_iterations=1, iterations=4, data="random", device="auto"
    )
    assert (settings.warmup, settings.measure) == (warmup, measure)
    [row] = model_rows(model_info(entry, report, False), report, settings)
    assert row.transfer_ms_mean == 0.75
    # The latency figures are the summary's, under the row's unit-suffixed names.
    summary = summarize(measured.latencies_ms)
    for name in ("min", "mean", "trimmed_mean", "p50", "p90", "p95", "p99", "max", "std"):
        assert getattr(row, f"latency_ms_{name}") == getattr(summary, name)
    figures = (row.iterations, row.cv_percent, row.cv_trimmed_percent)
    assert figures == (summary.count, summary.cv_percent, summary.cv_trimmed_percent)


def test_the_timed_call_skips_the_per_call_input_check() -> None:
    """Each batch is checked once before timing; the timed calls pass check_inputs=False."""
    checks: list[int] = []

    class Checked(CountingRunner):
        def check_inputs(self, feeds: dict[str, np.ndarray]) -> None:
            checks.append(1)
            super().check_inputs(feeds)

    runner = Checked()
    time_loop(runner, batches(3), Budget(iterations=5), Budget(iterations=20))
    assert len(checks) == 3 and len(runner.seen) == 25


def test_the_machine_is_probed_before_the_load_is_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-smi and the TensorFlow subprocess are start-up, not the model's load time."""
    from trtconv.backends import registry
    from trtconv.bench import worker

    calls: list[str] = []
    monkeypatch.setattr(registry, "probe", lambda deep=False, packages=(): calls.append("probe"))
    worker.import_backend("ort")
    assert calls == ["probe"]


def test_gpu_memory_of_an_unlisted_process_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from trtconv import facts
    from trtconv.bench import worker

    monkeypatch.setattr(facts, "probe_gpus", lambda: (facts.Gpu("NVIDIA H100", (9, 0)),))
    listing = subprocess.CompletedProcess([], 0, stdout="4242, 1024\n", stderr="")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: listing)
    assert worker.gpu_memory_mb(4242) == 1024.0
    assert worker.gpu_memory_mb(1) is None  # not listed: unknown, not 0 MB


def test_bench_batch_sizes_must_lie_inside_the_engines_profile() -> None:
    from pathlib import Path

    from trtconv.bench.models import ModelEntry, check_batch_sizes
    from trtconv.core.errors import UsageError

    signature = ModelSignature((TensorSpec("x", (None, 4), "float32"),), ())
    engine = ModelEntry(
        label="e",
        path=Path("engine"),
        kind="artifact",
        backend="trt",
        precision="fp16",
        signature=signature,
    )
    engine.batch_range = (4, 16)
    check_batch_sizes([engine], (4, 8, 16))
    with pytest.raises(UsageError, match=r"built for batch sizes 4 to 16 .* asked for 1, 32"):
        check_batch_sizes([engine], (1, 8, 32))
