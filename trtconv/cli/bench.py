"""`trtconv bench`: native and converted models side by side, one table, same inputs and harness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from trtconv.cli._options import (
    DeviceOpt,
    ImageMeanOpt,
    ImageOffsetOpt,
    ImageScaleOpt,
    ImageStdOpt,
    OutputRoleOpt,
    SplitOpt,
    judging_options,
    preprocessing_options,
)
from trtconv.cli._output import progress_bar, run_command, stderr_console
from trtconv.options import BenchOptions


def render_table(result: dict[str, Any], console: Console) -> None:
    """One rich table (models × batch sizes) on stdout; the baseline and overhead under it."""
    from trtconv.report.writers import table_headers, table_rows

    if not console.is_terminal:
        # Piped output defaults to 80 columns, which would fold every cell: give the table room.
        console = Console(file=console.file, width=max(console.width, 132))
    table = Table(
        title="trtconv bench",
        caption=(
            f"* baseline: {result['baseline']} ({result['baseline_model']}), "
            f"{result['baseline_reason']}"
        ),
    )
    for index, header in enumerate(table_headers(compact=True)):
        table.add_column(header, justify="left" if index < 2 else "right")
    previous = None
    for cells, row in zip(table_rows(result, compact=True), result["results"], strict=True):
        if previous is not None and row["label"] != previous:
            table.add_section()
        previous = row["label"]
        table.add_row(*cells)
    console.print(table)
    overhead = result.get("harness_overhead_ms")
    order = " → ".join(result["order"])
    console.print(f"Measured in this order, one process each: {order}")
    if overhead is not None:
        console.print(f"Harness overhead per call: {overhead * 1000:.1f} µs (do-nothing runner)")
    if "report" in result:
        console.print(f"Report: {Path(result['report']['markdown']).parent}")


def print_warnings(result: dict[str, Any]) -> None:
    """Warnings go to stderr, in human and JSON mode alike."""
    console = stderr_console()
    for warning in result.get("warnings", []):
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)


def bench_cli(
    models: list[Path] = typer.Argument(
        ..., help="SavedModel directories and/or trtconv artifact directories.", show_default=False
    ),
    batch_sizes: str = typer.Option("1,8,32", help="Comma-separated batch sizes."),
    warmup: int = typer.Option(None, help="Warm-up iterations per batch size (default 10)."),
    warmup_s: float = typer.Option(None, help="Warm-up seconds per batch size instead."),
    iterations: int = typer.Option(None, help="Timed iterations per batch size."),
    duration: float = typer.Option(
        None, help="Timed seconds per batch size instead (default 3, at least 10 iterations)."
    ),
    threads: int = typer.Option(None, help="Intra-op threads per model (default: the library's)."),
    data: str = typer.Option("random", help="digits, PATH.npz, an image folder, or random."),
    eval_data: str = typer.Option(
        None,
        help="Labelled data (digits, PATH.npz with y, image folder): accuracy and agreement, "
        "each output judged by its role, on the held-out split (see --split).",
    ),
    split: SplitOpt = None,
    output_role: OutputRoleOpt = None,
    image_scale: ImageScaleOpt = None,
    image_offset: ImageOffsetOpt = None,
    image_mean: ImageMeanOpt = None,
    image_std: ImageStdOpt = None,
    xla: bool = typer.Option(False, "--xla", help="Also run each SavedModel compiled with XLA."),
    device: DeviceOpt = BenchOptions.device,
    throughput: bool = typer.Option(
        False,
        "--throughput",
        help="Also run each artifact whose backend has a throughput mode in it (OpenVINO: "
        "THROUGHPUT hint, each batch split across parallel streams).",
    ),
    report: Path = typer.Option(None, help="Write results.json/csv, report.md and PNGs here."),
    force: bool = typer.Option(False, help="Replace an existing --report directory."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Benchmark SavedModels and converted artifacts side by side (latency, throughput, speedup)."""

    def work() -> dict[str, Any]:
        from trtconv import api

        _, judging = judging_options(output_role, None, False)
        preprocessing = preprocessing_options(image_scale, image_offset, image_mean, image_std)
        with progress_bar("benchmarking") as progress:
            result = api.bench(
                models,
                batch_sizes=batch_sizes,
                warmup=warmup,
                warmup_s=warmup_s,
                iterations=iterations,
                duration_s=duration,
                threads=threads,
                data=data,
                eval_data=eval_data,
                xla=xla,
                device=device,
                throughput=throughput,
                report=report,
                force=force,
                progress=progress,
                judging=judging,
                preprocessing=preprocessing,
                split=split,
            )
        print_warnings(result)
        return result

    run_command(work, json_mode=json_output, render=render_table)
