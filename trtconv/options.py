"""Each command's options as one frozen dataclass: the home of every default, the verdicts'
confidence level and the data splits included.

It sits at the bottom of the layers, beside trtconv.core, and imports only core: whatever an
options object holds is defined here (`PreprocessingOptions`) or in core (`Judging`, the output
roles and tolerances the user states), so every layer above can take an options object.

The typer commands build these from their flags, `trtconv.api` callers build them directly and
the release config builds them from TOML, so a default written here is the default everywhere.
Checks that need no model (choices, ranges) run in `__post_init__`: whoever builds an options
object gets the same one-sentence UsageError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import Judging
from trtconv.core.model_io import InputValue
from trtconv.core.precision import PRECISIONS

# The level of the interval a validation verdict is decided by (--confidence; 0: point rule).
DEFAULT_CONFIDENCE = 0.95
# The part of a data set a model is evaluated on: what it did not train on, or all of it.
HELD_OUT, ALL = "held-out", "all"
SPLITS = (HELD_OUT, ALL)
DEFAULT_BATCH_SIZES = (1, 8, 32)
DEFAULT_CALIB_SAMPLES = 500
# int8 on a source shared with validation (no --validate-data) calibrates on this many samples
# unless --calib-samples says otherwise: agreement stopped improving beyond them on the models
# measured (docs/int8.md), and every sample they spare validates.
SHARED_CALIB_SAMPLES = 128
# fp16 from ONNX measures its keep-float32 ranges on this many samples of a shared source
# (docs/fp16.md).
FP16_RANGE_SAMPLES = 64
# Held-out samples validated on: at 1000, an agreement measured at 0.981 or more shows an int8
# budget of 0.97 with 95% confidence (at 0.99, 290 samples would; docs/verdicts.md).
DEFAULT_VALIDATE_SAMPLES = 1000
CALIB_METHODS = ("entropy", "minmax", "percentile")
# minmax, as ONNX Runtime's own quantize_static: held-out top-1 agreement of full int8 measured
# 0.981 (minmax) vs 0.928 (entropy) on a MobileNetV2 with ReLU6, 1.000 vs 0.986 on a small ResNet,
# equal on the digits CNN and a text model. Entropy clips the ReLU6 cap; the ladder tries it.
DEFAULT_CALIB_METHOD = "minmax"
# The int8 precision ladder's default time limit (convert --fallback-time-limit).
DEFAULT_FALLBACK_TIME_LIMIT_S = 600.0
INT8_TARGETS = ("auto", "vnni", "portable")
DEVICES = ("auto", "cpu", "cuda", "tensorrt")
DEFAULT_DEVICE = "auto"  # bench: where artifacts run: what the conversion recorded
DEFAULT_RANK_BATCH_SIZE = 8
DEFAULT_RANK_DURATION_S = 3.0
# train: the mixed-precision dtypes --amp-dtype takes, and the tf.distribute strategies.
AMP_DTYPES = ("auto", "float16", "bfloat16")
STRATEGIES = ("default", "mirrored", "multi-worker")
# How long a multi-worker run waits for the others: to join at the start, and in any step.
DEFAULT_CLUSTER_TIMEOUT_S = 300.0
# train --benchmark: untimed steps first (tracing, XLA compilation, allocator growth), then timed.
DEFAULT_WARMUP_STEPS = 3
DEFAULT_NUM_ITER = 20
# bench: warm-up calls per batch size (without --warmup/--warmup-s), timed seconds per batch size
# (without --iterations/--duration).
DEFAULT_WARMUP_ITERATIONS = 10
DEFAULT_DURATION_S = 3.0
# bench: the rounds each batch size's timed budget is split into, the models interleaved round by
# round; the 95% intervals are bootstrapped over them (trtconv.measure.stats).
DEFAULT_BENCH_ROUNDS = 10
# bench: what the speedups are over. "source": the first SavedModel given, else the first
# artifact's source model (measured too); "first": the first model given, nothing added (an
# artifact against another where TensorFlow is not installed).
BASELINE_SOURCE, BASELINE_FIRST = "source", "first"
BASELINES = (BASELINE_SOURCE, BASELINE_FIRST)
# How long a bench with a speed goal (a release's min_speedup / max_latency_ms_p99 gates) may keep
# adding rounds while an interval straddles its threshold (release [gates] speed_time_limit_s).
DEFAULT_SPEED_TIME_LIMIT_S = 60.0
# A release benches (and gates) at these batch sizes unless its [bench] table says otherwise.
DEFAULT_RELEASE_BATCH_SIZES = (1, 8)


def check_confidence(confidence: float) -> None:
    """Raise UsageError unless `confidence` is 0 (point decisions) or a level in (0, 1)."""
    if not 0.0 <= confidence < 1.0:
        raise UsageError(
            f"--confidence must be 0 (point decisions) or a level below 1, e.g. 0.95; found "
            f"{confidence}."
        )


def check_choice(flag: str, value: str, choices: Sequence[str]) -> None:
    """Raise UsageError unless `value` is one of `choices` (`flag` names the option)."""
    if value not in choices:
        raise UsageError(f"{flag} must be one of {', '.join(choices)}, found '{value}'.")


def check_signature(signature: str | None) -> None:
    """Raise UsageError for an empty --signature."""
    if signature is not None and not signature.strip():
        raise UsageError("--signature needs a signature name, found ''.")


def shapes_of(shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    """--input-shape values as {name: shape tuple}. Raises UsageError for a size below 1."""
    fixed = {str(name): tuple(int(dim) for dim in shape) for name, shape in shapes.items()}
    for name, shape in fixed.items():
        if not shape or min(shape) < 1:
            raise UsageError(f"--input-shape {name}: sizes must be positive, found {list(shape)}.")
    return fixed


def check_positive(flag: str, value: int) -> None:
    """Raise UsageError unless `value` is at least 1 (`flag` names the option)."""
    if value < 1:
        raise UsageError(f"{flag} must be at least 1, found {value}.")


def check_batch_sizes(sizes: Sequence[int]) -> None:
    """Raise UsageError unless `sizes` is a non-empty list of positive integers."""
    if not sizes or any(size < 1 for size in sizes):
        raise UsageError(f"--batch-sizes must be positive integers, found {list(sizes)}.")


@dataclass(frozen=True)
class PreprocessingOptions:
    """What the user said on the command line (or in a release config); None: not said.
    `input_values`: `--input-value NAME=VALUE`, inputs the data does not hold."""

    scale: float | None = None
    offset: float | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    input_values: Mapping[str, InputValue] | None = None

    def __post_init__(self) -> None:
        if self.scale is not None and self.scale == 0:
            raise UsageError("--image-scale must not be 0: every pixel would become the offset.")
        if self.std is not None and any(s <= 0 for s in self.std):
            raise UsageError(f"--image-std values must be positive, found {list(self.std)}.")
        if self.mean is not None and self.std is not None and len(self.mean) != len(self.std):
            raise UsageError(
                f"--image-mean has {len(self.mean)} values and --image-std {len(self.std)}: "
                "give one per channel (or one for all) to both."
            )


@dataclass(frozen=True)
class Contest:
    """`convert --backend best`: how candidates are timed: the batch size they are ranked at,
    timed seconds (or `iterations`) each after the bench's warm-up, and threads."""

    batch_size: int = DEFAULT_RANK_BATCH_SIZE
    duration_s: float | None = DEFAULT_RANK_DURATION_S
    threads: int | None = None
    iterations: int | None = None

    def __post_init__(self) -> None:
        counts = [self.batch_size, *(n for n in (self.threads, self.iterations) if n is not None)]
        if min(counts) < 1 or (self.duration_s is not None and self.duration_s <= 0):
            raise UsageError(
                "--rank-batch-size and --threads must be at least 1 and --rank-duration positive."
            )


