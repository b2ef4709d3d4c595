"""`trtconv convert`: SavedModel -> validated artifact (any registered backend, or the fastest
validated one with --backend best)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from trtconv.cli._output import run_command
from trtconv.errors import UsageError


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """'1,8,32' -> (1, 8, 32); UsageError for anything else."""
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"--batch-sizes takes integers like 1,8,32, found '{text}'.") from None
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--batch-sizes takes positive integers like 1,8,32, found '{text}'.")
    return sizes


def render_validation(validation: dict[str, Any], console: Console) -> None:
    """One ✓/✗ line per check, then the verdict (shared with `trtconv validate`)."""
    console.print(
        f"  validation on {validation['samples']} held-out samples of "
        f"{escape(validation['data_source'])}:"
    )
    for check in validation["checks"]:
        mark = "[green]✓[/green]" if check["passed"] else "[red]✗[/red]"
        console.print(f"    {mark} {check['name']}: {escape(check['detail'])}", highlight=False)
    verdict = "[green]passed[/green]" if validation["passed"] else "[red]FAILED[/red]"
    console.print(f"  {verdict}")


def render_tournament(table: dict[str, Any], console: Console) -> None:
    """`--backend best`'s table: every candidate, its verdict and figures, and why it lost."""
    from rich.table import Table

    from trtconv.tournament import NOT_AVAILABLE, absent_groups, budget_text

    grid = Table(
        title=f"--backend best: timed at batch {table['batch_size']}, {budget_text(table)} each; "
        "the fastest that passed validation wins",
        title_justify="left",
    )
    for column in ("candidate", "verdict", "samples/s", "p50 ms", "vs native", "top-1 agr."):
        grid.add_column(column, justify="left" if column in ("candidate", "verdict") else "right")
    grid.add_column("why", overflow="fold")
    for row in table["candidates"]:
        if row["verdict"] == NOT_AVAILABLE:
            continue
        winner = row["verdict"] == "winner"
        grid.add_row(
            f"[bold]{row['name']}[/bold]" if winner else row["name"],
            f"[green]{row['verdict']}[/green]" if winner else row["verdict"],
            _figure(row["throughput_per_s"], "{:,.1f}"),
            _figure(row["latency_ms_p50"], "{:.3f}"),
            _figure(row["speedup_vs_native"], "{:.2f}x"),
            _figure(row["top1_agreement"], "{:.4f}"),
            escape(row["reason"]),
        )
    console.print(grid)
    for names, reason, fix in absent_groups(table["candidates"]):
        console.print(
            f"  not available: [bold]{escape(names)}[/bold]: {escape(reason)}"
            + (f"; fix: {escape(fix)}" if fix else ""),
            highlight=False,
        )


def _figure(value: Any, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def render_conversion(result: dict[str, Any], console: Console) -> None:
    if result.get("tournament"):
        render_tournament(result["tournament"], console)
    if result["artifact"] is None:
        console.print("[red]no artifact written[/red]: no candidate passed validation")
        return
    console.print(
        f"[bold]{result['backend']} {result['precision']}[/bold] "
        f"({escape(result['backend_reason'])})"
    )
    console.print(
        f"  converted in {result['conversion_seconds']:.1f} s, "
        f"{result['artifact_size_bytes'] / 1e6:.2f} MB: {result['artifact']}",
        highlight=False,
    )
    render_validation(result["validation"], console)


def convert_cli(
    saved_model: Path = typer.Argument(..., help="SavedModel directory to convert."),
    precision: str = typer.Option(
        None,
        help="fp32, tf32, fp16, bf16 or int8 (required, except with --backend best: then only "
        "this precision; default every precision).",
    ),
    backend: str = typer.Option(
        "auto",
        help="auto, best (every backend and precision that runs here: the fastest that passes "
        "validation wins), or a backend `trtconv doctor` lists.",
    ),
    output: Path = typer.Option(
        None, help="Artifact directory (default models/NAME-BACKEND-PRECISION)."
    ),
    calib_data: str = typer.Option(
        None,
        help="digits, PATH.npz, IMAGE_DIR or random (default: the model card's data). "
        "Validation uses its held-out part.",
    ),
    calib_samples: int = typer.Option(500, help="Calibration samples (int8)."),
    calib_method: str = typer.Option("entropy", help="entropy, minmax or percentile."),
    int8_target: str = typer.Option(
        "auto",
        help="Where an int8 CPU artifact will run: auto (this CPU's kind), vnni (x86 CPUs with "
        "VNNI/AMX) or portable (any x86: 7-bit weights, which CPUs without VNNI need).",
    ),
    batch_sizes: str = typer.Option("1,8,32", help="Batch sizes to build for, e.g. 1,8,32."),
    validate_samples: int = typer.Option(1000, help="Held-out samples to validate on."),
    tolerance: float = typer.Option(
        None, help="Max abs error per output, replacing the precision's default."
    ),
    image_scale: float = typer.Option(
        None, help="Image folders: pixel scale (default: model card, else 1/255)."
    ),
    image_offset: float = typer.Option(
        None, help="Image folders: offset after scaling (default: model card, else 0)."
    ),
    rank_batch_size: int = typer.Option(
        8, help="--backend best: the batch size candidates are timed and ranked at."
    ),
    rank_duration: float = typer.Option(
        3.0, help="--backend best: timed seconds per candidate (after warm-up)."
    ),
    threads: int = typer.Option(
        None, help="--backend best: threads per candidate when timing (default: the library's)."
    ),
    force: bool = typer.Option(False, help="Replace an existing output."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Convert a SavedModel at a precision, validate it against the native model, save it."""

    def work() -> dict[str, Any]:
        from trtconv import api
        from trtconv.best import Contest

        if rank_batch_size < 1 or rank_duration <= 0 or (threads is not None and threads < 1):
            raise UsageError(
                "--rank-batch-size and --threads must be at least 1 and --rank-duration positive."
            )
        return api.convert(
            saved_model=saved_model,
            precision=precision,
            backend=backend,
            output=output,
            calib_data=calib_data,
            calib_samples=calib_samples,
            calib_method=calib_method,
            int8_target=int8_target,
            batch_sizes=parse_batch_sizes(batch_sizes),
            validate_samples=validate_samples,
            tolerance=tolerance,
            force=force,
            image_scale=image_scale,
            image_offset=image_offset,
            contest=Contest(rank_batch_size, rank_duration, threads),
        )

    run_command(work, json_mode=json_output, render=render_conversion)
