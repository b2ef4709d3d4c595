"""Orchestration of `trtconv bench`: one subprocess per model, then statistics and comparisons.

Everything that can be checked without running a model (paths, manifests, signatures, batch
sizes, data shapes) is checked before the first worker is spawned (see `models` and `inputs`).
Workers run one after the other, never concurrently, in the order of `plan.models`; their raw
samples come back as JSON and become rows and a typed `BenchResult` in trtconv.bench.rows. Each
step returns the warnings it finds; the result lists them in the order they were found.
"""

from __future__ import annotations

import logging
import subprocess
import tempfile
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

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
    recorded_custom_objects,
)
from trtconv.bench.rounds import Schedule, Worker
from trtconv.bench.rows import RoundTotals, assemble, model_info, model_rows, round_totals
from trtconv.calib.judged_data import model_preprocessing
from trtconv.calib.readers import RANDOM
from trtconv.calib.sources import ArraySet
from trtconv.core.data_contract import DataContract
from trtconv.core.errors import TrtconvError
from trtconv.core.fsutil import check_output_free
from trtconv.core.model_io import Outputs
from trtconv.core.progress import Progress, Steps
from trtconv.measure.bench_result import (
    BenchResult,
    BenchRow,
    ModelInfo,
    Settings,
)
from trtconv.model.paths import SAVED_MODEL
from trtconv.model.savedmodel import keras_exported
from trtconv.options.bench import DEFAULT_DURATION_S, DEFAULT_WARMUP_ITERATIONS, BenchOptions
from trtconv.report.writers import write_report

log = logging.getLogger(__name__)

# trtexec's floor: a time-bounded run still makes at least this many timed calls.
MIN_ITERATIONS = 10


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


def measure(
    plan: BenchPlan,
    settings: Settings,
    data: ArraySet,
    evaluation: AccuracySet | None,
    progress: Progress | None = None,
) -> tuple[list[ModelInfo], list[BenchRow], RoundTotals, list[str]]:
    """Time every model in interleaved rounds (`run_rounds`); judge their outputs when
    `evaluation` is given. Returns the models (in `plan.models` order), their rows, each
    round's totals and the run's warnings (the rounds', then each worker's). Raises the
    worker's error type when a model fails."""
    mappings = {entry.label: input_map(plan.baseline.signature, entry) for entry in plan.models}
    for entry in plan.models:
        check_entry_fits(entry, data, mappings[entry.label])
    models: list[ModelInfo] = []
    rows: list[BenchRow] = []
    totals: RoundTotals = {}
    outputs: dict[str, Outputs | None] = {}
    warnings: list[str] = []
    with tempfile.TemporaryDirectory(prefix="trtconv-bench-") as tmp:
        workdir = Path(tmp)
        data_path = save_arrays(workdir / "inputs.npz", data.inputs, None)
        eval_path = None
        if evaluation is not None:
            eval_path = save_arrays(workdir / "eval.npz", evaluation.data.inputs, None)
        specs = [
            worker_spec(
                entry,
                settings,
                data_path,
                eval_path,
                mappings[entry.label],
                workdir / f"eval-outputs-{index}.npz" if eval_path else None,
            )
            for index, entry in enumerate(plan.models)
        ]
        reports, warnings = run_rounds(plan, settings, specs, workdir, progress)
        for entry, report in zip(plan.models, reports, strict=True):
            models.append(model_info(entry, report, entry is plan.baseline))
            rows += model_rows(models[-1], report, settings)
            totals.update(round_totals(entry.label, report))
            outputs[entry.label] = load_outputs(report.finished.eval_outputs)
            warnings += report.finished.warnings
    if evaluation is not None:
        baseline = next(info for info in models if info.is_baseline)
        judge_models(models, baseline, outputs, evaluation, _source(plan))
    return models, rows, totals, warnings


def run_rounds(
    plan: BenchPlan,
    settings: Settings,
    specs: list[WorkerSpec],
    workdir: Path,
    progress: Progress | None = None,
) -> tuple[list[WorkerReport], list[str]]:
    """Load every model in its own worker (one after the other), time them in interleaved
    rounds, then let each finish (memory, evaluation outputs). Returns one report per model,
    as a single-loop worker gives it, its `batches` holding every round, and the notes about
    speed goals left undecided."""
    planned = len(settings.batch_sizes) * len(settings.round_budgets())
    steps = Steps(progress, len(specs) + planned + 1)
    with ExitStack() as stack:
        workers: list[Worker] = []
        for index, spec in enumerate(specs):
            steps.start(f"load {spec.label}")
            workers.append(stack.enter_context(Worker(spec, workdir, index)))
        schedule = Schedule(workers, settings, plan.baseline.label, steps.start)
        measured = schedule.run()
        steps.start("finish")
        reports = [
            WorkerReport(worker.ready(), worker.finish(), measured[worker.label])
            for worker in workers
        ]
    steps.finish()
    return reports, list(schedule.notes)


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
    objects = options.custom_objects or recorded_custom_objects(options.models)
    sources = keras_sources(options.models, options.baseline)
    with keras_exported(sources, objects) as exported:
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
    evaluation, data_warnings = _evaluation(plan, options, source)
    contract = evaluation.contract if evaluation else DataContract(preprocessing=prep)
    settings = settings_of(options, data, contract)
    models, rows, totals, run_warnings = measure(plan, settings, inputs, evaluation, progress)
    result = assemble(plan, settings, models, rows, totals, [*data_warnings, *run_warnings])
    if options.report is not None:
        result.report = write_report(result, Path(options.report), force=force)
    return result


def _plan(options: BenchOptions, exported: dict[Path, Path] | None = None) -> BenchPlan:
    """The models in measuring order, their batch sizes checked, and the planning warnings."""
    plan = plan_models(
        options.models,
        options.xla,
        options.throughput,
        options.signature,
        exported,
        options.baseline,
    )
    measured_here = options.eval_data is not None
    return replace(
        plan,
        batch_sizes=check_batch_sizes(plan.models, options.batch_sizes),
        warnings=[
            *plan.warnings,
            *portability_warnings(plan.models, measured_here=measured_here),
            *validation_warnings(plan.models),
            *contract_warnings(plan),
        ],
    )


def _source(plan: BenchPlan) -> Path | None:
    """The baseline's SavedModel (its model card is read), None when it is an artifact."""
    return plan.baseline.path if plan.baseline.kind == SAVED_MODEL else None


def _evaluation(
    plan: BenchPlan, options: BenchOptions, source: Path | None
) -> tuple[AccuracySet | None, list[str]]:
    """The evaluation data and judging (None without `eval_data`), and its warnings."""
    if options.eval_data is None:
        return None, []
    evaluation = prepare(
        plan, options.eval_data, source, options.preprocessing, options.split, options.judging
    )
    warnings = scale_warnings(plan.models, evaluation.data)
    if evaluation.data.labels is None:
        warnings.append(f"{evaluation.data.source} has no labels: agreement only, no accuracy.")
    return evaluation, warnings


def _check_report(report: Path | None, force: bool) -> bool:
    """Raise UsageError when `report` exists and holds something, unless `force`; return
    `force` (True for an empty report directory, which holds nothing to lose: callers may hand
    us a fresh staging dir)."""
    if report is not None:
        force = force or (Path(report).is_dir() and not any(Path(report).iterdir()))
        check_output_free(Path(report), force)
    return force
