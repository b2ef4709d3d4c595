"""The plain functions behind every command: what the CLI and tests call. Each returns a dict.

This module is a thin facade: the work lives in each concern's own package, imported on call so
that importing trtconv stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    cpu_devices: int | None = None,
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
        cpu_devices=cpu_devices,
    )


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
) -> dict[str, Any]:
    """Training images/s on synthetic data; with `grid`, FP32/AMP/AMP+XLA x `batch_sizes`."""
    from trtconv.train import benchmark

    warmup = benchmark.DEFAULT_WARMUP_STEPS if warmup_steps is None else warmup_steps
    iterations = benchmark.DEFAULT_NUM_ITER if num_iter is None else num_iter
    if grid:
        return benchmark.run_grid(
            model,
            batch_sizes or ([batch_size] if batch_size else None),
            warmup,
            iterations,
            amp_dtype,
            image_size,
            seed,
        )
    return benchmark.run_benchmark(
        model, batch_size, warmup, iterations, amp, amp_dtype, xla, image_size, seed
    )


def inspect(path: Path) -> dict[str, Any]:
    """Describe a SavedModel, a trtconv artifact directory or an ONNX file (see inspect_model)."""
    from trtconv.inspect_model import inspect_path

    return inspect_path(Path(path))


def convert(
    saved_model: Path,
    precision: str,
    backend: str = "auto",
    output: Path | None = None,
    calib_data: str | None = None,
    calib_samples: int = 500,
    calib_method: str = "entropy",
    batch_sizes: tuple[int, ...] = (1, 8, 32),
    validate_samples: int = 1000,
    tolerance: float | None = None,
    force: bool = False,
    image_scale: float | None = None,
    image_offset: float | None = None,
) -> dict[str, Any]:
    """Convert a SavedModel into a validated artifact (see trtconv.conversion.convert)."""
    from trtconv.conversion import convert as run

    return run(
        saved_model=Path(saved_model),
        precision=precision,
        backend=backend,
        output=output,
        calib_data=calib_data,
        calib_samples=calib_samples,
        calib_method=calib_method,
        batch_sizes=tuple(batch_sizes),
        validate_samples=validate_samples,
        tolerance=tolerance,
        force=force,
        image_scale=image_scale,
        image_offset=image_offset,
    )


def validate(
    artifact: Path,
    reference: Path | None = None,
    data: str | None = None,
    samples: int | None = None,
    tolerance: float | None = None,
) -> dict[str, Any]:
    """Validate an artifact against its native SavedModel (see trtconv.validation.validate)."""
    from trtconv.validation import validate as run

    return run(Path(artifact), reference=reference, data=data, samples=samples, tolerance=tolerance)


def doctor(deep: bool = True) -> dict[str, Any]:
    """What this machine has and which conversions it can run (see trtconv.doctor.doctor)."""
    from trtconv.doctor import doctor as run

    return run(deep=deep)


def release(
    config: Path,
    output: Path | None = None,
    resume: bool = False,
    force: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Run a release from a TOML config (see trtconv.release.pipeline.release).

    Returns the release document, also written to OUTPUT/release.json; its `exit_code` is 0 with
    a recommended artifact and 4 when no target passed every gate. `progress(done, planned, what)`
    is called as steps start.
    """
    from trtconv.release.pipeline import release as run

    return run(Path(config), output=output, resume=resume, force=force, progress=progress)


def bench(
    models: Sequence[Path | str],
    batch_sizes: str | Sequence[int] = (1, 8, 32),
    warmup: int | None = None,
    warmup_s: float | None = None,
    iterations: int | None = None,
    duration_s: float | None = None,
    threads: int | None = None,
    data: str | None = None,
    eval_data: str | None = None,
    xla: bool = False,
    report: Path | None = None,
    force: bool = False,
    progress: Callable[[int, int, str], None] | None = None,
) -> dict[str, Any]:
    """Benchmark SavedModels and artifacts side by side (see trtconv.bench.harness.bench).

    Returns the result document of trtconv.report.schema; with `report`, also writes
    results.json, results.csv, report.md and PNG plots there.
    """
    from trtconv.bench.harness import bench as run

    return run(
        models,
        batch_sizes=batch_sizes,
        warmup=warmup,
        warmup_s=warmup_s,
        iterations=iterations,
        duration_s=duration_s,
        threads=threads,
        data=data,
        eval_data=eval_data,
        xla=xla,
        report=report,
        force=force,
        progress=progress,
    )
