"""tf.distribute strategies for data-parallel training."""

from __future__ import annotations

from typing import Any

from trtconv.errors import UsageError
from trtconv.lazy import require

STRATEGIES = ("default", "mirrored")


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
    """Split the CPU into `count` logical devices; must run before TensorFlow initialises."""
    tf = require("tensorflow")
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
    )
