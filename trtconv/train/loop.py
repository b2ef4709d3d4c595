"""A training step and loop that run under any tf.distribute strategy.

Keras 3's `fit` and `train_on_batch` fail under MultiWorkerMirroredStrategy (they reduce scalar
metrics along axis 0 across workers, a known Keras bug), so multi-worker training runs this
loop instead, built on public pieces only: `strategy.distribute_datasets_from_function`,
`strategy.run`, the Keras optimizer (which sums gradients over every replica and, for float16,
scales the loss) and `tf.nn.compute_average_loss` (the loss over the *global* batch).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from trtconv.calib.sources import ArraySet
from trtconv.core.lazy import require
from trtconv.train.fit import FitResult, classification_loss, training_compute_dtype

log = logging.getLogger(__name__)


def distributed_batches(
    strategy: Any, x: np.ndarray, y: np.ndarray, global_batch: int, seed: int, shuffle: bool = True
) -> Any:
    """An endless distributed iterator of (images, labels), `global_batch` over all replicas.

    Each worker reads its own shard of the arrays (a disjoint 1/N), so workers never see the
    same sample in an epoch; the stream repeats, so every worker runs the same number of steps.
    """
    tf = require("tensorflow")

    def dataset_fn(context: Any) -> Any:
        per_replica = context.get_per_replica_batch_size(global_batch)
        data = tf.data.Dataset.from_tensor_slices((x, y))
        data = data.shard(context.num_input_pipelines, context.input_pipeline_id)
        if shuffle:
            data = data.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
        return data.repeat().batch(per_replica, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    return iter(strategy.distribute_datasets_from_function(dataset_fn))


def make_train_step(strategy: Any, model: Any, global_batch: int, xla: bool) -> Callable[..., Any]:
    """A tf.function taking the distributed iterator: one synchronous step on every replica.

    Returns the step's loss summed over replicas (the mean over the global batch). With `xla`
    the forward and backward pass is compiled; the gradient all-reduce stays outside XLA.
    """
    tf = require("tensorflow")
    loss_fn = classification_loss(reduction=None)
    optimizer = model.optimizer
    with strategy.scope():
        optimizer.build(model.trainable_variables)  # its slots, mirrored like the weights

    @tf.function(jit_compile=xla)
    def gradients(images: Any, labels: Any) -> tuple[Any, Any]:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = loss_fn(labels, logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            scaled = optimizer.scale_loss(loss)  # loss scaling under mixed_float16
        return loss, tape.gradient(scaled, model.trainable_variables)

    def replica_step(images: Any, labels: Any) -> Any:
        loss, grads = gradients(images, labels)
        optimizer.apply(grads, model.trainable_variables)  # sums grads over every replica
        return loss

    @tf.function
    def step(iterator: Any) -> Any:
        images, labels = next(iterator)
        losses = strategy.run(replica_step, args=(images, labels))
        return strategy.reduce("SUM", losses, axis=None)

    return step


def replica_mean_weights(strategy: Any, model: Any) -> list[np.ndarray]:
    """The model's weights with the non-trainable float ones (batch-norm moving statistics)
    averaged over every replica of every worker.

    Trainable weights are identical everywhere; the moving statistics are updated from each
    replica's own batches, so without this each worker would export slightly different ones.
    Every worker must call it (it is a collective).
    """
    tf = require("tensorflow")
    statistics = [v for v in model.non_trainable_weights if "float" in str(v.dtype)]
    if not statistics:
        return list(model.get_weights())

    @tf.function
    def local_values() -> list[Any]:
        return [tf.identity(v.value) for v in statistics]

    per_replica = strategy.run(local_values)
    means = [strategy.reduce("MEAN", value, axis=None) for value in per_replica]
    by_path = {v.path: np.asarray(mean) for v, mean in zip(statistics, means, strict=True)}
    return [by_path.get(v.path, np.asarray(v.numpy())) for v in model.weights]


def fit_distributed(
    strategy: Any, model: Any, data: ArraySet, epochs: int, global_batch: int, seed: int, xla: bool
) -> FitResult:
    """Train `model` (built and compiled under `strategy.scope()`) for `epochs` passes over the
    data; images/s is over the whole cluster, after the first (warm-up) epoch."""
    tf = require("tensorflow")
    tf.random.set_seed(seed)
    assert data.labels is not None
    batches = distributed_batches(strategy, data.x, data.labels, global_batch, seed)
    step = make_train_step(strategy, model, global_batch, xla)
    steps = max(1, len(data) // global_batch)
    seconds: list[float] = []
    loss = float("nan")
    for epoch in range(epochs):
        started = time.perf_counter()
        total = tf.add_n([step(batches) for _ in range(steps)])
        loss = float(total) / steps  # reading it waits for the epoch's last step
        seconds.append(time.perf_counter() - started)
        log.info("epoch %d: loss %.4f, %.2f s", epoch + 1, loss, seconds[-1])
    steady = seconds[1:] or seconds
    return FitResult(
        model=model,
        compute_dtype=training_compute_dtype(model),
        images_per_s=steps * global_batch / float(np.mean(steady)),
        epoch_seconds=seconds,
        final_loss=loss,
    )
