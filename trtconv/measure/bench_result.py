"""The bench result document, typed: one flat row per model × batch size, and the keys around
them. `BenchResult.to_json()` is the document `trtconv bench --json` prints and results.json
holds; `BenchResult.from_json()` reads one back.

Keys are snake_case and carry their unit. Bump SCHEMA_VERSION when a key changes meaning or
disappears; adding a key does not need a bump.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import trtconv.measure.stats as stats
from trtconv.core.data_contract import DataContract
from trtconv.core.results import JsonResult, optional_key
from trtconv.facts.environment import BenchEnvironment
from trtconv.measure.loop_budget import Budget
from trtconv.options.bench import SpeedGoal

SCHEMA_VERSION = 1


@dataclass
class ModelInfo:
    """One model as measured (an entry of `models`): where it came from and the worker process
    that measured it."""

    label: str
    model: str  # the path given (SavedModel or artifact directory)
    backend: str  # tf, ort, tftrt, trt, ...
    precision: str
    xla: bool
    kind: str  # "saved_model" or "artifact"
    is_baseline: bool
    worker_pid: int | None = None
    load_ms: float | None = None
    first_inference_ms: float | None = None
    peak_rss_mb: float | None = None
    gpu_memory_mb: float | None = None
    harness_overhead_ms: float | None = None
    device: str | None = None  # where it ran: cpu, cuda or tensorrt (bench --device)
    throughput_mode: bool = False  # ran in its backend's throughput mode (bench --throughput)
    accuracy: float | None = None
    # Decision agreement with the baseline on the evaluation data: top-1 of class scores, the
    # thresholded decision of binary scores (the lowest over outputs that decide something).
    top1_agreement: float | None = None
    eval_samples: int | None = None
    # Artifacts: their conversion's validation verdict (manifest status); None for SavedModels.
    validation: str | None = None


@dataclass(kw_only=True)
class BenchRow(JsonResult):
    """One model at one batch size (an entry of `results`; its fields are the CSV columns, in
    order). The model-wide figures (load time, peak RSS, harness overhead, worker, accuracy,
    agreement) repeat its ModelInfo's, so each row reads on its own."""

    model: str
    label: str
    backend: str
    precision: str
    xla: bool
    throughput_mode: bool
    is_baseline: bool
    batch_size: int
    iterations: int
    warmup_iterations: int
    timed_s: float
    latency_ms_min: float
    latency_ms_mean: float
    latency_ms_trimmed_mean: float
    latency_ms_p50: float
    latency_ms_p90: float
    latency_ms_p95: float
    latency_ms_p99: float
    latency_ms_max: float
    latency_ms_std: float
    cv_percent: float
    cv_trimmed_percent: float  # over the central 80%: what stability warnings read
    throughput_per_s: float
    speedup_vs_baseline: float | None = None  # over the baseline's throughput, same batch size
    # The interleaved rounds the figures pool, and 95% intervals bootstrapped over them
    # (trtconv.measure.stats; None with a single round).
    rounds: int = 1
    throughput_per_s_ci95: tuple[float, float] | None = None
    speedup_vs_baseline_ci95: tuple[float, float] | None = None
    latency_ms_p50_ci95: tuple[float, float] | None = None
    latency_ms_p99_ci95: tuple[float, float] | None = None
    transfer_ms_mean: float | None = None  # host<->device copies, where the runner reports them
    # Device compute alone, timed with CUDA events (trtexec's "GPU Compute Time"), where the
    # runner reports it; its CV is what the 1% GPU stability rule reads.
    compute_ms_mean: float | None = None
    compute_cv_percent: float | None = None
    first_inference_ms: float | None = None
    load_ms: float | None = None
    peak_rss_mb: float | None = None
    gpu_memory_mb: float | None = None
    accuracy: float | None = None
    top1_agreement: float | None = None
    validation: str | None = None
    harness_overhead_ms: float | None = None
    harness_overhead_percent: float = 0.0  # of the p50 latency
    worker_pid: int | None = None
    threads: int | None = None
    device: str | None = None


