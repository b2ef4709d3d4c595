"""Training-throughput benchmark on synthetic data, after NVIDIA's ResNet-50 v1.5 AMP benchmarks.

One process measures one configuration: images/s over `num_iter` timed steps after
`warmup_steps` untimed ones (graph tracing, XLA compilation and allocator growth happen there),
per-step latency statistics, peak host RSS and, on a GPU, peak device memory. The grid runs each
cell in its own subprocess because the Keras dtype policy and XLA are process-global and peak RSS
is only meaningful per process.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import numpy as np

from trtconv.backends import registry
from trtconv.core.errors import UsageError
from trtconv.core.lazy import require
from trtconv.core.results import JsonResult, optional_key
from trtconv.facts.environment import Environment, machine_environment
from trtconv.options.train import DEFAULT_NUM_ITER, DEFAULT_WARMUP_STEPS, TrainBenchmarkOptions
from trtconv.train.amp import AmpBlock, AmpChoice, choose_policy
from trtconv.train.distribute import (
    DistributionPlan,
    StrategyBlock,
    check_global_batch,
    cluster_failures,
    describe_strategy,
    plan_cluster,
    start_strategy,
)
from trtconv.train.fit import build_compiled, training_compute_dtype
from trtconv.train.loop import distributed_batches, make_train_step
from trtconv.zoo import ModelConfig, get_model

log = logging.getLogger(__name__)
T = TypeVar("T", bound=JsonResult)

BENCHMARK_SCHEMA_VERSION = 1
HIGH_CV = 0.10  # trtexec warns when the coefficient of variation of latencies exceeds ~10%


@dataclass(frozen=True)
class GridCell:
    """One column of NVIDIA's AMP tables: a precision mode at one batch size."""

    mode: str  # "fp32", "amp" or "amp+xla"
    amp: bool
    xla: bool


GRID_MODES = (
    GridCell("fp32", amp=False, xla=False),
    GridCell("amp", amp=True, xla=False),
    GridCell("amp+xla", amp=True, xla=True),
)


@dataclass(frozen=True, kw_only=True)
class TrainBenchmarkResult(JsonResult):
    """What `train --benchmark` returns: a SingleBenchmarkResult (`mode` "benchmark"), or with
    --grid a GridBenchmarkResult (`mode` "grid"). `from_json` on this class gives the one the
    document's `mode` names."""

    schema_version: int = BENCHMARK_SCHEMA_VERSION
    mode: str
    model: str
    input_shape: list[int | None]  # [None, H, W, C]

    @classmethod
    def from_json(cls: type[T], document: Mapping[str, Any]) -> T:
        """The result `document` describes; on this base class, the kind its `mode` names."""
        if cls is TrainBenchmarkResult:
            kind = GridBenchmarkResult if document.get("mode") == "grid" else SingleBenchmarkResult
            return cast(T, kind.from_json(document))
        return super().from_json(document)


@dataclass(frozen=True, kw_only=True)
class SingleBenchmarkResult(TrainBenchmarkResult):
    """One configuration timed: throughput, step latency (ms), peak memory of this process."""

    mode: str = "benchmark"
    batch_size: int  # global, over every replica
    warmup_steps: int
    num_iter: int
    amp: AmpBlock  # policy, reason, training_compute_dtype
    xla: bool
    strategy: StrategyBlock
    images_per_s: float  # over the whole cluster
    step_ms_mean: float
    step_ms_median: float
    step_ms_p90: float
    step_ms_p99: float
    step_ms_min: float
    step_ms_max: float
    step_ms_std: float
    step_ms_cv: float
    warmup_seconds: float
    final_loss: float
    peak_rss_mb: float
    gpu_peak_memory_mb: float | None  # None without a GPU
    environment: Environment


@dataclass(kw_only=True)
class GridRow:
    """One cell of the grid: its throughput, step latency and memory, or its `error` (then the
    figures are None); `speedup` against the grid's first row."""

    mode: str
    batch_size: int
    error: str | None = optional_key()
    policy: str | None = None
    xla: bool | None = None
    images_per_s: float | None = None
    step_ms_mean: float | None = None
    step_ms_p99: float | None = None
    step_ms_cv: float | None = None
    peak_rss_mb: float | None = None
    gpu_peak_memory_mb: float | None = None
    speedup: float | None = None