@dataclass(frozen=True)
class ConvertOptions:
    """`trtconv convert`. `precision` None is allowed only with backend "best" (every
    precision); `output` None means models/NAME-BACKEND-PRECISION; `tolerance` and `rtol` None
    keep the precision's absolute and relative tolerances; `min_top1_agreement` and
    `max_accuracy_drop` None keep its limits; `confidence` is the level verdicts are decided at
    (0: point decisions). `signature` None is serving_default; `input_shapes` fill in dynamic
    input dimensions for random data ({name: full shape}). A model with a fixed batch converts
    at that batch when `batch_sizes` is the default. `validate_data` None: validation on the
    calibration source's samples nothing was fitted to (trtconv.convert.data); `calib_samples`
    None: DEFAULT_CALIB_SAMPLES, or fewer of a source shared with validation. `split` "held-out"
    says the model trained on the rest of the data (keep its fixed hold-out), "all" that it did
    not; None: its model card decides."""

    saved_model: Path
    precision: str | None = None
    backend: str = "auto"
    output: Path | None = None
    calib_data: str | None = None
    calib_samples: int | None = None
    calib_method: str = DEFAULT_CALIB_METHOD
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    validate_samples: int = DEFAULT_VALIDATE_SAMPLES
    tolerance: float | None = None
    force: bool = False
    preprocessing: PreprocessingOptions = field(default_factory=PreprocessingOptions)
    int8_target: str = "auto"
    fallback: bool = True
    fallback_time_limit_s: float = DEFAULT_FALLBACK_TIME_LIMIT_S
    min_top1_agreement: float | None = None
    max_accuracy_drop: float | None = None
    judging: Judging = field(default_factory=Judging)
    contest: Contest = field(default_factory=Contest)
    confidence: float = DEFAULT_CONFIDENCE
    signature: str | None = None
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    validate_data: str | None = None
    split: str | None = None
    # --custom-objects MODULE:NAME: classes a Keras file needs (trtconv.model.keras_files).
    custom_objects: tuple[str, ...] = ()
    # --tolerance X,R: the relative tolerance of every output; None keeps the precision's.
    rtol: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "saved_model", Path(self.saved_model))
        object.__setattr__(self, "custom_objects", tuple(self.custom_objects))
        check_confidence(self.confidence)
        if self.split is not None:
            check_choice("--split", self.split, SPLITS)
        object.__setattr__(self, "batch_sizes", tuple(self.batch_sizes))
        object.__setattr__(self, "input_shapes", shapes_of(self.input_shapes))
        check_signature(self.signature)
        if self.precision is not None:
            check_choice("--precision", self.precision, PRECISIONS)
        check_choice("--calib-method", self.calib_method, CALIB_METHODS)
        check_choice("--int8-target", self.int8_target, INT8_TARGETS)
        check_batch_sizes(self.batch_sizes)
        if (self.calib_samples is not None and self.calib_samples < 1) or (
            self.validate_samples < 1
        ):
            raise UsageError("--calib-samples and --validate-samples must be at least 1.")
        if self.fallback_time_limit_s <= 0:
            raise UsageError(
                f"--fallback-time-limit must be positive, found {self.fallback_time_limit_s}."
            )


