"""The training pipeline: data, AMP policy, fit, float32 export, model card."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trtconv import __version__
from trtconv.calib.sources import (
    ArraySet,
    ImagePreprocessing,
    check_arrays,
    load_digits,
    load_file,
    split_holdout,
)
from trtconv.environment import environment_block
from trtconv.errors import InputError, UsageError
from trtconv.fsutil import atomic_directory, check_output_free
from trtconv.savedmodel import MODEL_CARD
from trtconv.train.amp import AmpChoice
from trtconv.train.distribute import DistributionPlan

log = logging.getLogger(__name__)

TRAIN_SCHEMA_VERSION = 1
IMAGE_FOLDER_SCALE = 1.0 / 255.0  # decoded 8-bit pixels -> [0, 1], whatever the model's card says


def _preprocessing(spec: str, config: Any) -> dict[str, Any]:
    """The scaling applied: the model's own for digits, 1/255 for images, none for arrays."""
    if spec == "digits":
        return dict(config.preprocessing)
    if Path(spec).is_dir():
        return {**config.preprocessing, "scale": IMAGE_FOLDER_SCALE, "offset": 0.0}
    # .npz arrays are fed as given: the card must not claim a scaling that never happened.
    return {**config.preprocessing, "scale": 1.0, "offset": 0.0}


def _check_labels(data: ArraySet) -> np.ndarray:
    """Labels as a 1-D integer vector with at least two classes; InputError otherwise."""
    labels = data.labels
    if labels is None:
        raise InputError(f"{data.source} has no labels: training needs an array 'y'.")
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise InputError(
            f"{data.source}: labels 'y' must be class indices of shape (N,), found shape "
            f"{labels.shape}."
        )
    if np.issubdtype(labels.dtype, np.integer) and len(np.unique(labels)) < 2:
        raise InputError(f"{data.source}: labels hold a single class; training needs two or more.")
    return labels


def _load_training_data(spec: str, config: Any) -> tuple[ArraySet, ArraySet]:
    if spec == "digits":
        return load_digits("train"), load_digits("test")
    prep = _preprocessing(spec, config)
    images = ImagePreprocessing(
        config.input_shape[:2], config.input_shape[-1], prep["scale"], prep["offset"]
    )
    data = load_file(spec, lambda: images)
    labels = _check_labels(data)
    if len(data.inputs) != 1:
        raise InputError(f"{data.source}: zoo models take one input, found {len(data.inputs)}.")
    if data.x.ndim != 4:
        raise InputError(
            f"{data.source}: input 'x' must be NHWC images (4 dimensions), found shape "
            f"{data.x.shape}."
        )
    if not np.issubdtype(data.x.dtype, np.number) or np.issubdtype(
        data.x.dtype, np.complexfloating
    ):
        raise InputError(f"{data.source}: input 'x' must be real numbers, found {data.x.dtype}.")
    data = ArraySet({"x": data.x.astype(np.float32)}, labels, data.source, data.class_names)
    return split_holdout(data)


def spec_needs_data(spec: str) -> bool:
    """True for the zoo's placeholder data name: models like resnet50 ship no training set."""
    return spec == "synthetic"


@dataclass
class TrainingData:
    """The training and held-out sets, and what the model card says about them."""

    spec: str
    train_set: ArraySet
    test_set: ArraySet
    input_shape: tuple[int, ...]
    num_classes: int


