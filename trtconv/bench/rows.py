"""The rows of a bench run: one per model and batch size from its worker's raw samples
(summarised with trtconv.measure.stats), compared with the baseline, the warnings the rows
raise (unstable timings, the harness's floor, short runs), and the typed `BenchResult`
assembled from them. Orchestrating the workers is trtconv.bench.harness'."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from trtconv.backends import registry
from trtconv.bench import rounds
from trtconv.bench.messages import WorkerReport
from trtconv.bench.models import BenchPlan, ModelEntry
from trtconv.bench.rounds import Round
from trtconv.core.errors import UsageError
from trtconv.facts.environment import BenchEnvironment, machine_environment
from trtconv.measure import stats
from trtconv.measure.bench_result import (
    ROW_KEYS_OF_MODEL,
    BenchResult,
    BenchRow,
    ModelInfo,
    Settings,
)
from trtconv.quantize.speed import bench_no_gain_warnings

OVERHEAD_WARN_PERCENT = 2.0
# Below this many samples the p99 is (nearly) the maximum: say so once.
FEW_SAMPLES = 100

# Per (model label, batch size): the calls and the wall nanoseconds of each round.
RoundTotals = dict[tuple[str, int], tuple[list[int], list[int]]]


def model_info(entry: ModelEntry, report: WorkerReport, is_baseline: bool) -> ModelInfo:
    """The model as its worker measured it (accuracy and agreement come with the result)."""
    loaded, finished = report.loaded, report.finished
    return ModelInfo(
        label=entry.label,
        model=str(entry.shown or entry.path),
        backend=entry.backend,
        precision=entry.precision,
        xla=entry.xla,
        throughput_mode=entry.throughput,
        kind=entry.kind,
        is_baseline=is_baseline,
        worker_pid=loaded.pid,
        load_ms=loaded.load_ms,
        first_inference_ms=loaded.first_inference_ms,
        peak_rss_mb=finished.peak_rss_mb,
        gpu_memory_mb=finished.gpu_memory_mb,
        harness_overhead_ms=loaded.harness_overhead_ms,
        device=loaded.device,
        validation=entry.validation,
    )


def by_batch_size(report: WorkerReport) -> dict[int, list[Round]]:
    """A worker's rounds (`batches`: one entry per round, or per batch size from a single-loop
    worker) grouped by batch size, in the order they ran."""
    grouped: dict[int, list[Round]] = {}
    for measured in report.batches:
        grouped.setdefault(measured.batch_size, []).append(measured)
    return grouped


def model_rows(info: ModelInfo, report: WorkerReport, settings: Settings) -> list[BenchRow]:
    """One row per batch size from a worker's raw samples, its rounds pooled, with intervals
    over rounds (no comparison with the baseline yet: see `compared`)."""
    model = {key: getattr(info, key) for key in ROW_KEYS_OF_MODEL}
    return [
        _row(model, info, batch_size, measured, settings)
        for batch_size, measured in by_batch_size(report).items()
    ]


def _row(
    model: dict[str, Any],
    info: ModelInfo,
    batch_size: int,
    measured: list[Round],
    settings: Settings,
) -> BenchRow:
    """The row of one model at one batch size from its rounds: the figures over every call of
    every round, and the intervals of throughput and p50/p99 latency over rounds."""
    latencies = [r.latencies_ms for r in measured]
    summary = stats.summarize(np.concatenate(latencies))
    calls, walls = rounds.totals(measured)
    wall_ns = sum(walls)
    transfers = [t for r in measured for t in r.transfer_ms or []]
    computes = [c for r in measured for c in r.compute_ms or []]
    overhead, p50 = info.harness_overhead_ms or 0.0, summary.p50
    return BenchRow(
        **model,
        batch_size=batch_size,
        warmup_iterations=measured[0].warmup_iterations,
        timed_s=wall_ns / 1e9,
        iterations=summary.count,
        latency_ms_min=summary.min,
        latency_ms_mean=summary.mean,
        latency_ms_trimmed_mean=summary.trimmed_mean,
        latency_ms_p50=summary.p50,
        latency_ms_p90=summary.p90,
        latency_ms_p95=summary.p95,
        latency_ms_p99=summary.p99,
        latency_ms_max=summary.max,
        latency_ms_std=summary.std,
        cv_percent=summary.cv_percent,
        cv_trimmed_percent=summary.cv_trimmed_percent,
        throughput_per_s=stats.throughput_per_s(batch_size, summary.count, wall_ns),
        rounds=len(measured),
        throughput_per_s_ci95=stats.throughput_interval(batch_size, calls, walls),
        latency_ms_p50_ci95=stats.percentile_interval(latencies, 50),
        latency_ms_p99_ci95=stats.percentile_interval(latencies, 99),
        transfer_ms_mean=float(np.mean(transfers)) if transfers else None,
        threads=settings.threads,
        compute_ms_mean=float(np.mean(computes)) if computes else None,
        compute_cv_percent=stats.coefficient_of_variation(computes) if computes else None,
        harness_overhead_percent=overhead / p50 * 100 if p50 > 0 else 0.0,
    )


def round_totals(label: str, report: WorkerReport) -> RoundTotals:
    """Calls and wall nanoseconds of each round of one model, by (label, batch size)."""
    return {(label, b): rounds.totals(measured) for b, measured in by_batch_size(report).items()}


def compared(
    rows: list[BenchRow], models: list[ModelInfo], totals: RoundTotals | None = None
) -> list[BenchRow]:
    """`rows` with their model's accuracy and agreement (judged after every model ran) and
    their speedup over the baseline's throughput at the same batch size; with the rounds'
    `totals`, also the speed-up's interval (paired by round)."""
    infos = {info.label: info for info in models}
    baseline: dict[int, BenchRow] = {}
    for row in rows:
        if row.is_baseline:
            baseline.setdefault(row.batch_size, row)
    totals = totals or {}

    def interval(row: BenchRow) -> stats.Interval | None:
        base = baseline.get(row.batch_size)
        mine = totals.get((row.label, row.batch_size))
        theirs = totals.get((base.label, row.batch_size)) if base else None
        return stats.speedup_interval(*mine, *theirs) if mine and theirs else None

    return [
        replace(
            row,
            accuracy=infos[row.label].accuracy,
            top1_agreement=infos[row.label].top1_agreement,
            speedup_vs_baseline=stats.speedup(
                row.throughput_per_s,
                baseline[row.batch_size].throughput_per_s if row.batch_size in baseline else None,
            ),
            speedup_vs_baseline_ci95=interval(row),
        )
        for row in rows
    ]


