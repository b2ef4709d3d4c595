"""`trtconv validate`: a converted artifact against its native SavedModel on held-out data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from trtconv.cli._options import (
    ALLOW_UNJUDGED,
    IMAGE_MEAN,
    IMAGE_OFFSET,
    IMAGE_SCALE,
    IMAGE_STD,
    OUTPUT_ROLE,
    SPLIT,
    TOLERANCE,
    judging_options,
    preprocessing_options,
)
from trtconv.cli._output import DEVICE_HELP, run_command
from trtconv.cli.convert import render_validation


def render(result: dict[str, Any], console: Console) -> None:
    console.print(
        f"[bold]{result['artifact']}[/bold] ({result['backend']} {result['precision']} on "
        f"{result.get('device', 'cpu')}) vs {result['reference']}",
        highlight=False,
    )
    render_contract(result["data_contract"], console)
    render_validation(result, console)
    status = result.get("manifest_status")
    if status not in (None, "unvalidated", result["verdict"]):
        console.print(
            f"  [yellow]its manifest says the conversion's validation {status.upper()}[/yellow]"
        )


def render_contract(contract: dict[str, Any], console: Console) -> None:
    """Data, split and pixel preprocessing, each with where it came from."""
    console.print(
        f"  data {escape(contract['data'])} ({contract.get('data_from', '-')}), "
        f"{contract['split']} split ({contract.get('split_from', '-')}); raw pixels -> "
        f"{escape(contract['preprocessing']['summary'])}",
        highlight=False,
    )


def validate_cli(
    artifact: Path = typer.Argument(..., help="Artifact directory (holds manifest.json)."),
    reference: Path = typer.Option(
        None, help="SavedModel to compare with (default: the manifest's source model)."
    ),
    data: str = typer.Option(
        None,
        help="digits, PATH.npz, IMAGE_DIR or random (default: the data the artifact was "
        "validated on, from its manifest).",
    ),
    split: str = SPLIT,
    samples: int = typer.Option(None, min=1, help="Samples to validate on (default 1000)."),
    tolerance: list[str] = TOLERANCE,
    output_role: list[str] = OUTPUT_ROLE,
    allow_unjudged: bool = ALLOW_UNJUDGED,
    image_scale: float = IMAGE_SCALE,
    image_offset: float = IMAGE_OFFSET,
    image_mean: str = IMAGE_MEAN,
    image_std: str = IMAGE_STD,
    device: str = typer.Option("auto", help=DEVICE_HELP),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Compare a converted artifact with its native model; exit 4 when it fails or an output
    is not judged."""

    def work() -> dict[str, Any]:
        from trtconv import api

        atol, judging = judging_options(output_role, tolerance, allow_unjudged)
        return api.validate(
            artifact=artifact,
            reference=reference,
            data=data,
            samples=samples,
            tolerance=atol,
            device=device,
            judging=judging,
            preprocessing=preprocessing_options(image_scale, image_offset, image_mean, image_std),
            split=split,
        )

    run_command(work, json_mode=json_output, render=render)
