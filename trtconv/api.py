"""The plain functions behind every command: what the CLI and tests call. Each returns a dict.

This module is a thin facade: the work lives in each concern's own package, imported on call so
that importing trtconv stays cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def train(
    model: str = "digits-cnn",
    data: str | None = None,
    epochs: int | None = None,
    batch_size: int | None = None,
    amp: bool = True,
    amp_dtype: str = "auto",
    xla: bool = False,
    seed: int = 0,
    output: Path | None = None,
    force: bool = False,
    strategy: str | None = None,
) -> dict[str, Any]:
    """Train a zoo model with AMP; export a float32 SavedModel and its model card (returned)."""
    from trtconv.train.pipeline import train as run

    return run(
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