def collect_warnings(rows: list[BenchRow]) -> list[str]:
    """One line per model with unstable timings (CV above the threshold) or figures near the
    harness floor, and one line when some runs are too short for a meaningful p99."""
    warnings = []
    for label in dict.fromkeys(row.label for row in rows):
        mine = [row for row in rows if row.label == label]
        warnings += _stability_warnings(label, mine)
        floor = [
            f"{r.harness_overhead_percent:.1f}% at batch {r.batch_size}"
            for r in mine
            if r.harness_overhead_percent > OVERHEAD_WARN_PERCENT
        ]
        if floor:
            overhead_us = (mine[0].harness_overhead_ms or 0.0) * 1000
            warnings.append(
                f"{label}: the harness's own {overhead_us:.1f} µs per call is "
                f"{', '.join(floor)} of the p50 latency (> {OVERHEAD_WARN_PERCENT:g}%): "
                "differences of that size are noise."
            )
    few = sorted({row.iterations for row in rows if row.iterations < FEW_SAMPLES})
    if few:
        warnings.append(
            f"Some runs have fewer than {FEW_SAMPLES} timed iterations (min {few[0]}): their p99 "
            "is close to the maximum; use --duration or more --iterations for tail latencies."
        )
    return warnings


def _stability_warnings(label: str, rows: list[BenchRow]) -> list[str]:
    """Unstable timings of one model. Host-timed latency is judged by the CPU rule (trimmed CV
    above 10%); trtexec's 1% rule applies to what it applies to: GPU compute timed with CUDA
    events (`compute_cv_percent`), which only device runners report."""
    found = []
    limit = stats.CV_WARN_PERCENT_CPU
    unstable = [
        f"{r.cv_trimmed_percent:.0f}% at batch {r.batch_size}"
        for r in rows
        if r.cv_trimmed_percent > limit
    ]
    if unstable:
        found.append(
            f"{label}: latency is unstable, coefficient of variation (central 80%) "
            f"{', '.join(unstable)} (> {limit:g}%): other load on the machine, or too short a run."
        )
    gpu_limit = stats.CV_WARN_PERCENT_GPU
    compute = [
        f"{r.compute_cv_percent:.1f}% at batch {r.batch_size}"
        for r in rows
        if r.compute_cv_percent is not None
        and _on_gpu(r.backend)
        and r.compute_cv_percent > gpu_limit
    ]
    if compute:
        found.append(
            f"{label}: GPU compute time is unstable, coefficient of variation "
            f"{', '.join(compute)} (> {gpu_limit:g}%, trtexec's threshold): clocks or other "
            "GPU work."
        )
    return found


def _on_gpu(backend: str) -> bool:
    """Whether `backend` runs on a GPU (its timings then follow trtexec's stability rule)."""
    try:
        return registry.get(backend).on_gpu
    except UsageError:  # a result from a backend not registered here: judge it as a CPU one
        return False


def assemble(
    plan: BenchPlan,
    settings: Settings,
    models: list[ModelInfo],
    rows: list[BenchRow],
    totals: RoundTotals | None = None,
    run_warnings: Sequence[str] = (),
) -> BenchResult:
    """The result of a run: rows compared with the baseline (speed-up intervals from the
    rounds' `totals`), every warning (the plan's, the run's, then the rows'), the environment."""
    rows = compared(rows, models, totals)
    warnings = [*plan.warnings, *run_warnings, *collect_warnings(rows)]
    warnings += bench_no_gain_warnings(plan.models, rows)
    overheads = [m.harness_overhead_ms for m in models if m.harness_overhead_ms is not None]
    return BenchResult(
        baseline=plan.baseline.label,
        baseline_model=str(plan.baseline.shown or plan.baseline.path),
        baseline_reason=plan.baseline_reason,
        order=[model.label for model in models],
        models=models,
        results=rows,
        harness_overhead_ms=float(np.median(overheads)) if overheads else None,
        settings=settings,
        threads=settings.threads,
        warnings=warnings,
        environment=BenchEnvironment.of(
            machine_environment(registry.declared_packages()), settings.threads
        ),
    )