# The keys of one `results` row, in the order of CSV columns; of one `models` entry.
ROW_KEYS = tuple(f.name for f in fields(BenchRow))
MODEL_KEYS = tuple(f.name for f in fields(ModelInfo))
# The row keys a model's ModelInfo fills in.
ROW_KEYS_OF_MODEL = tuple(key for key in ROW_KEYS if key in MODEL_KEYS)


@dataclass(kw_only=True)
class Settings:
    """How each model was measured (the `settings` block). The warm-up is `warmup_iterations`
    calls, or `warmup_s` seconds; the timed loop `iterations` calls, or `duration_s` seconds
    and at least `min_iterations`."""

    batch_sizes: tuple[int, ...]
    warmup_iterations: int | None = None
    warmup_s: float | None = None
    iterations: int | None = None
    duration_s: float | None = None
    min_iterations: int | None = None
    threads: int | None = None
    data: str
    eval_data: str | None = None
    eval_split: str | None = None
    # How the data was read: the preprocessing of raw pixels (timing and evaluation data) and
    # the evaluation's data and split, each with where it came from.
    data_contract: DataContract | None = None
    trim_fraction: float = stats.TRIM_FRACTION
    cv_warn_percent_cpu: float = stats.CV_WARN_PERCENT_CPU
    cv_warn_percent_gpu: float = stats.CV_WARN_PERCENT_GPU
    device: str  # where artifacts run (bench --device)
    percentile_method: str = "linear"
    # Each batch size's budget is split into `rounds` rounds, the models interleaved round by
    # round; `goal` adds rounds at its batch size until its thresholds are decided.
    rounds: int = 1
    interval_method: str = stats.INTERVAL_METHOD
    goal: SpeedGoal | None = None

    @property
    def warmup(self) -> Budget:
        """The worker's warm-up budget: calls, or seconds (and at least one call)."""
        if self.warmup_s is not None:
            return Budget(seconds=self.warmup_s, min_iterations=1)
        return Budget(iterations=self.warmup_iterations)

    @property
    def measure(self) -> Budget:
        """The worker's timed budget: calls, or seconds and at least `min_iterations`."""
        if self.iterations is not None:
            return Budget(iterations=self.iterations)
        return Budget(seconds=self.duration_s, min_iterations=self.min_iterations or 1)

    @property
    def planned_rounds(self) -> int:
        """The rounds each batch size is timed in (a speed goal may add some at its own)."""
        return len(self.round_budgets())

    def round_budgets(self) -> list[Budget]:
        """The timed budget of each round: `iterations` split as evenly as whole calls allow
        (never more rounds than calls), or `duration_s` and `min_iterations` split `rounds`
        ways (at least one call per round)."""
        if self.iterations is not None:
            count = min(self.rounds, self.iterations)
            share, left = divmod(self.iterations, count)
            return [Budget(iterations=share + (index < left)) for index in range(count)]
        seconds = (self.duration_s or 0.0) / self.rounds
        calls = max(1, -(-(self.min_iterations or 1) // self.rounds))
        return [Budget(seconds=seconds, min_iterations=calls)] * self.rounds


@dataclass(kw_only=True)
class BenchResult(JsonResult):
    """A whole bench run: the document `trtconv bench --json` prints (its fields are the keys).

    `order` lists the labels in measuring order, `models` one ModelInfo each in that order,
    `results` the rows model-major then by batch size; `harness_overhead_ms` is the median of
    the models' and `threads` repeats `settings.threads`. `report` (the written files by kind)
    only with `bench --report`.
    """

    schema_version: int = SCHEMA_VERSION
    baseline: str  # label of the baseline model
    baseline_model: str  # its path
    baseline_reason: str  # why it is the baseline ("the first SavedModel given", ...)
    order: list[str]
    models: list[ModelInfo]
    results: list[BenchRow]
    harness_overhead_ms: float | None
    settings: Settings
    threads: int | None
    warnings: list[str] = field(default_factory=list)
    environment: BenchEnvironment = field(default_factory=BenchEnvironment)
    report: dict[str, str] | None = optional_key()


# Top-level keys of every bench document (`report` only with --report).
TOP_LEVEL_KEYS = tuple(f.name for f in fields(BenchResult) if f.name != "report")