@dataclass(frozen=True)
class ValidateOptions:
    """`trtconv validate`. None means: from the artifact's manifest (reference model, data,
    split, the confidence its verdict was decided at, else DEFAULT_CONFIDENCE),
    DEFAULT_VALIDATE_SAMPLES samples, the precision's tolerance (`tolerance` its atol and
    `rtol` its relative part for every output: --tolerance X,R)."""

    artifact: Path
    reference: Path | None = None
    data: str | None = None
    samples: int | None = None
    tolerance: float | None = None
    device: str = "auto"
    judging: Judging = field(default_factory=Judging)
    preprocessing: PreprocessingOptions = field(default_factory=PreprocessingOptions)
    split: str | None = None
    confidence: float | None = None
    signature: str | None = None
    rtol: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "artifact", Path(self.artifact))
        check_signature(self.signature)
        check_choice("--device", self.device, DEVICES)
        if self.confidence is not None:
            check_confidence(self.confidence)
        if self.split is not None:
            check_choice("--split", self.split, SPLITS)
        if self.samples is not None and self.samples < 1:
            raise UsageError(f"--samples must be at least 1, found {self.samples}.")


@dataclass(frozen=True)
class SpeedGoal:
    """Thresholds a bench keeps timing for: at `batch_size`, rounds are added while some model's
    speed-up interval straddles `min_speedup` or its p99 latency interval `max_latency_ms_p99`,
    for at most `time_limit_s` seconds (a release's speed gates)."""

    batch_size: int
    min_speedup: float | None = None
    max_latency_ms_p99: float | None = None
    time_limit_s: float = DEFAULT_SPEED_TIME_LIMIT_S

    def __post_init__(self) -> None:
        if self.time_limit_s < 0:
            raise UsageError(f"The speed time limit {self.time_limit_s:g} s is negative.")


