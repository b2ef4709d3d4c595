"""Orchestration of `trtconv bench`: one subprocess per model, then statistics and comparisons.

Everything that can be checked without running a model (paths, manifests, signatures, batch
sizes, data shapes) is checked before the first worker is spawned (see `models` and `inputs`).
Workers run one after the other, never concurrently, in the order of `plan.models`; their raw
samples come back as JSON and are summarized here with `trtconv.bench.stats`.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.backends import registry
from trtconv.backends.runner import DEVICES
from trtconv.bench import stats
from trtconv.bench.evaluation import (
    BenchEvaluation,
    Outputs,
    contract_warnings,
    judge_models,
    load_outputs,
    prepare,
    recorded_contract,
    scale_warnings,
    validation_warnings,
)
from trtconv.bench.inputs import RANDOM, check_entry_fits, input_map, load_inputs, save_arrays
from trtconv.bench.models import (
    ModelEntry,
    Plan,
    check_batch_sizes,
    plan_models,
    portability_warnings,
)
from trtconv.calib.contract import PreprocessingOptions
from trtconv.calib.evaluation import model_preprocessing
from trtconv.calib.sources import ArraySet
from trtconv.core import errors
from trtconv.core.errors import TrtconvError, UsageError
from trtconv.core.lazy import TF_LOG_LEVEL
from trtconv.model_paths import SAVED_MODEL
from trtconv.outputs.roles import Judging
from trtconv.report.schema import BenchResult, BenchRow, ModelInfo, Settings

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZES = (1, 8, 32)
DEFAULT_WARMUP_ITERATIONS = 10
DEFAULT_DURATION_S = 3.0
# trtexec's floor: a time-bounded run still makes at least this many timed calls.
MIN_ITERATIONS = 10
OVERHEAD_WARN_PERCENT = 2.0
# Below this many samples the p99 is (nearly) the maximum: say so once.
FEW_SAMPLES = 100

Progress = Callable[[int, int, str], None]


# ---------------------------------------------------------------------------- options


def parse_batch_sizes(text: str | Sequence[int]) -> tuple[int, ...]:
    """'1,8,32' -> (1, 8, 32). Raises UsageError for anything but positive integers."""
    items = text.split(",") if isinstance(text, str) else list(text)
    sizes: list[int] = []
    for item in items:
        try:
            size = int(str(item).strip())
        except ValueError:
            raise UsageError(
                f"Batch size '{item}' is not an integer (e.g. --batch-sizes 1,8,32)."
            ) from None
        if size < 1:
            raise UsageError(f"Batch size {size} is invalid: batch sizes must be at least 1.")
        if size not in sizes:
            sizes.append(size)
    if not sizes:
        raise UsageError("No batch size given (e.g. --batch-sizes 1,8,32).")
    return tuple(sizes)


def budgets(
    warmup: int | None, warmup_s: float | None, iterations: int | None, duration: float | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Worker budgets from --warmup/--warmup-s and --iterations/--duration (each pair exclusive)."""
    if warmup is not None and warmup_s is not None:
        raise UsageError("Give --warmup (iterations) or --warmup-s (seconds), not both.")
    if iterations is not None and duration is not None:
        raise UsageError("Give --iterations or --duration, not both.")
    for name, value in (
        ("--warmup", warmup),
        ("--warmup-s", warmup_s),
        ("--iterations", iterations),
        ("--duration", duration),
    ):
        timed = name in ("--iterations", "--duration")
        if value is not None and (value < 0 or (timed and not value)):
            raise UsageError(f"{name} {value} is invalid: it must be positive.")
    if warmup_s is not None:
        warm: dict[str, Any] = {"seconds": warmup_s, "min_iterations": 1}
    else:
        warm = {"iterations": DEFAULT_WARMUP_ITERATIONS if warmup is None else warmup}
    if iterations is not None:
        measure: dict[str, Any] = {"iterations": iterations}
    else:
        seconds = DEFAULT_DURATION_S if duration is None else duration
        measure = {"seconds": seconds, "min_iterations": MIN_ITERATIONS}
    return warm, measure


# ---------------------------------------------------------------------------- workers


def worker_spec(
    entry: ModelEntry,
    settings: Settings,
    data_path: Path,
    eval_path: Path | None,
    mapping: dict[str, str],
    outputs_path: Path | None = None,
) -> dict[str, Any]:
    """The JSON spec one worker process reads: what to load, how to time it, and where to write
    its outputs on the evaluation data."""
    return {
        "label": entry.label,
        "backend": entry.backend,
        "model": str(entry.path),
        "xla": entry.xla,
        "throughput": entry.throughput,
        "threads": settings.threads,
        "batch_sizes": list(settings.batch_sizes),
        "warmup": settings.warmup,
        "measure": settings.measure,
        "data": str(data_path),
        "eval": str(eval_path) if eval_path else None,
        "eval_outputs": str(outputs_path) if outputs_path else None,
        "input_map": mapping,
        # --device is where artifacts run; SavedModels run where TensorFlow places them.
        "device": settings.device if entry.kind != SAVED_MODEL else "auto",
    }