def _training_data(model: str, config: Any, data: str | None) -> TrainingData:
    """Load and check the data (InputError/UsageError); nothing is trained or written yet."""
    if spec_needs_data(data or config.default_data):
        raise UsageError(
            f"{model} has no built-in training data; pass --data PATH.npz or an image folder, "
            "or measure throughput on synthetic data with --benchmark."
        )
    spec = data or config.default_data
    train_set, test_set = _load_training_data(spec, config)
    input_shape = tuple(int(d) for d in train_set.x.shape[1:])
    labels = train_set.labels
    assert labels is not None  # _load_training_data rejects unlabelled data
    num_classes = config.num_classes if spec == "digits" else int(labels.max()) + 1
    if spec == "digits" and input_shape != config.input_shape:
        raise InputError(f"{model} expects {config.input_shape}, digits are {input_shape}.")
    check_arrays(train_set, num_classes)
    check_arrays(test_set, num_classes)
    return TrainingData(spec, train_set, test_set, input_shape, num_classes)


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
    workers: str | None = None,
    worker_index: int | None = None,
    cluster_timeout_s: float | None = None,
) -> dict[str, Any]:
    """Train a zoo model with AMP and export a float32 SavedModel plus its model card.

    `batch_size` is global: under `strategy="mirrored"` or `"multi-worker"` each of the N
    replicas (over every worker) gets batch_size / N. `cpu_devices` (or $TRTCONV_CPU_DEVICES)
    splits the CPU into logical devices before TensorFlow initialises, so the mirrored strategy
    can run on a CPU-only host. `multi-worker` takes its cluster from `workers` and
    `worker_index`, else $TF_CONFIG; every worker runs the same call and only the chief writes
    `output` (the others return their card with `saved_model` None).

    Returns the model card (with `saved_model` path). Raises UsageError (bad options, existing
    output) and InputError (bad data) before any training starts, and ClusterError when the
    other workers cannot be reached within `cluster_timeout_s`.
    """
    from trtconv.train.amp import choose_policy
    from trtconv.train.distribute import check_global_batch, plan_distribution, start_strategy
    from trtconv.train.export import export_saved_model, float32_copy
    from trtconv.train.fit import build_compiled, evaluate_accuracy
    from trtconv.zoo import get_model

    config = get_model(model)
    plan = plan_distribution(strategy, cpu_devices, workers, worker_index, cluster_timeout_s)
    output = Path(output or Path("models") / model)
    if plan.writes_outputs:  # the others never touch the output, wherever it may be for them
        check_output_free(output, force)
    prepared = _training_data(model, config, data)
    amp_choice = choose_policy(amp, amp_dtype)
    distribution = start_strategy(plan)
    global_batch = batch_size or config.default_batch_size
    check_global_batch(global_batch, int(distribution.num_replicas_in_sync))
    log.info(
        "training %s on %s with policy %s (%s), %d replicas",
        model,
        prepared.train_set.source,
        amp_choice.policy,
        amp_choice.reason,
        distribution.num_replicas_in_sync,
    )
    with distribution.scope():
        keras_model = build_compiled(
            config, prepared.input_shape, prepared.num_classes, amp_choice, xla
        )
    session = _Session(config, prepared, plan, distribution, amp_choice, xla, seed, global_batch)
    started = time.perf_counter()
    result, weights = session.fit(keras_model, epochs or config.default_epochs)
    train_seconds = time.perf_counter() - started
    export_model = float32_copy(weights, config, prepared.input_shape, prepared.num_classes)
    # The accuracy of what is exported: the float32 rebuild, not the mixed-precision graph.
    accuracy = evaluate_accuracy(export_model, prepared.test_set)
    log.info("test accuracy %.4f, %.0f images/s", accuracy, result.images_per_s)
    card = session.model_card(result, accuracy, train_seconds)
    if not plan.writes_outputs:
        return card  # a worker other than the chief writes nothing
    card["saved_model"] = str(output / "saved_model")
    with atomic_directory(output, force=force) as staging:
        export_saved_model(
            export_model, staging / "saved_model", config.input_name, prepared.input_shape
        )
        (staging / MODEL_CARD).write_text(json.dumps(card, indent=2) + "\n")
    return card


@dataclass
class _Session:
    """A training run once its strategy exists: the fit, and the model card."""

    config: Any  # ModelConfig
    prepared: TrainingData
    plan: DistributionPlan
    distribution: Any
    amp_choice: AmpChoice
    xla: bool
    seed: int
    global_batch: int

    def fit(self, keras_model: Any, epochs: int) -> tuple[Any, list[Any]]:
        """Train; returns the FitResult and the weights to export.

        One host fits with Keras; a cluster runs trtconv's distributed loop (Keras' fit cannot
        run under MultiWorkerMirroredStrategy) and averages the batch-norm statistics.
        """
        from trtconv.train.distribute import cluster_failures
        from trtconv.train.fit import fit
        from trtconv.train.loop import fit_distributed, replica_mean_weights

        train_set = self.prepared.train_set
        if self.plan.cluster is None:
            result = fit(keras_model, train_set, epochs, self.global_batch, self.seed)
            return result, list(result.model.get_weights())
        strategy, batch = self.distribution, self.global_batch
        with cluster_failures(self.plan):
            result = fit_distributed(
                strategy, keras_model, train_set, epochs, batch, self.seed, self.xla
            )
            return result, replica_mean_weights(strategy, result.model)

    def model_card(self, result: Any, accuracy: float, train_seconds: float) -> dict[str, Any]:
        """The model card (`saved_model` None until the chief writes it)."""
        from trtconv.train.distribute import describe_strategy
        from trtconv.train.export import OUTPUT_NAME

        config, prepared = self.config, self.prepared
        shape, classes, train_set = prepared.input_shape, prepared.num_classes, prepared.train_set
        replicas = int(self.distribution.num_replicas_in_sync)
        return {
            "schema_version": TRAIN_SCHEMA_VERSION,
            "model": config.name,
            "saved_model": None,
            "signature": "serving_default",
            "input": {"name": config.input_name, "shape": [None, *shape], "dtype": "float32"},
            "output": {"name": OUTPUT_NAME, "shape": [None, classes], "dtype": "float32"},
            "preprocessing": {
                **_preprocessing(prepared.spec, config),
                "image_size": list(shape[:2]),
            },
            "labels": train_set.class_names or [str(i) for i in range(classes)],
            "data": {
                "source": prepared.spec,
                "train_samples": len(train_set),
                "test_samples": len(prepared.test_set),
                "sha256": train_set.sha256(),
            },
            "amp": {
                "policy": self.amp_choice.policy,
                "reason": self.amp_choice.reason,
                "loss_scaling": self.amp_choice.loss_scaling,
                "training_compute_dtype": result.compute_dtype,
            },
            "xla": self.xla,
            "strategy": describe_strategy(self.plan, self.distribution),
            "epochs": len(result.epoch_seconds),
            "batch_size": self.global_batch,
            "batch_size_per_replica": self.global_batch // replicas,
            "seed": self.seed,
            "final_loss": result.final_loss,
            "test_accuracy": accuracy,
            "train_images_per_s": result.images_per_s,
            "train_seconds": train_seconds,
            "exported_dtype": "float32",
            "trtconv_version": __version__,
            "environment": environment_block(),
        }