@dataclass(frozen=True)
class BenchOptions:
    """`trtconv bench`: models side by side. None means the defaults: DEFAULT_WARMUP_ITERATIONS
    warm-up calls, DEFAULT_DURATION_S timed seconds, the library's threads, random data, the
    model card's preprocessing, the manifest's judging and split. Repeated batch sizes are
    measured once; a model with a fixed batch is measured at that batch when `batch_sizes` is
    the default. `signature`: the SavedModels' signature (None: serving_default, or the one the
    artifacts were converted from); `input_shapes` fill in dynamic dimensions of random data.
    The timed budget is split into `rounds` interleaved rounds; `goal` (None: no goal) adds
    rounds at its batch size until its thresholds are decided. `baseline`: one of BASELINES."""

    models: tuple[Path, ...]
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    warmup: int | None = None
    warmup_s: float | None = None
    iterations: int | None = None
    duration_s: float | None = None
    threads: int | None = None
    data: str | None = None
    eval_data: str | None = None
    xla: bool = False
    throughput: bool = False
    report: Path | None = None
    force: bool = False
    device: str = DEFAULT_DEVICE
    judging: Judging = field(default_factory=Judging)
    preprocessing: PreprocessingOptions = field(default_factory=PreprocessingOptions)
    split: str | None = None
    signature: str | None = None
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    rounds: int = DEFAULT_BENCH_ROUNDS
    goal: SpeedGoal | None = None
    baseline: str = BASELINE_SOURCE
    # --custom-objects MODULE:NAME: classes a Keras file needs (else an artifact's recorded ones).
    custom_objects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.baseline not in BASELINES:
            raise UsageError(
                f"--baseline {self.baseline} is unknown: choose {' or '.join(BASELINES)}."
            )
        object.__setattr__(self, "models", tuple(Path(m) for m in self.models))
        object.__setattr__(self, "input_shapes", shapes_of(self.input_shapes))
        check_signature(self.signature)
        object.__setattr__(self, "batch_sizes", tuple(dict.fromkeys(self.batch_sizes)))
        check_batch_sizes(self.batch_sizes)
        self._check_budgets()
        if self.threads is not None and self.threads < 1:
            raise UsageError(f"--threads {self.threads} is invalid: it must be at least 1.")
        check_choice("--device", self.device, DEVICES)
        if self.split is not None:
            check_choice("--split", self.split, SPLITS)
        if self.rounds < 1:
            raise UsageError(f"--rounds {self.rounds} is invalid: it must be at least 1.")
        if self.goal is not None and self.goal.batch_size not in self.batch_sizes:
            raise UsageError(
                f"The speed goal's batch size {self.goal.batch_size} is not benchmarked "
                f"(batch sizes {', '.join(map(str, self.batch_sizes))})."
            )

    def _check_budgets(self) -> None:
        """--warmup/--warmup-s and --iterations/--duration: each pair exclusive, none negative,
        the timed ones positive."""
        if self.warmup is not None and self.warmup_s is not None:
            raise UsageError("Give --warmup (iterations) or --warmup-s (seconds), not both.")
        if self.iterations is not None and self.duration_s is not None:
            raise UsageError("Give --iterations or --duration, not both.")
        for name, value, timed in (
            ("--warmup", self.warmup, False),
            ("--warmup-s", self.warmup_s, False),
            ("--iterations", self.iterations, True),
            ("--duration", self.duration_s, True),
        ):
            if value is not None and (value < 0 or (timed and not value)):
                raise UsageError(f"{name} {value} is invalid: it must be positive.")


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


@dataclass(frozen=True)
class ReleaseOptions:
    """`trtconv release`: the TOML config, where the release directory goes (None: the
    config's own or release-out/NAME), and whether to resume or replace one."""

    config: Path
    output: Path | None = None
    resume: bool = False
    force: bool = False


# Serving: `trtconv deploy`, `trtconv serve` and `bench --scenario server|single-stream|offline`.
# Dynamic batching without a measurement: batches up to 8, preferring 4 and 8, and a request
# waits at most 100 µs for others to join it (short next to a small model's own latency).
DEFAULT_MAX_BATCH_SIZE = 8
DEFAULT_PREFERRED_BATCH_SIZES = (4, 8)
DEFAULT_QUEUE_DELAY_US = 100
LOOPBACK = "127.0.0.1"
# Admission control (serving/repository/admission.py): the latency budget a served request is
# answered within; a request still queued when it could no longer meet it is answered
# UNAVAILABLE / 503.
DEFAULT_LATENCY_BUDGET_MS = 100.0
# serve: how long a stop (SIGINT/SIGTERM) waits for the requests in flight, after not-ready.
DEFAULT_DRAIN_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class DeployOptions:
    """`trtconv deploy`: one Triton model per model in `models` (artifacts or SavedModels),
    written to the repository `output`. `bench` is a `trtconv bench --json` result whose rows
    for each model tune its batching; `threads` None leaves the backend's default."""

    models: tuple[Path, ...]
    output: Path
    force: bool = False
    bench: Path | None = None
    instances: int = 1
    threads: int | None = None
    # A `bench --scenario server --json` result: the batching its rows met the budget with.
    serving: Path | None = None
    # Admission control: the queue timeout and size derive from the budget and a measured rate
    # (--bench, --serving) unless given.
    latency_budget_ms: float = DEFAULT_LATENCY_BUDGET_MS
    max_queue_size: int | None = None
    queue_timeout_ms: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(Path(m) for m in self.models))
        object.__setattr__(self, "output", Path(self.output))
        if not self.models:
            raise UsageError("Give at least one artifact or SavedModel to deploy.")
        check_positive("--instances", self.instances)
        if self.threads is not None:
            check_positive("--threads", self.threads)
        check_admission(self.latency_budget_ms, self.max_queue_size, self.queue_timeout_ms)


