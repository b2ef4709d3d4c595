"""`trtconv train`: train a zoo model with AMP and export a float32 SavedModel."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from trtconv.cli._output import run_command


def render_card(card: dict[str, Any], console: Console) -> None:
    amp = card["amp"]
    console.print(f"[bold]{card['model']}[/bold] trained with {amp['policy']} ({amp['reason']})")
    console.print(
        f"  test accuracy {card['test_accuracy']:.4f}   "
        f"training {card['train_images_per_s']:.0f} images/s   {card['train_seconds']:.1f} s"
    )
    console.print(f"  SavedModel: {card['saved_model']}")


def train_cli(
    model: str = typer.Option("digits-cnn", help="Zoo model name."),
    data: str = typer.Option(None, help="digits, PATH.npz (x, y) or an image folder."),
    epochs: int = typer.Option(None, min=1, help="Epochs (default: the model's)."),
    batch_size: int = typer.Option(None, min=1, help="Global batch size."),
    amp: bool = typer.Option(True, "--amp/--no-amp", help="Automatic mixed precision."),
    amp_dtype: str = typer.Option("auto", help="auto, float16 or bfloat16."),
    xla: bool = typer.Option(False, "--xla/--no-xla", help="Compile the training step with XLA."),
    seed: int = typer.Option(0, help="Random seed."),
    output: Path = typer.Option(None, help="Output directory (default models/MODEL)."),
    force: bool = typer.Option(False, help="Replace an existing output."),
    strategy: str = typer.Option("default", help="default or mirrored (all local GPUs)."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Train (AMP) and export a float32 SavedModel with a serving_default signature."""

    def work() -> dict[str, Any]:
        from trtconv import api

        return api.train(
            model=model,
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
        )

    run_command(work, json_mode=json_output, render=render_card)
