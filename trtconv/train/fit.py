"""Fit a zoo model on an ArraySet under the chosen precision policy."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from trtconv.calib.sources import ArraySet
from trtconv.core.lazy import require
from trtconv.train.amp import AmpChoice, policy_scope
from trtconv.zoo import ModelConfig

log = logging.getLogger(__name__)


@dataclass
class FitResult:
    model: Any
    compute_dtype: str  # the compute dtype a hidden layer really used during training
    images_per_s: float  # training throughput over the epochs after the first (warm-up)
    epoch_seconds: list[float]
    final_loss: float


def _epoch_timer() -> tuple[Any, list[float]]:
    keras = require("keras")
    seconds: list[float] = []

    class EpochTimer(keras.callbacks.Callback):  # type: ignore[name-defined]
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            self._start = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            seconds.append(time.perf_counter() - self._start)
            loss = (logs or {}).get("loss", float("nan"))
            log.info("epoch %d: loss %.4f, %.2f s", epoch + 1, loss, seconds[-1])

    return EpochTimer(), seconds


def classification_loss(reduction: str | None = "sum_over_batch_size") -> Any:
    """The training loss of every zoo model: sparse cross-entropy on logits.

    `reduction=None` gives one value per example (what a distributed loop averages itself).
    """
    keras = require("keras")
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)


def training_compute_dtype(model: Any) -> str:
    """The dtype the first layer with weights computes in (bfloat16 under mixed_bfloat16)."""
    hidden = next(layer for layer in model.layers if layer.weights)
    return str(hidden.compute_dtype)


def build_compiled(
    config: ModelConfig,
    input_shape: tuple[int, ...],
    num_classes: int,
    amp: AmpChoice,
    xla: bool,
) -> Any:
    """Build and compile `config`'s model under `amp.policy` (loss scaling for float16).

    Returns the compiled Keras model; its layers compute in the policy's dtype while the global
    policy is restored afterwards.
    """
    keras = require("keras")
    with policy_scope(amp.policy):
        model = config.build(input_shape, num_classes)
    optimizer = keras.optimizers.Adam(learning_rate=config.learning_rate)
    if amp.loss_scaling:
        # Dynamic loss scaling keeps small float16 gradients from flushing to zero.
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        loss=classification_loss(),
        metrics=["accuracy"],
        jit_compile=xla,
    )
    return model


def fit(model: Any, data: ArraySet, epochs: int, batch_size: int, seed: int) -> FitResult:
    """Train `model` on `data`; measure images/s after the first (warm-up) epoch."""
    tf = require("tensorflow")
    tf.random.set_seed(seed)
    timer, seconds = _epoch_timer()
    history = model.fit(
        data.x,
        data.labels,
        epochs=epochs,
        batch_size=batch_size,
        shuffle=True,
        verbose=0,
        callbacks=[timer],
    )
    steady = seconds[1:] or seconds
    images_per_s = len(data) / float(np.mean(steady))
    return FitResult(
        model=model,
        compute_dtype=training_compute_dtype(model),
        images_per_s=images_per_s,
        epoch_seconds=seconds,
        final_loss=float(history.history["loss"][-1]),
    )


def evaluate_accuracy(model: Any, data: ArraySet, batch_size: int = 256) -> float:
    """Top-1 accuracy of a Keras model emitting logits."""
    logits = model.predict(data.x, batch_size=batch_size, verbose=0)
    return float(np.mean(np.argmax(logits, axis=-1) == data.labels))
