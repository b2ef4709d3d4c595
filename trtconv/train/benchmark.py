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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from trtconv.backends import registry
from trtconv.core.errors import UsageError
from trtconv.core.lazy import require
from trtconv.environment import environment_block
from trtconv.train.distribute import (
    DistributionPlan,
    check_global_batch,
    cluster_failures,
    describe_strategy,
    start_strategy,
)

log = logging.getLogger(__name__)

BENCHMARK_SCHEMA_VERSION = 1
DEFAULT_WARMUP_STEPS = 3
DEFAULT_NUM_ITER = 20
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
    from trtconv.train.loop import distributed_batches, make_train_step

    batches = distributed_batches(
        strategy, images.numpy(), labels.numpy(), batch, seed, shuffle=False
    )
    step = make_train_step(strategy, model, batch, xla)
    return lambda: float(step(batches))


def _synthetic_batch(tf: Any, shape: tuple[int, ...], classes: int, seed: int) -> tuple[Any, Any]:
    """(images, labels) kept in memory for the whole run, so the timings are compute only (as in
    NVIDIA's --data_dir-less runs)."""
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


def run_benchmark(
    model: str = "resnet50",
    batch_size: int | None = None,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    num_iter: int = DEFAULT_NUM_ITER,
    amp: bool = True,
    amp_dtype: str = "auto",
    xla: bool = False,
    image_size: int | None = None,
    seed: int = 0,
    plan: DistributionPlan | None = None,
) -> dict[str, Any]:
    """Time `num_iter` training steps of a zoo model on one synthetic batch after a warm-up.

    `plan` (a DistributionPlan; default: one device) runs the steps under a strategy, the batch
    being global over every replica of every worker. Returns the result dict (images/s over the
    whole cluster, step latency statistics, this process's peak memory, the strategy,
    environment). Raises UsageError for an unknown model, non-positive counts or a batch that
    does not divide over the replicas, and ClusterError when the other workers cannot be reached.
    """
    from trtconv.train.amp import choose_policy
    from trtconv.train.fit import build_compiled, training_compute_dtype
    from trtconv.zoo import get_model

    plan = plan or DistributionPlan("default")
    config = get_model(model)
    batch = batch_size or config.default_batch_size
    _check_counts(batch, warmup_steps, num_iter)
    input_shape = _input_shape(config.input_shape, image_size)
    amp_choice = choose_policy(amp, amp_dtype)
    strategy = start_strategy(plan)
    check_global_batch(batch, int(strategy.num_replicas_in_sync))
    tf = require("tensorflow")
    tf.random.set_seed(seed)
    with strategy.scope():
        keras_model = build_compiled(config, input_shape, config.num_classes, amp_choice, xla)
    images, labels = _synthetic_batch(tf, (batch, *input_shape), config.num_classes, seed)
    run_step = _step_runner(plan, strategy, keras_model, images, labels, batch, xla, seed)
    log.info(
        "benchmarking %s %s batch %d, policy %s, xla %s, %d replicas: %d warm-up + %d timed steps",
        *(model, "x".join(map(str, input_shape)), batch, amp_choice.policy, xla),
        *(strategy.num_replicas_in_sync, warmup_steps, num_iter),
    )
    with cluster_failures(plan):
        warmup_seconds, seconds, loss = _timed_steps(run_step, warmup_steps, num_iter)
    stats = step_statistics(seconds)
    return {
        "schema_version": BENCHMARK_SCHEMA_VERSION,
        "mode": "benchmark",
        "model": model,
        "input_shape": [None, *input_shape],
        "batch_size": batch,
        "warmup_steps": warmup_steps,
        "num_iter": num_iter,
        "amp": {
            "policy": amp_choice.policy,
            "reason": amp_choice.reason,
            "training_compute_dtype": training_compute_dtype(keras_model),
        },
        "xla": xla,
        "strategy": describe_strategy(plan, strategy),
        "images_per_s": batch * num_iter / float(sum(seconds)),
        **stats,
        "warmup_seconds": warmup_seconds,
        "final_loss": loss,
        "peak_rss_mb": peak_rss_mb(),
        "gpu_peak_memory_mb": gpu_peak_memory_mb(),
        "environment": environment_block(registry.declared_packages()),
    }


def parse_batch_sizes(text: str | None, default: int) -> list[int]:
    """`"32,64"` -> [32, 64]; None -> [default]. Raises UsageError on anything else."""
    if not text:
        return [default]
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(
            f"--batch-sizes must be comma-separated integers like 32,64, found '{text}'."
        ) from None
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--batch-sizes must hold positive integers, found '{text}'.")
    return sizes


