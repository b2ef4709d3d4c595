"""The bench result document: one flat row per model × batch size, and the keys around them.

Keys are snake_case and carry their unit (DESIGN.md, "Result JSON"). Bump SCHEMA_VERSION when a
key changes meaning or disappears; adding a key does not need a bump.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

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
    accuracy: float | None = None
    top1_agreement: float | None = None
    eval_samples: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """This model as a JSON-ready dict (an entry of `models`)."""
        return asdict(self)


@dataclass
class BenchRow:
    """One model at one batch size: every figure a table row, a CSV line or a gate needs."""

    model: str
    label: str
    backend: str
    precision: str
    xla: bool
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
    speedup_vs_baseline: float | None
    transfer_ms_mean: float | None  # host<->device copies, where the runner reports them
    first_inference_ms: float
    load_ms: float
    peak_rss_mb: float
    gpu_memory_mb: float | None
    accuracy: float | None
    top1_agreement: float | None
    harness_overhead_ms: float
    harness_overhead_percent: float  # of latency_ms_p50
    worker_pid: int
    threads: int | None

    def to_dict(self) -> dict[str, Any]:
        """This row as a JSON-ready dict (an entry of `results`)."""
        return asdict(self)


ROW_KEYS = tuple(f.name for f in fields(BenchRow))
MODEL_KEYS = tuple(f.name for f in fields(ModelInfo))
