"""Orchestration of `trtconv bench`: one subprocess per model, then statistics and comparisons.

Everything that can be checked without running a model (paths, manifests, signatures, batch
sizes, data shapes) is checked before the first worker is spawned (see `models` and `inputs`).
Workers run one after the other, never concurrently, in the order of `plan.models`; their raw
samples come back as JSON and are summarized here with `trtconv.measure.stats` into a typed
`BenchResult` (trtconv.measure.bench_result).
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.backends import registry
from trtconv.bench import rounds
from trtconv.bench.accuracy import (
    AccuracySet,
    contract_warnings,
    judge_models,
    load_outputs,
    prepare,
    recorded_contract,
    scale_warnings,
    validation_warnings,
)
from trtconv.bench.inputs import check_entry_fits, input_map, load_inputs, save_arrays
from trtconv.bench.messages import WorkerReport, WorkerSpec
from trtconv.bench.models import (
    BenchPlan,
    ModelEntry,
    check_batch_sizes,
    keras_sources,
    plan_models,
    portability_warnings,
)
from trtconv.bench.rounds import Round, Schedule, Worker
from trtconv.calib.judged_data import model_preprocessing
from trtconv.calib.readers import RANDOM
from trtconv.calib.sources import ArraySet
from trtconv.core.data_contract import DataContract
from trtconv.core.errors import TrtconvError, UsageError
from trtconv.core.fsutil import check_output_free
from trtconv.core.model_io import Outputs
from trtconv.core.progress import Progress, Steps
from trtconv.environment import BenchEnvironment, machine_environment
from trtconv.measure import stats
from trtconv.measure.bench_result import (
    ROW_KEYS_OF_MODEL,
    BenchResult,
    BenchRow,
    ModelInfo,
    Settings,
)
from trtconv.model_paths import SAVED_MODEL
from trtconv.options import DEFAULT_DURATION_S, DEFAULT_WARMUP_ITERATIONS, BenchOptions
from trtconv.quantize.speed import bench_no_gain_warnings
from trtconv.report.writers import write_report
from trtconv.savedmodel import keras_exported

log = logging.getLogger(__name__)

# trtexec's floor: a time-bounded run still makes at least this many timed calls.
MIN_ITERATIONS = 10
OVERHEAD_WARN_PERCENT = 2.0
# Below this many samples the p99 is (nearly) the maximum: say so once.
FEW_SAMPLES = 100

# Per (model label, batch size): the calls and the wall nanoseconds of each round.
RoundTotals = dict[tuple[str, int], tuple[list[int], list[int]]]


# ---------------------------------------------------------------------------- options


def settings_of(options: BenchOptions, data: str, contract: DataContract) -> Settings:
    """The `settings` block: the options' budgets (or the defaults), data and contract."""
    timed: dict[str, Any] = {"iterations": options.iterations}
    if options.iterations is None:
        duration = DEFAULT_DURATION_S if options.duration_s is None else options.duration_s
        timed = {"duration_s": duration, "min_iterations": MIN_ITERATIONS}
    warmup = DEFAULT_WARMUP_ITERATIONS if options.warmup is None else options.warmup
    return Settings(
        batch_sizes=options.batch_sizes,
        warmup_iterations=None if options.warmup_s is not None else warmup,
        warmup_s=options.warmup_s,
        **timed,
        threads=options.threads,
        data=data,
        eval_data=options.eval_data,
        eval_split=contract.split,
        data_contract=contract,
        device=options.device,
        rounds=options.rounds,
        goal=options.goal,
    )


# ---------------------------------------------------------------------------- workers


def worker_spec(
    entry: ModelEntry,
    settings: Settings,
    data_path: Path,
    eval_path: Path | None,
    mapping: dict[str, str],
    outputs_path: Path | None = None,
) -> WorkerSpec:
    """The spec one worker process reads: what to load, how to time it, and where to write
    its outputs on the evaluation data."""
    return WorkerSpec(
        label=entry.label,
        backend=entry.backend,
        model=str(entry.path),
        xla=entry.xla,
        throughput=entry.throughput,
        threads=settings.threads,
        batch_sizes=list(settings.batch_sizes),
        warmup=settings.warmup,
        measure=settings.measure,
        data=str(data_path),
        eval=str(eval_path) if eval_path else None,
        eval_outputs=str(outputs_path) if outputs_path else None,
        input_map=mapping,
        signature=entry.signature.name if entry.kind == SAVED_MODEL else None,
        # --device is where artifacts run; SavedModels run where TensorFlow places them.
        device=settings.device if entry.kind != SAVED_MODEL else "auto",
    )


