"""`trtconv train`: train a zoo model with AMP and export a float32 SavedModel."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from trtconv.cli._options import (
    ImageMeanOpt,
    ImageOffsetOpt,
    ImageScaleOpt,
    ImageStdOpt,
    JsonOpt,
    parse_batch_sizes,
    preprocessing_options,
)
from trtconv.cli._output import run_command
from trtconv.core.errors import UsageError
from trtconv.options.train import (
    DEFAULT_CLUSTER_TIMEOUT_S,
    STRATEGIES,
    ClusterOptions,
    TrainBenchmarkOptions,
    TrainOptions,
)
from trtconv.train.benchmark import (
    GridBenchmarkResult,
    SingleBenchmarkResult,
    TrainBenchmarkResult,
    train_benchmark,
)
from trtconv.train.pipeline import TrainResult, train

# The command's options, declared once here so that its signature is one line per option.
Model = Annotated[
    str | None,
    typer.Option(
        help=f"Zoo model name (default: {TrainOptions.model}; {TrainBenchmarkOptions.model} "
        "with --benchmark)."
    ),
]
Data = Annotated[str | None, typer.Option(help="digits, PATH.npz (x, y) or an image folder.")]
Epochs = Annotated[int | None, typer.Option(min=1, help="Epochs (default: the model's).")]
BatchSize = Annotated[int | None, typer.Option(min=1, help="Global batch size.")]
Amp = Annotated[bool, typer.Option("--amp/--no-amp", help="Automatic mixed precision.")]
AmpDtype = Annotated[str, typer.Option(help="auto, float16 or bfloat16.")]
Xla = Annotated[bool, typer.Option("--xla/--no-xla", help="Compile the training step with XLA.")]
Seed = Annotated[int, typer.Option(help="Random seed.")]
Output = Annotated[Path | None, typer.Option(help="Output directory (default models/MODEL).")]
Force = Annotated[bool, typer.Option(help="Replace an existing output.")]
Strategy = Annotated[
    str | None,
    typer.Option(
        help=f"{STRATEGIES[0]}, mirrored (all local GPUs) or "
        "multi-worker (every worker of a cluster runs this same command; the cluster comes from "
        "TF_CONFIG or --workers)."
    ),
]
CpuDevices = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Split the CPU into N logical devices first (env TRTCONV_CPU_DEVICES); lets "
        "--strategy mirrored run without GPUs.",
    ),
]
Workers = Annotated[
    str | None,
    typer.Option(
        help="Multi-worker: every worker's host:port, comma-separated (writes TF_CONFIG)."
    ),
]
WorkerIndex = Annotated[
    int | None,
    typer.Option(min=0, help="Multi-worker: which of --workers this process is (0 is the chief)."),
]
ClusterTimeout = Annotated[
    float | None,
    typer.Option(
        help="Multi-worker: seconds to wait for the other workers, at the start and in any "
        f"step, before failing (default {DEFAULT_CLUSTER_TIMEOUT_S:g})."
    ),
]
Benchmark = Annotated[
    bool,
    typer.Option("--benchmark", help="Measure training images/s on synthetic data; no export."),
]
WarmupSteps = Annotated[int | None, typer.Option(min=0, help="Benchmark: untimed steps first.")]
NumIter = Annotated[int | None, typer.Option(min=1, help="Benchmark: timed steps.")]
ImageSize = Annotated[
    int | None,
    typer.Option(
        min=8,
        help="Image folders: train at this square size (default: the images' own); "
        "--benchmark: the synthetic input's size (default: the model's).",
    ),
]
Grid = Annotated[
    bool,
    typer.Option(
        "--grid", help="Benchmark FP32 / AMP / AMP+XLA x --batch-sizes, one process each."
    ),
]
BatchSizes = Annotated[str | None, typer.Option(help="Grid batch sizes, e.g. 32,64.")]


def render_card(card: TrainResult, console: Console) -> None:
    amp = card.amp
    console.print(f"[bold]{card.model}[/bold] trained with {amp.policy} ({amp.reason})")
    console.print(
        f"  test accuracy {card.test_accuracy:.4f}   "
        f"training {card.train_images_per_s:.0f} images/s   {card.train_seconds:.1f} s"
    )
    strategy = card.strategy
    if strategy.replicas > 1:
        console.print(
            f"  {strategy.name}: {strategy.replicas} replicas on {strategy.workers} "
            f"worker(s), global batch {card.batch_size}"
        )
    if card.saved_model is None:
        console.print(f"  SavedModel: written by the chief ({strategy.task} writes nothing)")
    else:
        console.print(f"  SavedModel: {card.saved_model}")


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render_benchmark(result: SingleBenchmarkResult, console: Console) -> None:
    amp = result.amp
    shape = "x".join(str(d) for d in result.input_shape[1:])
    strategy = result.strategy
    replicas = f" over {strategy.replicas} replicas" if strategy.replicas > 1 else ""
    console.print(
        f"[bold]{result.model}[/bold] {shape}, batch {result.batch_size}{replicas}, "
        f"{amp.policy}{' + XLA' if result.xla else ''}: "
        f"[bold]{result.images_per_s:.1f} images/s[/bold]"
    )
    console.print(
        f"  step ms: mean {result.step_ms_mean:.1f}  median {result.step_ms_median:.1f}  "
        f"p99 {result.step_ms_p99:.1f}  cv {100 * result.step_ms_cv:.0f}%   "
        f"({result.warmup_steps} warm-up + {result.num_iter} timed steps)"
    )
    gpu = result.gpu_peak_memory_mb
    gpu_text = f"   peak GPU memory {gpu:.0f} MiB" if gpu is not None else ""
    console.print(f"  peak host RSS {result.peak_rss_mb:.0f} MiB{gpu_text}")


def render_grid(result: GridBenchmarkResult, console: Console) -> None:
    shape = "x".join(str(d) for d in result.input_shape[1:])
    table = Table(
        title=f"{result.model} {shape} training throughput, synthetic data",
        caption=f"speedup against the first row ({result.baseline})",
    )
    for column in ("mode", "policy", "batch", "img/s", "step ms", "p99 ms", "RSS MiB", "speedup"):
        table.add_column(column, justify="left" if column in ("mode", "policy") else "right")
    for row in result.rows:
        if row.error:
            table.add_row(row.mode, "error", str(row.batch_size), row.error[:60])
            continue
        table.add_row(
            row.mode,
            row.policy,
            str(row.batch_size),
            _fmt(row.images_per_s, ".1f"),
            _fmt(row.step_ms_mean, ".1f"),
            _fmt(row.step_ms_p99, ".1f"),
            _fmt(row.peak_rss_mb, ".0f"),
            _fmt(row.speedup, ".2f") + ("x" if row.speedup is not None else ""),
        )
    console.print(table)


def render_train(result: TrainResult | TrainBenchmarkResult, console: Console) -> None:
    if isinstance(result, GridBenchmarkResult):
        render_grid(result, console)
    elif isinstance(result, SingleBenchmarkResult):
        render_benchmark(result, console)
    elif isinstance(result, TrainResult):
        render_card(result, console)


def train_cli(
    model: Model = None,
    data: Data = TrainOptions.data,
    epochs: Epochs = TrainOptions.epochs,
    batch_size: BatchSize = TrainOptions.batch_size,
    amp: Amp = TrainOptions.amp,
    amp_dtype: AmpDtype = TrainOptions.amp_dtype,
    xla: Xla = TrainOptions.xla,
    seed: Seed = TrainOptions.seed,
    output: Output = TrainOptions.output,
    force: Force = TrainOptions.force,
    strategy: Strategy = STRATEGIES[0],  # the same as ClusterOptions.strategy None
    cpu_devices: CpuDevices = ClusterOptions.cpu_devices,
    workers: Workers = ClusterOptions.workers,
    worker_index: WorkerIndex = ClusterOptions.worker_index,
    cluster_timeout: ClusterTimeout = ClusterOptions.cluster_timeout_s,
    benchmark: Benchmark = False,
    warmup_steps: WarmupSteps = TrainBenchmarkOptions.warmup_steps,
    num_iter: NumIter = TrainBenchmarkOptions.num_iter,
    image_size: ImageSize = TrainOptions.image_size,
    image_scale: ImageScaleOpt = None,
    image_offset: ImageOffsetOpt = None,
    image_mean: ImageMeanOpt = None,
    image_std: ImageStdOpt = None,
    grid: Grid = TrainBenchmarkOptions.grid,
    batch_sizes: BatchSizes = None,
    json_output: JsonOpt = False,
) -> None:
    """Train (AMP) and export a float32 SavedModel with a serving_default signature."""

    def work() -> TrainResult | TrainBenchmarkResult:
        options = TrainOptions(
            model=model or TrainOptions.model,
            data=data,
            epochs=epochs,
            batch_size=batch_size,
            amp=amp,
            amp_dtype=amp_dtype,
            xla=xla,
            seed=seed,
            output=output,
            force=force,
            cluster=ClusterOptions(strategy, cpu_devices, workers, worker_index, cluster_timeout),
            image_size=image_size,
        )
        if benchmark or grid:
            counts = (warmup_steps, num_iter)
            return train_benchmark(_benchmark_options(options, model, counts, grid, batch_sizes))
        if batch_sizes:
            raise UsageError("--batch-sizes applies to --grid; use --batch-size to train.")
        pixels = preprocessing_options(image_scale, image_offset, image_mean, image_std)
        return train(replace(options, preprocessing=pixels))

    run_command(work, json_mode=json_output, render=render_train)


def _benchmark_options(
    options: TrainOptions,
    model: str | None,
    counts: tuple[int | None, int | None],
    grid: bool,
    batch_sizes: str | None,
) -> TrainBenchmarkOptions:
    """`train --benchmark`'s options from the flags `train` shares with it (`options`, whose
    model is only the default when --model was not given), the (warm-up, timed) step counts,
    --grid and --batch-sizes. Raises UsageError for --output, --data or bad --batch-sizes."""
    if options.output is not None or options.data is not None:
        raise UsageError(
            "--benchmark trains on synthetic data and writes nothing: drop --output and --data."
        )
    # Without --batch-sizes the grid runs at --batch-size, else at the model's own (no sizes).
    default = () if options.batch_size is None else (options.batch_size,)
    sizes = parse_batch_sizes(batch_sizes) if batch_sizes else default
    return TrainBenchmarkOptions(
        model=model or TrainBenchmarkOptions.model,
        batch_size=options.batch_size,
        warmup_steps=counts[0],
        num_iter=counts[1],
        amp=options.amp,
        amp_dtype=options.amp_dtype,
        xla=options.xla,
        image_size=options.image_size,
        seed=options.seed,
        grid=grid,
        batch_sizes=sizes or None,
        cluster=options.cluster,
    )
