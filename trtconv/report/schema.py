"""The bench result document: one flat row per model × batch size, and the keys around them.

Keys are snake_case and carry their unit (DESIGN.md, "Result JSON"). Bump SCHEMA_VERSION when a
key changes meaning or disappears; adding a key does not need a bump.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

import trtconv.bench.stats as stats

SCHEMA_VERSION = 1

# Top-level keys of the document `trtconv bench --json` prints and `api.bench` returns.
TOP_LEVEL_KEYS = (
    "schema_version",
    "baseline",  # label of the baseline model
    "baseline_model",  # its path
    "baseline_reason",  # why it is the baseline ("the first SavedModel given", ...)
    "order",  # labels, in the order the models were measured
    "models",  # one ModelInfo per model, in `order`
    "results",  # BenchRow dicts, model-major then batch size
    "harness_overhead_ms",
    "settings",
    "threads",
    "warnings",
    "environment",
)


@dataclass
class ModelInfo:
    """One model as measured: where it came from and the worker process that measured it."""

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

    def to_dict(self) -> dict[str, Any]:
        """This model as a JSON-ready dict (an entry of `models`)."""
        return asdict(self)


@dataclass
class BenchRow:
    """One model at one batch size, as measured. The model-wide figures (load time, peak RSS,
    harness overhead, worker) and the comparisons (`is_baseline`, `accuracy`,
    `top1_agreement`, `speedup_vs_baseline`) come from its `info` and its result when the row
    is serialised: each is stored once."""

    info: ModelInfo
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
    transfer_ms_mean: float | None  # host<->device copies, where the runner reports them
    threads: int | None
    # Device compute alone, timed with CUDA events (trtexec's "GPU Compute Time"), where the
    # runner reports it; its CV is what the 1% GPU stability rule reads.
    compute_ms_mean: float | None = None
    compute_cv_percent: float | None = None

    @property
    def harness_overhead_percent(self) -> float:
        """The harness's own cost per call, in percent of this row's p50 latency."""
        overhead, p50 = self.info.harness_overhead_ms or 0.0, self.latency_ms_p50
        return overhead / p50 * 100 if p50 > 0 else 0.0

    def to_dict(self, speedup: float | None) -> dict[str, Any]:
        """This row as an entry of `results`, in ROW_KEYS order."""
        info = asdict(self.info)
        measured = {k: v for k, v in asdict(self).items() if k != "info"}
        data = {
            **info,
            **measured,
            "speedup_vs_baseline": speedup,
            "harness_overhead_percent": self.harness_overhead_percent,
        }
        return {key: data[key] for key in ROW_KEYS}


# The keys of one `results` row, in the order of CSV columns.
ROW_KEYS = (
    "model", "label", "backend", "precision", "xla", "throughput_mode", "is_baseline",
    "batch_size", "iterations",
    "warmup_iterations", "timed_s", "latency_ms_min", "latency_ms_mean",
    "latency_ms_trimmed_mean", "latency_ms_p50", "latency_ms_p90", "latency_ms_p95",
    "latency_ms_p99", "latency_ms_max", "latency_ms_std", "cv_percent", "cv_trimmed_percent",
    "throughput_per_s", "speedup_vs_baseline", "transfer_ms_mean", "compute_ms_mean",
    "compute_cv_percent", "first_inference_ms", "load_ms", "peak_rss_mb", "gpu_memory_mb",
    "accuracy", "top1_agreement", "validation", "harness_overhead_ms",
    "harness_overhead_percent", "worker_pid", "threads", "device",
)  # fmt: skip
MODEL_KEYS = tuple(f.name for f in fields(ModelInfo))


@dataclass
class Settings:
    """How each model is measured; `warmup`/`measure` are worker Budget dicts."""

    batch_sizes: tuple[int, ...]
    warmup: dict[str, Any]
    measure: dict[str, Any]
    threads: int | None
    data: str
    eval_data: str | None
    device: str = "auto"  # where artifacts run (bench --device)
    # How the data was read: the preprocessing of raw pixels (timing and evaluation data) and
    # the evaluation's data and split, each with where it came from.
    data_contract: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The `settings` block of the result document."""
        return {
            "batch_sizes": list(self.batch_sizes),
            "warmup_iterations": self.warmup.get("iterations"),
            "warmup_s": self.warmup.get("seconds"),
            "iterations": self.measure.get("iterations"),
            "duration_s": self.measure.get("seconds"),
            "min_iterations": self.measure.get("min_iterations"),
            "threads": self.threads,
            "data": self.data,
            "eval_data": self.eval_data,
            "eval_split": (self.data_contract or {}).get("split"),
            "data_contract": self.data_contract,
            "trim_fraction": stats.TRIM_FRACTION,
            "cv_warn_percent_cpu": stats.CV_WARN_PERCENT_CPU,
            "cv_warn_percent_gpu": stats.CV_WARN_PERCENT_GPU,
            "device": self.device,
            "percentile_method": "linear",
        }


@dataclass
class BenchResult:
    """A whole bench run: models in measuring order, their rows, and what was said about them."""

    baseline: str
    baseline_model: str
    baseline_reason: str
    models: list[ModelInfo]
    rows: list[BenchRow]
    settings: Settings
    warnings: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)

    @property
    def harness_overhead_ms(self) -> float | None:
        """The median of the models' harness overheads."""
        overheads = [
            m.harness_overhead_ms for m in self.models if m.harness_overhead_ms is not None
        ]
        return float(np.median(overheads)) if overheads else None

    def speedup(self, row: BenchRow) -> float | None:
        """`row`'s throughput over the baseline's at the same batch size."""
        base = next(
            (r for r in self.rows if r.info.is_baseline and r.batch_size == row.batch_size), None
        )
        return stats.speedup(row.throughput_per_s, base.throughput_per_s if base else None)

    def to_dict(self) -> dict[str, Any]:
        """The document `trtconv bench --json` prints (TOP_LEVEL_KEYS)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "baseline": self.baseline,
            "baseline_model": self.baseline_model,
            "baseline_reason": self.baseline_reason,
            "order": [model.label for model in self.models],
            "models": [model.to_dict() for model in self.models],
            "results": [row.to_dict(self.speedup(row)) for row in self.rows],
            "harness_overhead_ms": self.harness_overhead_ms,
            "settings": self.settings.to_dict(),
            "threads": self.settings.threads,
            "warnings": list(self.warnings),
            "environment": self.environment,
        }