def run_worker(spec: WorkerSpec, workdir: Path, index: int) -> WorkerReport:
    """Run one model in a fresh Python process, each batch size in one timed loop (no rounds);
    return its report or raise its error."""
    command = rounds.worker_command(spec, workdir, index)
    log.debug("running %s", " ".join(command))
    env = rounds.worker_environment()
    completed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if completed.stderr:
        log.debug("worker %s stderr:\n%s", spec.label, completed.stderr)
    report = rounds.read_reply(completed.stdout, WorkerReport, spec.label)
    if report is None:
        tail = completed.stderr.strip().splitlines()[-1:] or ["no output"]
        raise TrtconvError(
            f"The benchmark worker for {spec.label} exited with code {completed.returncode} "
            f"and no result (last message: {tail[0][:200]})."
        )
    return report


# ---------------------------------------------------------------------------- results


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
        floor = [f"{r.harness_overhead_percent:.1f}% at batch {r.batch_size}" for r in mine
                 if r.harness_overhead_percent > OVERHEAD_WARN_PERCENT]  # fmt: skip
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
    unstable = [f"{r.cv_trimmed_percent:.0f}% at batch {r.batch_size}" for r in rows
                if r.cv_trimmed_percent > limit]  # fmt: skip
    if unstable:
        found.append(
            f"{label}: latency is unstable, coefficient of variation (central 80%) "
            f"{', '.join(unstable)} (> {limit:g}%): other load on the machine, or too short a run."
        )
    gpu_limit = stats.CV_WARN_PERCENT_GPU
    compute = [f"{r.compute_cv_percent:.1f}% at batch {r.batch_size}" for r in rows
               if r.compute_cv_percent is not None and _on_gpu(r.backend)
               and r.compute_cv_percent > gpu_limit]  # fmt: skip
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


def measure(
    plan: BenchPlan,
    settings: Settings,
    data: ArraySet,
    evaluation: AccuracySet | None,
    progress: Progress | None = None,
) -> tuple[list[ModelInfo], list[BenchRow], RoundTotals]:
    """Time every model in interleaved rounds (`run_rounds`); judge their outputs when
    `evaluation` is given. Returns the models (in `plan.models` order), their rows and each
    round's totals; workers' warnings are added to `plan.warnings`. Raises the worker's error
    type when a model fails."""
    mappings = {entry.label: input_map(plan.baseline.signature, entry) for entry in plan.models}
    for entry in plan.models:
        check_entry_fits(entry, data, mappings[entry.label])
    models: list[ModelInfo] = []
    rows: list[BenchRow] = []
    totals: RoundTotals = {}
    outputs: dict[str, Outputs | None] = {}
    with tempfile.TemporaryDirectory(prefix="trtconv-bench-") as tmp:
        workdir = Path(tmp)
        data_path = save_arrays(workdir / "inputs.npz", data.inputs, None)
        eval_path = None
        if evaluation is not None:
            eval_path = save_arrays(workdir / "eval.npz", evaluation.data.inputs, None)
        specs = [
            worker_spec(
                entry, settings, data_path, eval_path, mappings[entry.label],
                workdir / f"eval-outputs-{index}.npz" if eval_path else None,
            )
            for index, entry in enumerate(plan.models)
        ]  # fmt: skip
        reports = run_rounds(plan, settings, specs, workdir, progress)
        for entry, report in zip(plan.models, reports, strict=True):
            models.append(model_info(entry, report, entry is plan.baseline))
            rows += model_rows(models[-1], report, settings)
            totals.update(round_totals(entry.label, report))
            outputs[entry.label] = load_outputs(report.finished.eval_outputs)
            plan.warnings += report.finished.warnings
    if evaluation is not None:
        baseline = next(info for info in models if info.is_baseline)
        judge_models(models, baseline, outputs, evaluation, _source(plan))
    return models, rows, totals


def run_rounds(
    plan: BenchPlan,
    settings: Settings,
    specs: list[WorkerSpec],
    workdir: Path,
    progress: Progress | None = None,
) -> list[WorkerReport]:
    """Load every model in its own worker (one after the other), time them in interleaved
    rounds, then let each finish (memory, evaluation outputs). Returns one report per model,
    as a single-loop worker gives it, its `batches` holding every round; notes about speed
    goals left undecided are added to `plan.warnings`."""
    planned = len(settings.batch_sizes) * len(settings.round_budgets())
    steps = Steps(progress, len(specs) + planned + 1)
    with ExitStack() as stack:
        workers: list[Worker] = []
        for index, spec in enumerate(specs):
            steps.start(f"load {spec.label}")
            workers.append(stack.enter_context(Worker(spec, workdir, index)))
        schedule = Schedule(workers, settings, plan.baseline.label, steps.start)
        measured = schedule.run()
        plan.warnings += schedule.notes
        steps.start("finish")
        reports = [
            WorkerReport(worker.ready(), worker.finish(), measured[worker.label])
            for worker in workers
        ]
    steps.finish()
    return reports