def check_admission(budget_ms: float, queue_size: int | None, timeout_ms: float | None) -> None:
    """Raise UsageError for a budget that is not positive, or a queue size or timeout below 0
    (0: no limit, Triton's own meaning)."""
    if budget_ms <= 0:
        raise UsageError(f"--latency-budget-ms must be positive, found {budget_ms}.")
    if queue_size is not None and queue_size < 0:
        raise UsageError(f"--max-queue-size must be 0 (no limit) or more, found {queue_size}.")
    if timeout_ms is not None and timeout_ms < 0:
        raise UsageError(f"--queue-timeout-ms must be 0 (no timeout) or more, found {timeout_ms}.")


# What `serve --shadow` does once its live verdict is failing: say so, or serve the native model.
ON_FAILING = ("warn", "fallback")


def check_shadow(rate: float | None, on_failing: str, capture: Path | None) -> None:
    """Raise UsageError for a shadow rate outside (0, 1], an unknown --on-failing, or a
    fallback or capture asked for without a shadow check."""
    check_choice("--on-failing", on_failing, ON_FAILING)
    if rate is None:
        if on_failing != ON_FAILING[0]:
            raise UsageError(f"--on-failing {on_failing} acts on the shadow check: give --shadow.")
        if capture is not None:
            raise UsageError("--shadow-capture keeps what the shadow check found: give --shadow.")
        return
    if not 0 < rate <= 1:
        raise UsageError(
            f"--shadow is the share of requests checked, above 0 and at most 1 (0.01: one in a "
            f"hundred, 1: all), found {rate}."
        )
    if capture is not None and Path(capture).exists() and not Path(capture).is_dir():
        raise UsageError(f"--shadow-capture {capture} is a file; give a folder.")


@dataclass(frozen=True)
class ServeOptions:
    """`trtconv serve`: a Triton server on loopback in front of trtconv's runner for `model`.
    Ports None are free ones picked at start; `stop_after_s` None serves until SIGINT/SIGTERM."""

    model: Path
    name: str | None = None
    http_port: int | None = None
    grpc_port: int | None = None
    metrics_port: int | None = None
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    queue_delay_us: int = DEFAULT_QUEUE_DELAY_US
    threads: int | None = None
    device: str = "auto"
    stop_after_s: float | None = None
    # Admission control: None derives them from the budget and the rate measured at start.
    latency_budget_ms: float = DEFAULT_LATENCY_BUDGET_MS
    max_queue_size: int | None = None
    queue_timeout_ms: float | None = None
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    # Model instances, one runner each, the threads divided between them; None: chosen at
    # start from the cores and the model's measured single-request time (serving/server/serve.py).
    instances: int | None = None
    # Where the endpoints listen (loopback unless told), the file holding the key inference
    # requests must carry, and Triton's own log (its file and verbose level).
    host: str = LOOPBACK
    api_key_file: Path | None = None
    log_file: Path | None = None
    log_verbose: int = 0
    # Triton's queue policy (admission control) on: off unless asked, or implied by a queue
    # size or timeout given (serving/repository/admission.py says what it costs in Triton 2.51).
    admission: bool = False
    # The shadow check (serving/server/shadow/): the share of requests the native model runs again
    # (None: off), what a failing live verdict does, where disagreeing samples are kept.
    shadow: float | None = None
    on_failing: str = ON_FAILING[0]
    shadow_capture: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", Path(self.model))
        check_shadow(self.shadow, self.on_failing, self.shadow_capture)
        if self.max_queue_size is not None or self.queue_timeout_ms is not None:
            object.__setattr__(self, "admission", True)
        if not self.host.strip():
            raise UsageError("--host needs an address, found ''.")
        if self.api_key_file is not None and not Path(self.api_key_file).is_file():
            raise UsageError(f"--api-key-file {self.api_key_file} does not exist.")
        if self.log_verbose < 0:
            raise UsageError(f"--log-verbose must be 0 or more, found {self.log_verbose}.")
        for flag, port in (
            ("--http-port", self.http_port),
            ("--grpc-port", self.grpc_port),
            ("--metrics-port", self.metrics_port),
        ):
            if port is not None and not 1 <= port <= 65535:
                raise UsageError(f"{flag} must be a port between 1 and 65535, found {port}.")
        ports = [p for p in (self.http_port, self.grpc_port, self.metrics_port) if p is not None]
        if len(ports) != len(set(ports)):
            raise UsageError(f"--http-port, --grpc-port and --metrics-port must differ: {ports}.")
        check_positive("--max-batch-size", self.max_batch_size)
        if self.queue_delay_us < 0:
            raise UsageError(f"--queue-delay-us must be 0 or more, found {self.queue_delay_us}.")
        if self.threads is not None:
            check_positive("--threads", self.threads)
        if self.stop_after_s is not None and self.stop_after_s <= 0:
            raise UsageError(f"--stop-after must be positive, found {self.stop_after_s}.")
        check_admission(self.latency_budget_ms, self.max_queue_size, self.queue_timeout_ms)
        if self.instances is not None:
            check_positive("--instances", self.instances)
        if self.drain_timeout_s < 0:
            raise UsageError(f"--drain-timeout must be 0 or more, found {self.drain_timeout_s}.")