def run_worker(spec: dict[str, Any], workdir: Path, index: int) -> dict[str, Any]:
    """Run one model in a fresh Python process; return its JSON document or raise its error."""
    spec_path = workdir / f"spec-{index}.json"
    spec_path.write_text(json.dumps(spec))
    # Backends registered at run time are registered in the worker too.
    env = {**os.environ, **registry.worker_environment()}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", TF_LOG_LEVEL)
    command = [sys.executable, "-m", "trtconv.cli.bench_worker", str(spec_path)]
    log.debug("running %s", " ".join(command))
    completed = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if completed.stderr:
        log.debug("worker %s stderr:\n%s", spec["label"], completed.stderr)
    lines = [line for line in completed.stdout.splitlines() if line.strip()]
    document: dict[str, Any] | None = None
    if lines:
        try:
            document = json.loads(lines[-1])
        except json.JSONDecodeError:
            document = None
    if document is None:
        tail = completed.stderr.strip().splitlines()[-1:] or ["no output"]
        raise TrtconvError(
            f"The benchmark worker for {spec['label']} exited with code {completed.returncode} "
            f"and no result (last message: {tail[0][:200]})."
        )
    if "error" in document:
        error = document["error"]
        cls = getattr(errors, error.get("type", ""), None)
        if not (isinstance(cls, type) and issubclass(cls, TrtconvError)):
            cls = TrtconvError
        raise cls(f"Benchmark of {spec['label']} failed: {error.get('message')}")
    return document


# ---------------------------------------------------------------------------- results


def model_info(entry: ModelEntry, document: dict[str, Any], is_baseline: bool) -> ModelInfo:
    """The model as its worker measured it (accuracy and agreement come with the result)."""
    return ModelInfo(
        label=entry.label,
        model=str(entry.path),
        backend=entry.backend,
        precision=entry.precision,
        xla=entry.xla,
        throughput_mode=entry.throughput,
        kind=entry.kind,
        is_baseline=is_baseline,
        worker_pid=int(document["pid"]),
        load_ms=float(document["load_ms"]),
        first_inference_ms=float(document["first_inference_ms"]),
        peak_rss_mb=float(document["peak_rss_mb"]),
        gpu_memory_mb=document.get("gpu_memory_mb"),
        harness_overhead_ms=float(document["harness_overhead_ms"]),
        device=document.get("device"),
        validation=entry.validation,
    )


def model_rows(info: ModelInfo, document: dict[str, Any], settings: Settings) -> list[BenchRow]:
    """One row per batch size from a worker's raw samples."""
    rows = []
    for measured in document["batches"]:
        summary = stats.summarize(measured["latencies_ms"])
        batch_size = int(measured["batch_size"])
        transfers, computes = measured.get("transfer_ms"), measured.get("compute_ms")
        wall_ns = int(measured["wall_ns"])
        row = BenchRow(
            info=info,
            batch_size=batch_size,
            warmup_iterations=int(measured["warmup_iterations"]),
            timed_s=wall_ns / 1e9,
            **summary.to_dict(),  # iterations, cv_percent, latency_ms_{min,...,max,std}
            throughput_per_s=stats.throughput_per_s(batch_size, summary.count, wall_ns),
            transfer_ms_mean=float(np.mean(transfers)) if transfers else None,
            threads=settings.threads,
            compute_ms_mean=float(np.mean(computes)) if computes else None,
            compute_cv_percent=stats.coefficient_of_variation(computes) if computes else None,
        )
        rows.append(row)
    return rows


def collect_warnings(rows: list[BenchRow]) -> list[str]:
    """One line per model with unstable timings (CV above the threshold) or figures near the
    harness floor, and one line when some runs are too short for a meaningful p99."""
    warnings = []
    for label in dict.fromkeys(row.info.label for row in rows):
        mine = [row for row in rows if row.info.label == label]
        info = mine[0].info
        warnings += _stability_warnings(label, mine)
        floor = [f"{r.harness_overhead_percent:.1f}% at batch {r.batch_size}" for r in mine
                 if r.harness_overhead_percent > OVERHEAD_WARN_PERCENT]  # fmt: skip
        if floor:
            overhead_us = (info.harness_overhead_ms or 0.0) * 1000
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
               if r.compute_cv_percent is not None and _on_gpu(r.info.backend)
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
    plan: Plan,
    settings: Settings,
    data: ArraySet,
    evaluation: BenchEvaluation | None,
    progress: Progress | None = None,
) -> BenchResult:
    """Run every model's worker in order and assemble the result (no environment yet)."""
    reference = plan.baseline.signature
    mappings = {entry.label: input_map(reference, entry) for entry in plan.models}
    for entry in plan.models:
        check_entry_fits(entry, data, mappings[entry.label])
    result = BenchResult(
        plan.baseline.label, str(plan.baseline.path), plan.baseline_reason, [], [], settings
    )
    outputs: dict[str, Outputs | None] = {}
    with tempfile.TemporaryDirectory(prefix="trtconv-bench-") as tmp:
        workdir = Path(tmp)
        data_path = save_arrays(workdir / "inputs.npz", data.inputs, None)
        eval_path = None
        if evaluation is not None:
            eval_path = save_arrays(workdir / "eval.npz", evaluation.data.inputs, None)
        total = len(plan.models)
        for index, entry in enumerate(plan.models):
            if progress:
                progress(index, total, entry.label)
            written = workdir / f"eval-outputs-{index}.npz" if eval_path else None
            spec = worker_spec(
                entry, settings, data_path, eval_path, mappings[entry.label], written
            )
            document = run_worker(spec, workdir, index)
            info = model_info(entry, document, entry is plan.baseline)
            result.models.append(info)
            result.rows += model_rows(info, document, settings)
            outputs[entry.label] = load_outputs(document.get("eval_outputs"))
            plan.warnings += list(document.get("warnings") or [])
        if progress:
            progress(total, total, "done")
    if evaluation is not None:
        baseline = next(info for info in result.models if info.is_baseline)
        source = plan.baseline.path if plan.baseline.kind == SAVED_MODEL else None
        judge_models(result.models, baseline, outputs, evaluation, source)
    result.warnings = plan.warnings + collect_warnings(result.rows)
    return result