def assemble(
    plan: BenchPlan,
    settings: Settings,
    models: list[ModelInfo],
    rows: list[BenchRow],
    totals: RoundTotals | None = None,
) -> BenchResult:
    """The result of a run: rows compared with the baseline (speed-up intervals from the
    rounds' `totals`), every warning, the environment."""
    rows = compared(rows, models, totals)
    warnings = plan.warnings + collect_warnings(rows)
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


def bench(options: BenchOptions, progress: Progress | None = None) -> BenchResult:
    """Benchmark models side by side; return the typed result (trtconv.measure.bench_result).

    Raw pixels become inputs by `options.preprocessing`, else the artifacts' recorded data
    contract, else the baseline's model card. With `eval_data`, every model's outputs on its
    held-out split (`split="all"`: every sample) are judged against the baseline's by output
    role (`judging`, else the manifest's, else inferred): accuracy and decision agreement.
    Artifacts whose own validation failed are marked (`validation`) and warned about.

    With `report`, also write results.json, results.csv, report.md and PNG plots there
    (atomically; an existing non-empty directory needs `force`); the written files are listed
    in the result's `report`. Raises UsageError (missing model path, batch size the model
    cannot take, existing report) and InputError (not a model, data that does not fit) before
    any worker starts, and the worker's error type when a model fails. A Keras file (given, or
    an artifact's source) is exported to a SavedModel for this run and measured as one.
    """
    force = _check_report(options.report, options.force)
    with keras_exported(keras_sources(options.models, options.baseline)) as exported:
        return _bench(options, progress, force, exported)


def _bench(
    options: BenchOptions, progress: Progress | None, force: bool, exported: dict[Path, Path]
) -> BenchResult:
    """`bench` once Keras files are exported (`exported`: file -> SavedModel)."""
    plan = _plan(options, exported)
    options = replace(options, batch_sizes=plan.batch_sizes)  # a fixed batch's, if any
    source = _source(plan)
    prep = model_preprocessing(
        plan.baseline.signature, source, options.preprocessing, recorded_contract(plan)
    )
    data = options.data or RANDOM
    inputs = load_inputs(
        data, plan.baseline, max(options.batch_sizes), source, prep, options.input_shapes
    )
    evaluation = _evaluation(plan, options, source)
    contract = evaluation.contract if evaluation else DataContract(preprocessing=prep)
    settings = settings_of(options, data, contract)
    result = assemble(plan, settings, *measure(plan, settings, inputs, evaluation, progress))
    if options.report is not None:
        result.report = write_report(result, Path(options.report), force=force)
    return result


def _plan(options: BenchOptions, exported: dict[Path, Path] | None = None) -> BenchPlan:
    """The models in measuring order, their batch sizes checked, and the planning warnings."""
    plan = plan_models(
        options.models, options.xla, options.throughput, options.signature, exported,
        options.baseline,
    )  # fmt: skip
    plan.batch_sizes = check_batch_sizes(plan.models, options.batch_sizes)
    measured_here = options.eval_data is not None
    plan.warnings += portability_warnings(plan.models, measured_here=measured_here)
    plan.warnings += validation_warnings(plan.models) + contract_warnings(plan)
    return plan


def _source(plan: BenchPlan) -> Path | None:
    """The baseline's SavedModel (its model card is read), None when it is an artifact."""
    return plan.baseline.path if plan.baseline.kind == SAVED_MODEL else None


def _evaluation(plan: BenchPlan, options: BenchOptions, source: Path | None) -> AccuracySet | None:
    """The evaluation data and judging (None without `eval_data`); adds its warnings."""
    if options.eval_data is None:
        return None
    evaluation = prepare(
        plan, options.eval_data, source, options.preprocessing, options.split, options.judging
    )
    plan.warnings += scale_warnings(plan.models, evaluation.data)
    if evaluation.data.labels is None:
        plan.warnings.append(
            f"{evaluation.data.source} has no labels: agreement only, no accuracy."
        )
    return evaluation


def _check_report(report: Path | None, force: bool) -> bool:
    """Raise UsageError when `report` exists and holds something, unless `force`; return
    `force` (True for an empty report directory, which holds nothing to lose: callers may hand
    us a fresh staging dir)."""
    if report is not None:
        force = force or (Path(report).is_dir() and not any(Path(report).iterdir()))
        check_output_free(Path(report), force)
    return force