@dataclass(frozen=True, kw_only=True)
class GridBenchmarkResult(TrainBenchmarkResult):
    """FP32 / AMP / AMP+XLA x batch sizes: one row per cell, `speedup` against the first."""

    mode: str = "grid"
    warmup_steps: int
    num_iter: int
    amp_dtype: str
    baseline: str  # which row the speedups are against
    rows: list[GridRow]
    environment: Environment


def step_statistics(seconds: list[float]) -> dict[str, float]:
    """Latency statistics (ms) of timed training steps and their coefficient of variation
    (with a warning when it is high)."""
    ms = np.asarray(seconds, dtype=np.float64) * 1000.0
    mean = float(ms.mean())
    cv = float(ms.std() / mean) if mean > 0 else 0.0
    if cv > HIGH_CV:
        log.warning(
            "step times vary by %.0f%% (coefficient of variation): is the machine busy?", 100 * cv
        )
    return {
        "step_ms_mean": mean,
        "step_ms_median": float(np.median(ms)),
        "step_ms_p90": float(np.percentile(ms, 90)),
        "step_ms_p99": float(np.percentile(ms, 99)),
        "step_ms_min": float(ms.min()),
        "step_ms_max": float(ms.max()),
        "step_ms_std": float(ms.std()),
        "step_ms_cv": cv,
    }


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports ru_maxrss in KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1024.0 if sys.platform != "darwin" else peak / (1024.0 * 1024.0)


def gpu_peak_memory_mb() -> float | None:
    """Peak memory TensorFlow allocated on the first GPU, in MiB; None without a GPU."""
    tf = require("tensorflow")
    if not tf.config.list_logical_devices("GPU"):
        return None
    info = tf.config.experimental.get_memory_info("GPU:0")
    return float(info["peak"]) / (1024.0 * 1024.0)


def _check_counts(batch_size: int, warmup_steps: int, num_iter: int) -> None:
    if batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, found {batch_size}.")
    if warmup_steps < 0:
        raise UsageError(f"--warmup-steps must be 0 or more, found {warmup_steps}.")
    if num_iter < 1:
        raise UsageError(f"--num-iter must be at least 1, found {num_iter}.")


def _input_shape(default: tuple[int, ...], image_size: int | None) -> tuple[int, ...]:
    if image_size is None:
        return default
    if image_size < 1:
        raise UsageError(f"--image-size must be at least 1, found {image_size}.")
    return (image_size, image_size, default[-1])


def _step_runner(
    plan: DistributionPlan,
    strategy: Any,
    model: Any,
    images: Any,
    labels: Any,
    batch: int,
    xla: bool,
    seed: int,
) -> Callable[[], float]:
    """One synchronous training step returning its loss as a host value.

    One device: Keras' train_on_batch. Under a strategy: trtconv's distributed step (Keras'
    train_on_batch cannot run under MultiWorkerMirroredStrategy), fed the same batch each time.
    """
    if plan.name == "default":
        return lambda: float(np.asarray(model.train_on_batch(images, labels)).ravel()[0])
    batches = distributed_batches(
        strategy, images.numpy(), labels.numpy(), batch, seed, shuffle=False
    )
    step = make_train_step(strategy, model, batch, xla)
    return lambda: float(step(batches))


def _synthetic_batch(shape: tuple[int, ...], classes: int, seed: int) -> tuple[Any, Any]:
    """(images, labels) kept in memory for the whole run, so the timings are compute only (as in
    NVIDIA's --data_dir-less runs)."""
    tf = require("tensorflow")
    images = tf.random.uniform(shape, dtype=tf.float32, seed=seed)
    labels = tf.random.uniform(shape[:1], maxval=classes, dtype=tf.int32, seed=seed)
    return images, labels


