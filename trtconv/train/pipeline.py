"""The training pipeline: data, AMP policy, fit, float32 export, model card."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from trtconv import __version__
from trtconv.backends import registry
from trtconv.calib.fitting import fit_to_signature
from trtconv.calib.preprocessing import NHWC, Preprocessing, resolve_preprocessing
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
from trtconv.core.results import JsonResult
from trtconv.facts.environment import Environment, machine_environment
from trtconv.model.savedmodel import MODEL_CARD
from trtconv.options.shared import PreprocessingOptions
from trtconv.options.train import TrainOptions
from trtconv.train.amp import AmpBlock, AmpChoice, choose_policy
from trtconv.train.distribute import (
    DistributionPlan,
    StrategyBlock,
    check_global_batch,
    cluster_failures,
    describe_strategy,
    plan_cluster,
    start_strategy,
)
from trtconv.train.export import OUTPUT_NAME, export_saved_model, float32_copy
from trtconv.train.fit import FitResult, build_compiled, evaluate_accuracy, fit
from trtconv.train.loop import fit_distributed, replica_mean_weights
from trtconv.zoo import ModelConfig, get_model

log = logging.getLogger(__name__)

TRAIN_SCHEMA_VERSION = 1


def _preprocessing(spec: str, config: ModelConfig, pixels: Preprocessing | None) -> dict[str, Any]:
    """What the model card records: the model's own for digits, the preprocessing applied to raw
    pixels (image folders, uint8 arrays), else none (float arrays are fed as given: the card
    must not claim a scaling that never happened)."""
    if spec == "digits":
        return dict(config.preprocessing)
    if pixels is not None:
        return {**config.preprocessing, **pixels.to_dict()}
    return {**config.preprocessing, "scale": 1.0, "offset": 0.0}


@dataclass(frozen=True)
class HeldOut:
    """Which samples the model never trained on (validate and bench evaluate on the same)."""

    held_out_fraction: float
    seed: int

    @classmethod
    def of(cls, spec: str) -> HeldOut:
        """The split `--data spec` is trained with."""
        if spec == "digits":
            return cls(DIGITS_TEST_FRACTION, DIGITS_SPLIT_SEED)
        return cls(HOLDOUT_FRACTION, HOLDOUT_SEED)


@dataclass(frozen=True)
class TensorBlock:
    """The model card's `input` or `output`: name, shape ([None, ...]) and dtype."""

    name: str
    shape: list[int | None]
    dtype: str = "float32"


@dataclass(frozen=True)
class DataBlock:
    """The model card's `data`: source, sample counts, the held-out split, sha256."""

    source: str
    train_samples: int
    test_samples: int
    split: HeldOut
    sha256: str


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
    config: ModelConfig,
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
    return TrainingData(
        spec=spec,
        train_set=train_set,
        test_set=test_set,
        input_shape=input_shape,
        num_classes=num_classes,
        pixels=pixels,
    )


@dataclass(frozen=True, kw_only=True)
class TrainResult(JsonResult):
    """What `train` returns: the model card, as `--json` prints it and `trtconv.json` beside the
    SavedModel holds it. The nested blocks are the card's JSON objects."""

    schema_version: int = TRAIN_SCHEMA_VERSION
    model: str
    saved_model: Path | None = None  # None until the chief writes it (other workers: always)
    signature: str = "serving_default"
    input: TensorBlock  # shape [None, H, W, C]
    output: TensorBlock
    preprocessing: dict[str, Any]  # how raw pixels become inputs, and the image size
    labels: list[str]
    data: DataBlock
    amp: AmpBlock  # the policy, why, loss scaling, the dtype training really computed in
    xla: bool
    strategy: StrategyBlock
    epochs: int
    batch_size: int  # global, over every replica
    batch_size_per_replica: int
    seed: int
    final_loss: float
    test_accuracy: float  # of the exported float32 model
    train_images_per_s: float
    train_seconds: float
    exported_dtype: str = "float32"
    trtconv_version: str = __version__
    environment: Environment


def train(options: TrainOptions) -> TrainResult:
    """Train a zoo model with AMP and export a float32 SavedModel plus its model card.

    An image folder trains at `options.image_size` (square), else its images' own size and
    channels; raw pixels (image folders, uint8 arrays) become inputs by `options.preprocessing`
    (default 1/255), recorded in the model card for convert, validate and bench.
    `batch_size` is global: under the `mirrored` or `multi-worker` strategy each of the N
    replicas (over every worker) gets batch_size / N. `cluster.cpu_devices` (or
    $TRTCONV_CPU_DEVICES) splits the CPU into logical devices before TensorFlow initialises, so
    the mirrored strategy can run on a CPU-only host. `multi-worker` takes its cluster from
    `cluster.workers` and `cluster.worker_index`, else $TF_CONFIG; every worker runs the same
    call and only the chief writes `output` (the others return their card, `saved_model` None).

    Returns the model card (with the `saved_model` path). Raises UsageError (bad options,
    existing output) and InputError (bad data) before any training starts, and ClusterError
    when the other workers cannot be reached within `cluster.cluster_timeout_s`.
    """
    config = get_model(options.model)
    plan = plan_cluster(options.cluster)
    output = Path(options.output or Path("models") / options.model)
    if plan.writes_outputs:  # the others never touch the output, wherever it may be for them
        check_output_free(output, options.force)
    prepared = _training_data(
        options.model, config, options.data, options.image_size, options.preprocessing
    )
    session = _Session.start(config, prepared, plan, options)
    card, export_model = session.run(options.epochs or config.default_epochs)
    if not plan.writes_outputs:
        return card  # a worker other than the chief writes nothing
    card = replace(card, saved_model=output / "saved_model")
    with atomic_directory(output, force=options.force) as staging:
        export_saved_model(
            export_model, staging / "saved_model", config.input_name, prepared.input_shape
        )
        card.save(staging / MODEL_CARD)
    return card


