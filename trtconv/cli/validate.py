"""`trtconv validate`: a converted artifact against its native SavedModel on held-out data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from trtconv.cli._output import DEVICE_HELP, run_command
from trtconv.cli.convert import render_validation


def render(result: dict[str, Any], console: Console) -> None:
    console.print(
        f"[bold]{result['artifact']}[/bold] ({result['backend']} {result['precision']} on "
        f"{result.get('device', 'cpu')}) vs {result['reference']}",
        highlight=False,
    )
    render_validation(result, console)


def validate_cli(
    artifact: Path = typer.Argument(..., help="Artifact directory (holds manifest.json)."),
    reference: Path = typer.Option(
        None, help="SavedModel to compare with (default: the manifest's source model)."
    ),
    data: str = typer.Option(
        None, help="digits, PATH.npz, IMAGE_DIR or random (default: the calibration source)."
    ),
    samples: int = typer.Option(None, min=1, help="Held-out samples (default 1000)."),
    tolerance: float = typer.Option(
        None, help="Max abs error per output, replacing the precision's default."
    ),
    device: str = typer.Option("auto", help=DEVICE_HELP),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Compare a converted artifact with its native model; exit 4 when outside tolerance."""

    def work() -> dict[str, Any]:
        from trtconv import api

        return api.validate(
            artifact=artifact,
            reference=reference,
            data=data,
            samples=samples,
            tolerance=tolerance,
            device=device,
        )

    run_command(work, json_mode=json_output, render=render)