def _timed_steps(
    run_step: Callable[[], float], warmup_steps: int, num_iter: int
) -> tuple[float, list[float], float]:
    """Warm-up seconds, the seconds of each timed step, and the last loss."""
    started = time.perf_counter()
    for _ in range(warmup_steps):
        run_step()
    warmup_seconds = time.perf_counter() - started
    seconds: list[float] = []
    loss = float("nan")
    for _ in range(num_iter):
        begin = time.perf_counter()
        loss = run_step()  # a host value: each step is synchronous
        seconds.append(time.perf_counter() - begin)
    return warmup_seconds, seconds, loss


def _counts(options: TrainBenchmarkOptions) -> tuple[int, int]:
    """(warm-up steps, timed steps): the options', else the defaults."""
    warmup = DEFAULT_WARMUP_STEPS if options.warmup_steps is None else options.warmup_steps
    return warmup, DEFAULT_NUM_ITER if options.num_iter is None else options.num_iter


def _benchmark_model(
    config: ModelConfig, input_shape: tuple[int, ...], amp_choice: AmpChoice, xla: bool, seed: int
) -> Any:
    """The compiled Keras model, built under the current strategy's scope from seeded weights."""
    tf = require("tensorflow")
    tf.random.set_seed(seed)
    return build_compiled(config, input_shape, config.num_classes, amp_choice, xla)


def run_benchmark(options: TrainBenchmarkOptions, plan: DistributionPlan) -> SingleBenchmarkResult:
    """Time `num_iter` training steps of a zoo model on one synthetic batch after a warm-up.

    `plan` runs the steps under a strategy, the batch being global over every replica of every
    worker. Returns the result (images/s over the whole cluster, step latency statistics, this
    process's peak memory, the strategy, environment). Raises UsageError for an unknown model,
    non-positive counts or a batch that does not divide over the replicas, and ClusterError
    when the other workers cannot be reached.
    """
    config = get_model(options.model)
    batch = options.batch_size or config.default_batch_size
    warmup_steps, num_iter = _counts(options)
    _check_counts(batch, warmup_steps, num_iter)
    input_shape = _input_shape(config.input_shape, options.image_size)
    amp_choice = choose_policy(options.amp, options.amp_dtype)
    strategy = start_strategy(plan)
    check_global_batch(batch, int(strategy.num_replicas_in_sync))
    with strategy.scope():
        keras_model = _benchmark_model(config, input_shape, amp_choice, options.xla, options.seed)
    images, labels = _synthetic_batch((batch, *input_shape), config.num_classes, options.seed)
    run_step = _step_runner(
        plan, strategy, keras_model, images, labels, batch, options.xla, options.seed
    )
    log.info(
        "benchmarking %s %s batch %d, policy %s, xla %s, %d replicas: %d warm-up + %d timed steps",
        *(options.model, "x".join(map(str, input_shape)), batch, amp_choice.policy, options.xla),
        *(strategy.num_replicas_in_sync, warmup_steps, num_iter),
    )
    with cluster_failures(plan):
        warmup_seconds, seconds, loss = _timed_steps(run_step, warmup_steps, num_iter)
    statistics: dict[str, Any] = step_statistics(seconds)  # the step_ms_* fields
    return SingleBenchmarkResult(
        model=options.model,
        input_shape=[None, *input_shape],
        batch_size=batch,
        warmup_steps=warmup_steps,
        num_iter=num_iter,
        amp=AmpBlock.of(amp_choice, training_compute_dtype(keras_model), card=False),
        xla=options.xla,
        strategy=describe_strategy(plan, strategy),
        images_per_s=batch * num_iter / float(sum(seconds)),
        **statistics,
        warmup_seconds=warmup_seconds,
        final_loss=loss,
        peak_rss_mb=peak_rss_mb(),
        gpu_peak_memory_mb=gpu_peak_memory_mb(),
        environment=machine_environment(registry.declared_packages()),
    )


def _cell_command(
    cell: GridCell, options: TrainBenchmarkOptions, batch: int, counts: tuple[int, int]
) -> list[str]:
    """`trtconv train --benchmark --json` for one grid cell at `batch`, (warm-up, timed) steps."""
    warmup_steps, num_iter = counts
    command = [sys.executable, "-m", "trtconv", "train", "--benchmark", "--json"]
    command += ["--model", options.model, "--batch-size", str(batch), "--seed", str(options.seed)]
    command += ["--warmup-steps", str(warmup_steps), "--num-iter", str(num_iter)]
    command += ["--amp" if cell.amp else "--no-amp", "--amp-dtype", options.amp_dtype]
    command += ["--xla" if cell.xla else "--no-xla"]
    if options.image_size is not None:
        command += ["--image-size", str(options.image_size)]
    return command


