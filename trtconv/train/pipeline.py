"""The training pipeline: data, AMP policy, fit, float32 export, model card."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import numpy as np

from trtconv import __version__
from trtconv.calib.sources import (
    ArraySet,
    check_arrays,
    load_digits,
    load_source,
    split_holdout,
)
from trtconv.environment import environment_block
from trtconv.errors import InputError, UsageError
from trtconv.fsutil import atomic_directory, check_output_free
from trtconv.savedmodel import MODEL_CARD

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
    data = load_source(
        spec,
        image_size=config.input_shape[:2],
        channels=config.input_shape[-1],
        scale=prep["scale"],
        offset=prep["offset"],
    )
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
    """Train a zoo model with AMP and export a float32 SavedModel plus its model card.

    `batch_size` is global: under `strategy="mirrored"` each of the N replicas gets
    batch_size / N. `cpu_devices` (or $TRTCONV_CPU_DEVICES) splits the CPU into logical devices
    before TensorFlow initialises, so the mirrored strategy can run on a CPU-only host.

    Returns the model card (with `saved_model` path). Raises UsageError (bad options, existing
    output) and InputError (bad data) before any training starts.
    """
    from trtconv.train.amp import choose_policy
    from trtconv.train.distribute import (
        STRATEGIES,
        check_global_batch,
        cpu_device_count,
        make_strategy,
        split_cpu,
        strategy_devices,
    )
    from trtconv.train.export import OUTPUT_NAME, export_saved_model, float32_copy
    from trtconv.train.fit import build_compiled, evaluate_accuracy, fit
    from trtconv.zoo import get_model

    config = get_model(model)
    if (strategy or "default") not in STRATEGIES:
        raise UsageError(
            f"Unknown --strategy '{strategy}'; expected one of {', '.join(STRATEGIES)}."
        )
    devices = cpu_device_count(cpu_devices)
    output = Path(output or Path("models") / model)
    check_output_free(output, force)
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

    if devices is not None:
        split_cpu(devices)
    amp_choice = choose_policy(amp, amp_dtype)
    log.info(
        "training %s on %s with policy %s (%s)",
        model,
        train_set.source,
        amp_choice.policy,
        amp_choice.reason,
    )
    distribution = make_strategy(strategy)
    global_batch = batch_size or config.default_batch_size
    check_global_batch(global_batch, int(distribution.num_replicas_in_sync))
    with distribution.scope():
        keras_model = build_compiled(config, input_shape, num_classes, amp_choice, xla)
    started = time.perf_counter()
    result = fit(
        keras_model,
        train_set,
        epochs or config.default_epochs,
        global_batch,
        seed,
    )
    train_seconds = time.perf_counter() - started
    accuracy = evaluate_accuracy(result.model, test_set)
    log.info("test accuracy %.4f, %.0f images/s", accuracy, result.images_per_s)

    export_model = float32_copy(result.model, config, input_shape, num_classes)
    card = {
        "schema_version": TRAIN_SCHEMA_VERSION,
        "model": model,
        "saved_model": str(output / "saved_model"),
        "signature": "serving_default",
        "input": {"name": config.input_name, "shape": [None, *input_shape], "dtype": "float32"},
        "output": {"name": OUTPUT_NAME, "shape": [None, num_classes], "dtype": "float32"},
        "preprocessing": {**_preprocessing(spec, config), "image_size": list(input_shape[:2])},
        "labels": train_set.class_names or [str(i) for i in range(num_classes)],
        "data": {
            "source": spec,
            "train_samples": len(train_set),
            "test_samples": len(test_set),
            "sha256": train_set.sha256(),
        },
        "amp": {
            "policy": amp_choice.policy,
            "reason": amp_choice.reason,
            "loss_scaling": amp_choice.loss_scaling,
            "training_compute_dtype": result.compute_dtype,
        },
        "xla": xla,
        "strategy": {
            "name": strategy or "default",
            "replicas": int(distribution.num_replicas_in_sync),
            "devices": strategy_devices(distribution),
        },
        "epochs": len(result.epoch_seconds),
        "batch_size": global_batch,
        "batch_size_per_replica": global_batch // int(distribution.num_replicas_in_sync),
        "seed": seed,
        "final_loss": result.final_loss,
        "test_accuracy": accuracy,
        "train_images_per_s": result.images_per_s,
        "train_seconds": train_seconds,
        "exported_dtype": "float32",
        "trtconv_version": __version__,
        "environment": environment_block(),
    }
    with atomic_directory(output, force=force) as staging:
        export_saved_model(export_model, staging / "saved_model", config.input_name, input_shape)
        (staging / MODEL_CARD).write_text(json.dumps(card, indent=2) + "\n")
    return card
