"""`trtconv convert`: SavedModel -> validated artifact (TF-TRT, ONNX Runtime or TensorRT)."""

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


def render_conversion(result: dict[str, Any], console: Console) -> None:
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
    precision: str = typer.Option(..., help="fp32, tf32, fp16, bf16 or int8."),
    backend: str = typer.Option("auto", help="auto, tftrt, ort or trt."),
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
    force: bool = typer.Option(False, help="Replace an existing output."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Convert a SavedModel at a precision, validate it against the native model, save it."""

    def work() -> dict[str, Any]:
        from trtconv import api

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
        )

    run_command(work, json_mode=json_output, render=render_conversion)