def _run_cell(command: list[str]) -> SingleBenchmarkResult | str:
    """Run one grid cell in a fresh interpreter; its result, or why it failed."""
    completed = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    try:
        document: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError:
        tail = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return f"exit {completed.returncode}: {tail}"
    if "error" in document:
        return str(document["error"]["message"])
    return SingleBenchmarkResult.from_json(document)


def _grid_row(cell: GridCell, batch: int, outcome: SingleBenchmarkResult | str) -> GridRow:
    """One row of the grid: the cell's throughput, latency and memory, or its `error`."""
    if isinstance(outcome, str):
        log.warning("grid cell %s batch %d failed: %s", cell.mode, batch, outcome)
        return GridRow(mode=cell.mode, batch_size=batch, error=outcome)
    return GridRow(
        mode=cell.mode,
        batch_size=batch,
        policy=outcome.amp.policy,
        xla=outcome.xla,
        images_per_s=outcome.images_per_s,
        step_ms_mean=outcome.step_ms_mean,
        step_ms_p99=outcome.step_ms_p99,
        step_ms_cv=outcome.step_ms_cv,
        peak_rss_mb=outcome.peak_rss_mb,
        gpu_peak_memory_mb=outcome.gpu_peak_memory_mb,
    )


def _add_speedups(rows: list[GridRow]) -> None:
    """Give each row its `speedup` against the first (None where either has no throughput)."""
    baseline = rows[0].images_per_s
    for row in rows:
        throughput = row.images_per_s
        row.speedup = throughput / baseline if baseline and throughput else None


def run_grid(options: TrainBenchmarkOptions) -> GridBenchmarkResult:
    """FP32 / AMP / AMP+XLA x batch sizes, each cell in its own process.

    The batch sizes are `options.batch_sizes`, else [batch_size], else the model's default.
    Returns the grid, each row carrying images/s, step latency, peak RSS and `speedup` against
    the first row (FP32 at the first batch size). A failed cell keeps its row with an `error`
    and no speedup; the grid itself raises only UsageError for bad options.
    """
    config = get_model(options.model)
    sizes = options.batch_sizes or [options.batch_size or config.default_batch_size]
    counts = _counts(options)
    _check_counts(min(sizes), *counts)
    input_shape = _input_shape(config.input_shape, options.image_size)
    rows: list[GridRow] = []
    for batch in sizes:
        for cell in GRID_MODES:
            log.info("grid cell: %s, batch %d", cell.mode, batch)
            outcome = _run_cell(_cell_command(cell, options, batch, counts))
            rows.append(_grid_row(cell, batch, outcome))
    _add_speedups(rows)
    return GridBenchmarkResult(
        model=options.model,
        input_shape=[None, *input_shape],
        warmup_steps=counts[0],
        num_iter=counts[1],
        amp_dtype=options.amp_dtype,
        baseline=f"{rows[0].mode} at batch {rows[0].batch_size}",
        rows=rows,
        environment=machine_environment(registry.declared_packages()),
    )


def train_benchmark(options: TrainBenchmarkOptions) -> TrainBenchmarkResult:
    """Training images/s on synthetic data; with `grid`, FP32/AMP/AMP+XLA x `batch_sizes`.

    The distribution options are as for `train` (the grid runs on one device only). Returns a
    SingleBenchmarkResult, or with `grid` a GridBenchmarkResult: see run_benchmark and
    run_grid. Raises UsageError for bad options, ClusterError as run_benchmark does.
    """
    plan = plan_cluster(options.cluster)
    if not options.grid:
        return run_benchmark(options, plan)
    if plan.name != "default":
        raise UsageError(
            "--grid runs each cell in its own process on one device; time a strategy with "
            "--benchmark instead."
        )
    return run_grid(options)
