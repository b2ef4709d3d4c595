"""Choosing the Keras mixed-precision policy for this machine."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from trtconv.core.errors import UsageError
from trtconv.core.lazy import require
from trtconv.core.results import optional_key
from trtconv.facts import Facts, probe_cpu, probe_gpus
from trtconv.options.train import AMP_DTYPES

log = logging.getLogger(__name__)

MIN_FP16_TENSOR_CORE_CC = (7, 0)  # Volta: the first tensor cores


@dataclass(frozen=True)
class AmpChoice:
    """The policy picked and why; `loss_scaling` is True only for float16."""

    policy: str  # "float32", "mixed_float16" or "mixed_bfloat16"
    reason: str

    @property
    def loss_scaling(self) -> bool:
        return self.policy == "mixed_float16"


@dataclass(frozen=True, kw_only=True)
class AmpBlock:
    """The `amp` block of a model card or benchmark: the policy, why, whether the loss is scaled
    (the card only) and the dtype a hidden layer of the trained model really computed in."""

    policy: str
    reason: str
    loss_scaling: bool | None = optional_key()
    training_compute_dtype: str | None

    @classmethod
    def of(cls, choice: AmpChoice, compute_dtype: str | None, card: bool = True) -> AmpBlock:
        """The block for `choice` (`card`: with loss scaling, as the model card records it)."""
        scaling = choice.loss_scaling if card else None
        return cls(
            policy=choice.policy,
            reason=choice.reason,
            loss_scaling=scaling,
            training_compute_dtype=compute_dtype,
        )


def choose_policy(amp: bool, amp_dtype: str, machine: Facts | None = None) -> AmpChoice:
    """Map --amp/--amp-dtype to a Keras policy for `machine` (this one by default).

    float16 on GPUs with tensor cores (all of them at compute capability >= 7.0), bfloat16 on CPUs
    that compute it natively, float32 otherwise. Raises UsageError for an unknown dtype.
    """
    if amp_dtype not in AMP_DTYPES:
        raise UsageError(f"--amp-dtype must be one of {', '.join(AMP_DTYPES)}, not '{amp_dtype}'.")
    if not amp:
        return AmpChoice("float32", "--no-amp")
    gpus = machine.gpus if machine is not None else probe_gpus()
    cpu_bf16 = (machine.cpu if machine is not None else probe_cpu()).has_bf16
    capabilities = [gpu.compute_capability for gpu in gpus]
    if amp_dtype == "float16":
        if not capabilities:
            log.warning("mixed_float16 on a CPU is emulated and trains ~100x slower than float32.")
        return AmpChoice("mixed_float16", "--amp-dtype float16")
    if amp_dtype == "bfloat16":
        if not capabilities and not cpu_bf16:
            log.warning("This CPU has no native bfloat16 (AVX512-BF16/AMX): it will be emulated.")
        return AmpChoice("mixed_bfloat16", "--amp-dtype bfloat16")
    if capabilities and min(capabilities) >= MIN_FP16_TENSOR_CORE_CC:
        cc = ".".join(map(str, min(capabilities)))
        return AmpChoice("mixed_float16", f"GPU with compute capability {cc} (tensor cores)")
    if not capabilities and cpu_bf16:
        return AmpChoice("mixed_bfloat16", "CPU with native bfloat16 (AVX512-BF16/AMX)")
    log.warning("No device with fast float16/bfloat16 math found; training in float32.")
    return AmpChoice("float32", "no GPU with tensor cores and no CPU bfloat16")


def set_policy(policy: str) -> Any:
    """Set Keras' global dtype policy; return the previous one so callers can restore it."""
    keras = require("keras")
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(policy)
    return previous


@contextmanager
def policy_scope(policy: str) -> Iterator[None]:
    """Build Keras layers under `policy`, then restore the previous global policy.

    Layers keep the policy they were built with, so the global one need not outlive model
    construction; restoring it keeps later models in the same process (tests, export) float32.
    """
    previous = set_policy(policy)
    try:
        yield
    finally:
        set_policy(previous.name)
