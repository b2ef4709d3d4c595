"""`trtconv train`'s options (and `train --benchmark`'s): AMP, the tf.distribute strategy and
a multi-worker cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trtconv.options.shared import PreprocessingOptions

# train: the mixed-precision dtypes --amp-dtype takes, and the tf.distribute strategies.
AMP_DTYPES = ("auto", "float16", "bfloat16")
STRATEGIES = ("default", "mirrored", "multi-worker")
# How long a multi-worker run waits for the others: to join at the start, and in any step.
DEFAULT_CLUSTER_TIMEOUT_S = 300.0
# train --benchmark: untimed steps first (tracing, XLA compilation, allocator growth), then timed.
DEFAULT_WARMUP_STEPS = 3
DEFAULT_NUM_ITER = 20


@dataclass(frozen=True)
class ClusterOptions:
    """Training on several devices or hosts: the tf.distribute strategy and, for
    multi-worker, the workers' host:port list, this worker's index and how long to wait.
    None means: the default strategy (one device), no CPU split, the cluster from $TF_CONFIG,
    DEFAULT_CLUSTER_TIMEOUT_S."""

    strategy: str | None = None
    cpu_devices: int | None = None
    workers: str | None = None
    worker_index: int | None = None
    cluster_timeout_s: float | None = None


@dataclass(frozen=True)
class TrainOptions:
    """`trtconv train`: a zoo model trained with AMP and exported as a float32 SavedModel.
    None means the zoo model's own default (data, epochs, batch size, image size)."""

    model: str = "digits-cnn"
    data: str | None = None
    epochs: int | None = None
    batch_size: int | None = None
    amp: bool = True
    amp_dtype: str = "auto"
    xla: bool = False
    seed: int = 0
    output: Path | None = None
    force: bool = False
    cluster: ClusterOptions = field(default_factory=ClusterOptions)
    image_size: int | None = None
    preprocessing: PreprocessingOptions = field(default_factory=PreprocessingOptions)


@dataclass(frozen=True)
class TrainBenchmarkOptions:
    """`trtconv train --benchmark`: training images/s on synthetic data; with `grid`,
    FP32/AMP/AMP+XLA x `batch_sizes`. None means the zoo model's default (batch size, image
    size), DEFAULT_WARMUP_STEPS and DEFAULT_NUM_ITER; `batch_sizes` None is [batch_size]."""

    model: str = "resnet50"
    batch_size: int | None = None
    warmup_steps: int | None = None
    num_iter: int | None = None
    amp: bool = True
    amp_dtype: str = "auto"
    xla: bool = False
    image_size: int | None = None
    seed: int = 0
    grid: bool = False
    batch_sizes: tuple[int, ...] | None = None
    cluster: ClusterOptions = field(default_factory=ClusterOptions)
