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
from trtconv.backends import registry
from trtconv.calib.contract import NHWC, Preprocessing, PreprocessingOptions, resolve_preprocessing
from trtconv.calib.readers import fit_to_signature
from trtconv.calib.sources import (
    DIGITS_SPLIT_SEED,
    DIGITS_TEST_FRACTION,
    HOLDOUT_FRACTION,
    HOLDOUT_SEED,
    ArraySet,
    ImagePreprocessing,
    check_arrays,
    load_digits,
    load_file,
    split_holdout,
)
from trtconv.core.errors import InputError, UsageError
from trtconv.core.fsutil import atomic_directory, check_output_free
from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.environment import environment_block
from trtconv.savedmodel import MODEL_CARD
from trtconv.train.amp import AmpChoice
from trtconv.train.distribute import DistributionPlan

log = logging.getLogger(__name__)

TRAIN_SCHEMA_VERSION = 1


def _preprocessing(spec: str, config: Any, pixels: Preprocessing | None) -> dict[str, Any]:
    """What the model card records: the model's own for digits, the preprocessing applied to raw
    pixels (image folders, uint8 arrays), else none (float arrays are fed as given: the card
    must not claim a scaling that never happened)."""
    if spec == "digits":
        return dict(config.preprocessing)
    if pixels is not None:
        return {**config.preprocessing, **pixels.to_dict()}
    return {**config.preprocessing, "scale": 1.0, "offset": 0.0}


def _split(spec: str) -> dict[str, Any]:
    """Which samples the model never trained on (validate and bench evaluate on the same)."""
    if spec == "digits":
        return {"held_out_fraction": DIGITS_TEST_FRACTION, "seed": DIGITS_SPLIT_SEED}
    return {"held_out_fraction": HOLDOUT_FRACTION, "seed": HOLDOUT_SEED}


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


def _load_training_data(
    spec: str, image_size: int | None, options: PreprocessingOptions | None
) -> tuple[ArraySet, ArraySet, Preprocessing | None]:
    """(train part, held-out part, the preprocessing of raw pixels, None for float arrays).

    Image folders load at `image_size` (square), else the images' own size and channels. Raw
    pixels (image folders, uint8 arrays) become inputs by `options`, else 1/255, by the rule
    convert applies (trtconv.calib.readers); other integer arrays are refused, as there.
    """
    is_folder = Path(spec).is_dir()
    if image_size is not None and not is_folder:
        raise UsageError(f"--image-size resizes image folders; {spec} is not one.")
    if spec == "digits":
        if options is not None and options != PreprocessingOptions():
            raise UsageError("--image-scale/-offset/-mean/-std apply to raw pixels, not digits.")
        return load_digits("train"), load_digits("test"), None
    pixels = resolve_preprocessing(options, [], NHWC)
    size = None if image_size is None else (image_size, image_size)
    data = load_file(spec, lambda: ImagePreprocessing(size, None, pixels))
    labels = _check_labels(data)
    if len(data.inputs) != 1:
        raise InputError(f"{data.source}: zoo models take one input, found {len(data.inputs)}.")
    x = data.x
    if x.ndim != 4:
        raise InputError(
            f"{data.source}: input 'x' must be NHWC images (4 dimensions), found shape {x.shape}."
        )
    raw = is_folder or x.dtype == np.uint8
    if not raw and options is not None and options != PreprocessingOptions():
        raise UsageError(
            f"--image-scale/-offset/-mean/-std apply to raw pixels (image folders, uint8 "
            f"arrays); {data.source} holds {x.dtype} values, fed as given."
        )
    spec_x = TensorSpec("x", (None, *x.shape[1:]), "float32")
    fitted = fit_to_signature(
        ArraySet({"x": x}, labels, data.source), ModelSignature((spec_x,), ()), pixels
    )
    data = ArraySet({"x": fitted.x}, labels, data.source, data.class_names)
    train_set, test_set = split_holdout(data)
    return train_set, test_set, pixels if raw else None


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
    pixels: Preprocessing | None = None  # how raw pixels became inputs (None: float arrays)


def _training_data(
    model: str,
    config: Any,
    data: str | None,
    image_size: int | None = None,
    options: PreprocessingOptions | None = None,
) -> TrainingData:
    """Load and check the data (InputError/UsageError); nothing is trained or written yet."""
    if spec_needs_data(data or config.default_data):
        raise UsageError(
            f"{model} has no built-in training data; pass --data PATH.npz or an image folder, "
            "or measure throughput on synthetic data with --benchmark."
        )
    spec = data or config.default_data
    train_set, test_set, pixels = _load_training_data(spec, image_size, options)
    input_shape = tuple(int(d) for d in train_set.x.shape[1:])
    labels = train_set.labels
    assert labels is not None  # _load_training_data rejects unlabelled data
    num_classes = config.num_classes if spec == "digits" else int(labels.max()) + 1
    if spec == "digits" and input_shape != config.input_shape:
        raise InputError(f"{model} expects {config.input_shape}, digits are {input_shape}.")
    check_arrays(train_set, num_classes)
    check_arrays(test_set, num_classes)
    return TrainingData(spec, train_set, test_set, input_shape, num_classes, pixels)


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
    image_size: int | None = None,
    preprocessing: PreprocessingOptions | None = None,
) -> dict[str, Any]:
    """Train a zoo model with AMP and export a float32 SavedModel plus its model card.

    An image folder trains at `image_size` (square), else its images' own size and channels;
    raw pixels (image folders, uint8 arrays) become inputs by `preprocessing` (default 1/255),
    recorded in the model card for convert, validate and bench.
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
    prepared = _training_data(model, config, data, image_size, preprocessing)
    amp_choice = choose_policy(amp, amp_dtype)
    distribution = start_strategy(plan)
    global_batch = batch_size or config.default_batch_size
    check_global_batch(global_batch, int(distribution.num_replicas_in_sync))
    log.info(
        "training %s on %s with policy %s (%s), %d replicas", model, prepared.train_set.source,
        amp_choice.policy, amp_choice.reason, distribution.num_replicas_in_sync,
    )  # fmt: skip
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
                **_preprocessing(prepared.spec, config, prepared.pixels),
                "image_size": list(shape[:2]),
            },
            "labels": train_set.class_names or [str(i) for i in range(classes)],
            "data": {
                "source": prepared.spec,
                "train_samples": len(train_set),
                "test_samples": len(prepared.test_set),
                "split": _split(prepared.spec),
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
            "environment": environment_block(registry.declared_packages()),
        }