# `bench --scenario server`: each LoadGen run, and the runs of the search for the highest rate.
DEFAULT_LOAD_RUN_S = 5.0
DEFAULT_SEARCH_RUNS = 6
# MLPerf's Server scenario needs runs of at least 600 s; LoadGen is told so (and what a run is
# capped at), so shorter runs come back INVALID with that reason.
MLPERF_MIN_DURATION_S = 600
SINGLE_STREAM, OFFLINE = "single-stream", "offline"
SCENARIOS = ("closed-loop", "server", SINGLE_STREAM, OFFLINE)


@dataclass(frozen=True)
class ServerBenchOptions:
    """`trtconv bench --scenario server`: each model served (`trtconv serve`) and driven by
    MLPerf LoadGen's Poisson arrivals; the highest rate whose p99 latency meets
    `latency_budget_ms`, found in `search_runs` runs of `run_s` seconds. `compare_batching` adds
    batch-1 serving beside dynamic batching."""

    models: tuple[Path, ...]
    latency_budget_ms: float
    run_s: float = DEFAULT_LOAD_RUN_S
    search_runs: int = DEFAULT_SEARCH_RUNS
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    queue_delay_us: int = DEFAULT_QUEUE_DELAY_US
    compare_batching: bool = False
    # Multiples of the measured capacity to offer instead of searching the rate (--offered).
    offered: tuple[float, ...] = ()
    # Each model served with its shadow check at this rate (serve --shadow): what it costs.
    shadow: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(Path(m) for m in self.models))
        object.__setattr__(self, "offered", tuple(float(m) for m in self.offered))
        check_shadow(self.shadow, ON_FAILING[0], None)
        if not self.models:
            raise UsageError("Give at least one model to bench.")
        if any(multiple <= 0 for multiple in self.offered):
            raise UsageError(f"--offered takes positive multiples, found {list(self.offered)}.")
        if self.latency_budget_ms <= 0:
            raise UsageError(
                f"--latency-budget-ms must be positive, found {self.latency_budget_ms}."
            )
        if self.run_s <= 0:
            raise UsageError(f"--duration must be positive, found {self.run_s}.")
        check_positive("--search-runs", self.search_runs)
        check_positive("--max-batch-size", self.max_batch_size)


@dataclass(frozen=True)
class ScenarioBenchOptions:
    """`trtconv bench --scenario single-stream|offline`: each model served (`trtconv serve`)
    and driven by one LoadGen run of `run_s` seconds in that scenario."""

    models: tuple[Path, ...]
    scenario: str
    run_s: float = DEFAULT_LOAD_RUN_S
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    queue_delay_us: int = DEFAULT_QUEUE_DELAY_US

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(Path(m) for m in self.models))
        if not self.models:
            raise UsageError("Give at least one model to bench.")
        if self.scenario not in (SINGLE_STREAM, OFFLINE):
            raise UsageError(f"Unknown LoadGen scenario '{self.scenario}'.")
        if self.run_s <= 0:
            raise UsageError(f"--duration must be positive, found {self.run_s}.")