def bench(
    models: Sequence[Path | str],
    batch_sizes: str | Sequence[int] = DEFAULT_BATCH_SIZES,
    warmup: int | None = None,
    warmup_s: float | None = None,
    iterations: int | None = None,
    duration_s: float | None = None,
    threads: int | None = None,
    data: str | None = None,
    eval_data: str | None = None,
    xla: bool = False,
    throughput: bool = False,
    report: Path | None = None,
    force: bool = False,
    progress: Progress | None = None,
    device: str = "auto",
    judging: Judging | None = None,
    preprocessing: PreprocessingOptions | None = None,
    split: str | None = None,
) -> dict[str, Any]:
    """Benchmark models side by side; return the result document (see trtconv.report.schema).

    Raw pixels become inputs by `preprocessing`, else the artifacts' recorded data contract,
    else the baseline's model card. With `eval_data`, every model's outputs on its held-out
    split (`split="all"`: every sample) are judged against the baseline's by output role
    (`judging`, else the manifest's, else inferred): accuracy and decision agreement. Artifacts
    whose own validation failed are marked (`validation`) and warned about.

    With `report`, also write results.json, results.csv, report.md and PNG plots there
    (atomically; an existing non-empty directory needs `force`); the written files are listed
    under the result's `report` key. Raises UsageError (bad options, missing model path, batch
    size the model cannot take, existing report) and InputError (not a model, data that does
    not fit) before any worker starts, and the worker's error type when a model fails.
    """
    from trtconv.environment import environment_block
    from trtconv.quantize.speed import bench_no_gain_warnings

    sizes = parse_batch_sizes(batch_sizes)
    warm, timed = budgets(warmup, warmup_s, iterations, duration_s)
    force = _check_options(report, force, threads, device, split)
    plan = plan_models(models, xla=xla, throughput=throughput)
    check_batch_sizes(plan.models, sizes)
    plan.warnings += portability_warnings(plan.models, measured_here=eval_data is not None)
    plan.warnings += validation_warnings(plan.models) + contract_warnings(plan)
    source = plan.baseline.path if plan.baseline.kind == SAVED_MODEL else None
    data = data or RANDOM
    prep = model_preprocessing(
        plan.baseline.signature, source, preprocessing, recorded_contract(plan)
    )
    inputs = load_inputs(data, plan.baseline, max(sizes), source, prep)
    evaluation, contract = None, {"preprocessing": prep.to_dict()}
    if eval_data is not None:
        evaluation = prepare(plan, eval_data, source, preprocessing, split, judging)
        contract = evaluation.contract
        plan.warnings += scale_warnings(plan.models, evaluation.data)
        if evaluation.data.labels is None:
            plan.warnings.append(
                f"{evaluation.data.source} has no labels: agreement only, no accuracy."
            )
    settings = Settings(sizes, warm, timed, threads, data, eval_data, device, contract)
    result = measure(plan, settings, inputs, evaluation, progress)
    result.environment = {**environment_block(registry.declared_packages()), "threads": threads}
    document = result.to_dict()
    document["warnings"] += bench_no_gain_warnings(plan.models, document["results"])
    if report is not None:
        from trtconv.report.writers import write_report

        document["report"] = write_report(document, Path(report), force=force)
    return document


def _check_options(
    report: Path | None, force: bool, threads: int | None, device: str, split: str | None
) -> bool:
    """Raise UsageError for a bad option; return `force` (True for an empty report directory,
    which holds nothing to lose: callers may hand us a fresh staging dir)."""
    from trtconv.calib.contract import check_split
    from trtconv.core.fsutil import check_output_free

    if report is not None:
        force = force or (Path(report).is_dir() and not any(Path(report).iterdir()))
        check_output_free(Path(report), force)
    if threads is not None and threads < 1:
        raise UsageError(f"--threads {threads} is invalid: it must be at least 1.")
    if device not in DEVICES:
        raise UsageError(f"Unknown device '{device}'; choose one of {', '.join(DEVICES)}.")
    check_split(split)
    return force
