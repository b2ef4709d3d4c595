"""`trtconv train`: train a zoo model with AMP and export a float32 SavedModel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from trtconv.cli._options import (
    ImageMeanOpt,
    ImageOffsetOpt,
    ImageScaleOpt,
    ImageStdOpt,
    preprocessing_options,
)
from trtconv.cli._output import run_command
from trtconv.core.errors import UsageError


def render_card(card: dict[str, Any], console: Console) -> None:
    amp = card["amp"]
    console.print(f"[bold]{card['model']}[/bold] trained with {amp['policy']} ({amp['reason']})")
    console.print(
        f"  test accuracy {card['test_accuracy']:.4f}   "
        f"training {card['train_images_per_s']:.0f} images/s   {card['train_seconds']:.1f} s"
    )
    strategy = card.get("strategy", {})
    if strategy.get("replicas", 1) > 1:
        console.print(
            f"  {strategy['name']}: {strategy['replicas']} replicas on {strategy['workers']} "
            f"worker(s), global batch {card['batch_size']}"
        )
    if card["saved_model"] is None:
        console.print(f"  SavedModel: written by the chief ({strategy.get('task')} writes nothing)")
    else:
        console.print(f"  SavedModel: {card['saved_model']}")


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render_benchmark(result: dict[str, Any], console: Console) -> None:
    amp = result["amp"]
    shape = "x".join(str(d) for d in result["input_shape"][1:])
    strategy = result["strategy"]
    replicas = f" over {strategy['replicas']} replicas" if strategy["replicas"] > 1 else ""
    console.print(
        f"[bold]{result['model']}[/bold] {shape}, batch {result['batch_size']}{replicas}, "
        f"{amp['policy']}{' + XLA' if result['xla'] else ''}: "
        f"[bold]{result['images_per_s']:.1f} images/s[/bold]"
    )
    console.print(
        f"  step ms: mean {result['step_ms_mean']:.1f}  median {result['step_ms_median']:.1f}  "
        f"p99 {result['step_ms_p99']:.1f}  cv {100 * result['step_ms_cv']:.0f}%   "
        f"({result['warmup_steps']} warm-up + {result['num_iter']} timed steps)"
    )
    gpu = result["gpu_peak_memory_mb"]
    gpu_text = f"   peak GPU memory {gpu:.0f} MiB" if gpu is not None else ""
    console.print(f"  peak host RSS {result['peak_rss_mb']:.0f} MiB{gpu_text}")


def render_grid(result: dict[str, Any], console: Console) -> None:
    shape = "x".join(str(d) for d in result["input_shape"][1:])
    table = Table(
        title=f"{result['model']} {shape} training throughput, synthetic data",
        caption=f"speedup against the first row ({result['baseline']})",
    )
    for column in ("mode", "policy", "batch", "img/s", "step ms", "p99 ms", "RSS MiB", "speedup"):
        table.add_column(column, justify="left" if column in ("mode", "policy") else "right")
    for row in result["rows"]:
        if row.get("error"):
            table.add_row(row["mode"], "error", str(row["batch_size"]), row["error"][:60])
            continue
        table.add_row(
            row["mode"],
            row["policy"],
            str(row["batch_size"]),
            _fmt(row["images_per_s"], ".1f"),
            _fmt(row["step_ms_mean"], ".1f"),
            _fmt(row["step_ms_p99"], ".1f"),
            _fmt(row["peak_rss_mb"], ".0f"),
            _fmt(row["speedup"], ".2f") + ("x" if row["speedup"] is not None else ""),
        )
    console.print(table)


def render_train(result: dict[str, Any], console: Console) -> None:
    if result.get("mode") == "grid":
        render_grid(result, console)
    elif result.get("mode") == "benchmark":
        render_benchmark(result, console)
    else:
        render_card(result, console)


def train_cli(
    model: str = typer.Option(
        None, help="Zoo model name (default: digits-cnn; resnet50 with --benchmark)."
    ),
    data: str = typer.Option(None, help="digits, PATH.npz (x, y) or an image folder."),
    epochs: int = typer.Option(None, min=1, help="Epochs (default: the model's)."),
    batch_size: int = typer.Option(None, min=1, help="Global batch size."),
    amp: bool = typer.Option(True, "--amp/--no-amp", help="Automatic mixed precision."),
    amp_dtype: str = typer.Option("auto", help="auto, float16 or bfloat16."),
    xla: bool = typer.Option(False, "--xla/--no-xla", help="Compile the training step with XLA."),
    seed: int = typer.Option(0, help="Random seed."),
    output: Path = typer.Option(None, help="Output directory (default models/MODEL)."),
    force: bool = typer.Option(False, help="Replace an existing output."),
    strategy: str = typer.Option(
        "default",
        help="default, mirrored (all local GPUs) or multi-worker (every worker of a cluster "
        "runs this same command; the cluster comes from TF_CONFIG or --workers).",
    ),
    cpu_devices: int = typer.Option(
        None,
        min=1,
        help="Split the CPU into N logical devices first (env TRTCONV_CPU_DEVICES); lets "
        "--strategy mirrored run without GPUs.",
    ),
    workers: str = typer.Option(
        None, help="Multi-worker: every worker's host:port, comma-separated (writes TF_CONFIG)."
    ),
    worker_index: int = typer.Option(
        None, min=0, help="Multi-worker: which of --workers this process is (0 is the chief)."
    ),
    cluster_timeout: float = typer.Option(
        None,
        help="Multi-worker: seconds to wait for the other workers, at the start and in any "
        "step, before failing (default 300).",
    ),
    benchmark: bool = typer.Option(
        False, "--benchmark", help="Measure training images/s on synthetic data; no export."
    ),
    warmup_steps: int = typer.Option(None, min=0, help="Benchmark: untimed steps first."),
    num_iter: int = typer.Option(None, min=1, help="Benchmark: timed steps."),
    image_size: int = typer.Option(
        None,
        min=8,
        help="Image folders: train at this square size (default: the images' own); "
        "--benchmark: the synthetic input's size (default: the model's).",
    ),
    image_scale: ImageScaleOpt = None,
    image_offset: ImageOffsetOpt = None,
    image_mean: ImageMeanOpt = None,
    image_std: ImageStdOpt = None,
    grid: bool = typer.Option(
        False, "--grid", help="Benchmark FP32 / AMP / AMP+XLA x --batch-sizes, one process each."
    ),
    batch_sizes: str = typer.Option(None, help="Grid batch sizes, e.g. 32,64."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Train (AMP) and export a float32 SavedModel with a serving_default signature."""

    def work() -> dict[str, Any]:
        from trtconv import api

        if benchmark or grid:
            return _benchmark()
        if batch_sizes:
            raise UsageError("--batch-sizes applies to --grid; use --batch-size to train.")
        return api.train(
            model=model or "digits-cnn",
            data=data,
            epochs=epochs,
            batch_size=batch_size,
            amp=amp,
            amp_dtype=amp_dtype,
            xla=xla,
            seed=seed,
            output=output,
            force=force,
            strategy=strategy,
            cpu_devices=cpu_devices,
            workers=workers,
            worker_index=worker_index,
            cluster_timeout_s=cluster_timeout,
            image_size=image_size,
            preprocessing=preprocessing_options(image_scale, image_offset, image_mean, image_std),
        )

    def _benchmark() -> dict[str, Any]:
        from trtconv import api
        from trtconv.train.benchmark import parse_batch_sizes

        if output is not None or data is not None:
            raise UsageError(
                "--benchmark trains on synthetic data and writes nothing: drop --output and --data."
            )
        name = model or "resnet50"
        sizes = parse_batch_sizes(batch_sizes, batch_size) if batch_sizes or batch_size else None
        return api.train_benchmark(
            model=name,
            batch_size=batch_size,
            warmup_steps=warmup_steps,
            num_iter=num_iter,
            amp=amp,
            amp_dtype=amp_dtype,
            xla=xla,
            image_size=image_size,
            seed=seed,
            grid=grid,
            batch_sizes=sizes,
            strategy=strategy,
            cpu_devices=cpu_devices,
            workers=workers,
            worker_index=worker_index,
            cluster_timeout_s=cluster_timeout,
        )

    run_command(work, json_mode=json_output, render=render_train)
