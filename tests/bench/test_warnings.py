"""Which results earn a warning, and how many lines they take."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from trtconv.bench.rows import collect_warnings
from trtconv.measure.bench_result import BenchRow


def row(
    label: str,
    batch: int,
    cv: float,
    overhead_percent: float = 0.1,
    backend: str = "tf",
    iterations: int = 500,
    compute_cv: float | None = None,
) -> BenchRow:
    """A row with a p50 of 1 ms, so the harness overhead (in ms) is `overhead_percent` / 100."""
    figures: dict[str, Any] = {f.name: 1.0 for f in fields(BenchRow)}
    figures.update(
        label=label,
        backend=backend,
        harness_overhead_ms=overhead_percent / 100,
        harness_overhead_percent=overhead_percent,
        batch_size=batch,
        cv_percent=10 * cv,  # rare stalls inflate the raw CV; warnings must not read it
        cv_trimmed_percent=cv,
        iterations=iterations,
        compute_cv_percent=compute_cv,
    )
    return BenchRow(**figures)


def test_steady_runs_earn_no_warning() -> None:
    assert collect_warnings([row("a", 1, 3.0), row("a", 8, 9.9), row("b", 1, 0.5)]) == []


def test_one_line_per_unstable_model_naming_each_batch() -> None:
    warnings = collect_warnings([row("a", 1, 30.0), row("a", 8, 12.0), row("b", 1, 2.0)])
    assert len(warnings) == 1
    assert warnings[0].startswith("a: latency is unstable, coefficient of variation (central")
    assert "30% at batch 1, 12% at batch 8" in warnings[0]


def test_trtexecs_1_percent_applies_to_event_timed_gpu_compute_only() -> None:
    """trtexec's 1% is for GPU compute timed with CUDA events; host-timed latency of a GPU
    runner (Python, copies, synchronisation) is judged like any host-timed figure."""
    steady = [row("engine", 1, 2.0, backend="trt", compute_cv=0.4), row("cpu", 1, 2.0)]
    assert collect_warnings(steady) == []
    warnings = collect_warnings([row("engine", 1, 2.0, backend="trt", compute_cv=3.0)])
    assert len(warnings) == 1 and warnings[0].startswith("engine: GPU compute time is unstable")
    assert "3.0% at batch 1 (> 1%" in warnings[0]


def test_harness_floor_and_short_runs() -> None:
    warnings = collect_warnings([row("tiny", 1, 1.0, overhead_percent=4.5, iterations=20)])
    assert len(warnings) == 2
    assert "4.5% at batch 1 of the p50 latency" in warnings[0]
    assert "fewer than 100 timed iterations (min 20)" in warnings[1]