def _cell_command(
    cell: GridCell,
    model: str,
    batch: int,
    warmup_steps: int,
    num_iter: int,
    amp_dtype: str,
    image_size: int | None,
    seed: int,
) -> list[str]:
    command = [sys.executable, "-m", "trtconv", "train", "--benchmark", "--json"]
    command += ["--model", model, "--batch-size", str(batch), "--seed", str(seed)]
    command += ["--warmup-steps", str(warmup_steps), "--num-iter", str(num_iter)]
    command += ["--amp" if cell.amp else "--no-amp", "--amp-dtype", amp_dtype]
    command += ["--xla" if cell.xla else "--no-xla"]
    if image_size is not None:
        command += ["--image-size", str(image_size)]
    return command


def _run_cell(command: list[str]) -> dict[str, Any]:
    """Run one grid cell in a fresh interpreter; its JSON result, or an `error` entry."""
    completed = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ))
    try:
        document: dict[str, Any] = json.loads(completed.stdout)
    except json.JSONDecodeError:
        tail = (completed.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {completed.returncode}: {tail}"}
    if "error" in document:
        return {"error": document["error"]["message"]}
    return document


def run_grid(
    model: str = "resnet50",
    batch_sizes: list[int] | None = None,
    warmup_steps: int = DEFAULT_WARMUP_STEPS,
    num_iter: int = DEFAULT_NUM_ITER,
    amp_dtype: str = "auto",
    image_size: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """FP32 / AMP / AMP+XLA x batch sizes, each cell in its own process.

    Returns {"rows": [...]} where each row carries images/s, step latency, peak RSS and
    `speedup` against the first row (FP32 at the first batch size). A failed cell keeps its row
    with an `error` and no speedup; the grid itself raises only UsageError for bad options.
    """
    from trtconv.zoo import get_model

    config = get_model(model)
    sizes = batch_sizes or [config.default_batch_size]
    _check_counts(min(sizes), warmup_steps, num_iter)
    input_shape = _input_shape(config.input_shape, image_size)
    rows: list[dict[str, Any]] = []
    for batch in sizes:
        for cell in GRID_MODES:
            log.info("grid cell: %s, batch %d", cell.mode, batch)
            command = _cell_command(
                cell, model, batch, warmup_steps, num_iter, amp_dtype, image_size, seed
            )
            result = _run_cell(command)
            row: dict[str, Any] = {"mode": cell.mode, "batch_size": batch}
            if "error" in result:
                log.warning("grid cell %s batch %d failed: %s", cell.mode, batch, result["error"])
                row.update(error=result["error"], images_per_s=None)
            else:
                row.update(
                    policy=result["amp"]["policy"],
                    xla=result["xla"],
                    images_per_s=result["images_per_s"],
                    step_ms_mean=result["step_ms_mean"],
                    step_ms_p99=result["step_ms_p99"],
                    step_ms_cv=result["step_ms_cv"],
                    peak_rss_mb=result["peak_rss_mb"],
                    gpu_peak_memory_mb=result["gpu_peak_memory_mb"],
                )
            rows.append(row)
    baseline = rows[0].get("images_per_s")
    for row in rows:
        throughput = row.get("images_per_s")
        row["speedup"] = throughput / baseline if baseline and throughput else None
    return {
        "schema_version": BENCHMARK_SCHEMA_VERSION,
        "mode": "grid",
        "model": model,
        "input_shape": [None, *input_shape],
        "warmup_steps": warmup_steps,
        "num_iter": num_iter,
        "amp_dtype": amp_dtype,
        "baseline": f"{rows[0]['mode']} at batch {rows[0]['batch_size']}",
        "rows": rows,
        "environment": environment_block(registry.declared_packages()),
    }


def train_benchmark(
    model: str = "resnet50",
    batch_size: int | None = None,
    warmup_steps: int | None = None,
    num_iter: int | None = None,
    amp: bool = True,
    amp_dtype: str = "auto",
    xla: bool = False,
    image_size: int | None = None,
    seed: int = 0,
    grid: bool = False,
    batch_sizes: list[int] | None = None,
    strategy: str | None = None,
    cpu_devices: int | None = None,
    workers: str | None = None,
    worker_index: int | None = None,
    cluster_timeout_s: float | None = None,
) -> dict[str, Any]:
    """Training images/s on synthetic data; with `grid`, FP32/AMP/AMP+XLA x `batch_sizes`.

    `None` counts mean the defaults; the distribution options are as for `train` (the grid runs
    on one device only). See run_benchmark and run_grid for what each returns.
    """
    from trtconv.train.distribute import plan_distribution

    plan = plan_distribution(strategy, cpu_devices, workers, worker_index, cluster_timeout_s)
    warmup = DEFAULT_WARMUP_STEPS if warmup_steps is None else warmup_steps
    iterations = DEFAULT_NUM_ITER if num_iter is None else num_iter
    if grid:
        if plan.name != "default":
            raise UsageError(
                "--grid runs each cell in its own process on one device; time a strategy with "
                "--benchmark instead."
            )
        sizes = batch_sizes or ([batch_size] if batch_size else None)
        return run_grid(model, sizes, warmup, iterations, amp_dtype, image_size, seed)
    return run_benchmark(
        model, batch_size, warmup, iterations, amp, amp_dtype, xla, image_size, seed, plan
    )
