"""tf.distribute strategies for data-parallel training."""

from __future__ import annotations

import os
from typing import Any

from trtconv.errors import UsageError
from trtconv.lazy import require

STRATEGIES = ("default", "mirrored")
# Honoured like --cpu-devices: lets tests and CPU-only hosts exercise MirroredStrategy.
CPU_DEVICES_ENV = "TRTCONV_CPU_DEVICES"


def make_strategy(name: str | None) -> Any:
    """`None`/`default`: the default (single-device) strategy; `mirrored`: all local GPUs.

    Without GPUs, mirrored uses the logical CPU devices (see `split_cpu`), which is how it is
    tested here.
    """
    tf = require("tensorflow")
    if name in (None, "default"):
        return tf.distribute.get_strategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=devices)
    raise UsageError(f"Unknown --strategy '{name}'; expected one of {', '.join(STRATEGIES)}.")


def split_cpu(count: int) -> None:
    """Split the CPU into `count` logical devices; must run before TensorFlow initialises.

    Raises UsageError when TensorFlow's devices are already initialised in this process.
    """
    tf = require("tensorflow")
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    except RuntimeError as exc:
        raise UsageError(
            f"Cannot split the CPU into {count} logical devices: TensorFlow is already "
            f"initialised in this process ({exc})."
        ) from exc


def cpu_device_count(option: int | None) -> int | None:
    """The --cpu-devices option, else $TRTCONV_CPU_DEVICES, else None (no split).

    Raises UsageError for a non-integer or a count below 1.
    """
    raw: int | str | None = option if option is not None else os.environ.get(CPU_DEVICES_ENV)
    if raw in (None, ""):
        return None
    try:
        count = int(raw)
    except ValueError:
        raise UsageError(f"${CPU_DEVICES_ENV} must be an integer, found '{raw}'.") from None
    if count < 1:
        raise UsageError(f"--cpu-devices must be at least 1, found {count}.")
    return count


def check_global_batch(batch_size: int, replicas: int) -> None:
    """The batch size is global: each replica gets batch/replicas, so it must divide evenly."""
    if batch_size % replicas:
        raise UsageError(
            f"Global batch size {batch_size} does not divide over {replicas} replicas; use a "
            f"multiple of {replicas} (nothing is scaled silently)."
        )


def strategy_devices(strategy: Any) -> list[str]:
    """The devices the replicas run on; [] for the default strategy (TensorFlow's placement)."""
    try:
        return [str(device) for device in strategy.extended.worker_devices]
    except RuntimeError:  # the default strategy does not list devices
        return []