@dataclass
class _Session:
    """A training run once its strategy exists: the fit, the float32 copy, the model card."""

    config: ModelConfig
    prepared: TrainingData
    plan: DistributionPlan
    distribution: Any
    amp_choice: AmpChoice
    xla: bool
    seed: int
    global_batch: int

    @classmethod
    def start(
        cls,
        config: ModelConfig,
        prepared: TrainingData,
        plan: DistributionPlan,
        options: TrainOptions,
    ) -> _Session:
        """Pick the AMP policy and start the strategy (for multi-worker: join the cluster).

        Raises UsageError for an unknown --amp-dtype or a batch that does not divide over the
        replicas, ClusterError when the other workers cannot be reached.
        """
        amp_choice = choose_policy(options.amp, options.amp_dtype)
        distribution = start_strategy(plan)
        global_batch = options.batch_size or config.default_batch_size
        check_global_batch(global_batch, int(distribution.num_replicas_in_sync))
        log.info(
            "training %s on %s with policy %s (%s), %d replicas",
            config.name,
            prepared.train_set.source,
            amp_choice.policy,
            amp_choice.reason,
            distribution.num_replicas_in_sync,
        )
        xla, seed = options.xla, options.seed
        return cls(config, prepared, plan, distribution, amp_choice, xla, seed, global_batch)

    def run(self, epochs: int) -> tuple[TrainResult, Any]:
        """Build, train and measure; returns the model card (`saved_model` None) and the
        float32 Keras model to export."""
        prepared = self.prepared
        with self.distribution.scope():
            keras_model = build_compiled(
                self.config, prepared.input_shape, prepared.num_classes, self.amp_choice, self.xla
            )
        started = time.perf_counter()
        result, weights = self.train_weights(keras_model, epochs)
        train_seconds = time.perf_counter() - started
        export_model = float32_copy(
            weights, self.config, prepared.input_shape, prepared.num_classes
        )
        # The accuracy of what is exported: the float32 rebuild, not the mixed-precision graph.
        accuracy = evaluate_accuracy(export_model, prepared.test_set)
        log.info("test accuracy %.4f, %.0f images/s", accuracy, result.images_per_s)
        return self.model_card(result, accuracy, train_seconds), export_model

    def train_weights(self, keras_model: Any, epochs: int) -> tuple[FitResult, list[Any]]:
        """Train; returns the FitResult and the weights to export.

        One host fits with Keras; a cluster runs trtconv's distributed loop (Keras' fit cannot
        run under MultiWorkerMirroredStrategy) and averages the batch-norm statistics.
        """
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

    def model_card(self, result: FitResult, accuracy: float, train_seconds: float) -> TrainResult:
        """The model card (`saved_model` None until the chief writes it)."""
        config, prepared = self.config, self.prepared
        shape, classes, train_set = prepared.input_shape, prepared.num_classes, prepared.train_set
        replicas = int(self.distribution.num_replicas_in_sync)
        return TrainResult(
            model=config.name,
            input=TensorBlock(config.input_name, [None, *shape]),
            output=TensorBlock(OUTPUT_NAME, [None, classes]),
            preprocessing={
                **_preprocessing(prepared.spec, config, prepared.pixels),
                "image_size": list(shape[:2]),
            },
            labels=train_set.class_names or [str(i) for i in range(classes)],
            data=DataBlock(
                prepared.spec,
                len(train_set),
                len(prepared.test_set),
                HeldOut.of(prepared.spec),
                train_set.sha256(),
            ),
            amp=AmpBlock.of(self.amp_choice, result.compute_dtype),
            xla=self.xla,
            strategy=describe_strategy(self.plan, self.distribution),
            epochs=len(result.epoch_seconds),
            batch_size=self.global_batch,
            batch_size_per_replica=self.global_batch // replicas,
            seed=self.seed,
            final_loss=result.final_loss,
            test_accuracy=accuracy,
            train_images_per_s=result.images_per_s,
            train_seconds=train_seconds,
            environment=machine_environment(registry.declared_packages()),
        )
