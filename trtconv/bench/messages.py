"""The bench worker protocol, typed: what the parent sends a worker process and what it replies.

The parent writes a `WorkerSpec` (the model, its data and budgets) to a file and starts
`python -m trtconv.cli.bench_worker SPEC.json`. A single-loop worker prints one `WorkerReport`;
a serving worker (`--serve`) replies `Loaded`, then answers each `Request` line on its stdin
with the round's `RoundSamples`, or `Finished` for the request to finish. Any failure is one
`WorkerFailure`. Every message is one JSON line (`to_json`), read back with `from_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trtconv.core.results import JsonResult
from trtconv.measure.loop_budget import Budget

ROUND, FINISH = "round", "finish"


@dataclass(kw_only=True)
class WorkerSpec(JsonResult):
    """What one worker loads and how it times it: the model and its backend, run options, the
    batch sizes and budgets, the data file (and the evaluation data, with where to write the
    outputs on it), and which data array feeds each model input (`input_map`)."""

    label: str
    backend: str
    model: str
    xla: bool = False
    throughput: bool = False
    threads: int | None = None
    batch_sizes: list[int]
    warmup: Budget
    measure: Budget
    data: str
    eval: str | None = None
    eval_outputs: str | None = None
    input_map: dict[str, str] = field(default_factory=dict)
    signature: str | None = None
    device: str = "auto"
    max_batches: int = 8


@dataclass(kw_only=True)
class Request(JsonResult):
    """A serving worker's request: time one round at `batch_size`, or finish."""

    op: str  # ROUND or FINISH
    batch_size: int = 0
    warmup: Budget = field(default_factory=Budget)
    measure: Budget = field(default_factory=Budget)


@dataclass
class Loaded(JsonResult):
    """What a worker knows once its model is loaded: its process, the load and first-call
    times, the harness's own cost per call, where the model runs."""

    label: str
    pid: int
    load_ms: float
    first_inference_ms: float
    harness_overhead_ms: float
    device: str | None = None


@dataclass
class RoundSamples(JsonResult):
    """The raw samples of one timed loop (a round) at one batch size: every call's latency,
    the loop's wall time, the warm-up calls, and the device copies and compute where the
    runner times them (None where it does not)."""

    batch_size: int
    latencies_ms: list[float]
    wall_ns: int
    warmup_iterations: int
    transfer_ms: list[float] | None = None
    compute_ms: list[float] | None = None


@dataclass
class Finished(JsonResult):
    """A worker's last figures: peak memory of the timed runs, the file of its outputs on the
    evaluation data (None without), and its runner's warnings."""

    peak_rss_mb: float
    gpu_memory_mb: float | None = None
    eval_outputs: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class WorkerReport(JsonResult):
    """One model as its worker measured it: loaded, its rounds (`batches`, in the order they
    ran), finished. Its document is one flat object, as a single-loop worker prints it."""

    loaded: Loaded
    finished: Finished
    batches: list[RoundSamples]

    def to_json(self) -> dict[str, Any]:
        batches = [measured.to_json() for measured in self.batches]
        return {**self.loaded.to_json(), **self.finished.to_json(), "batches": batches}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> WorkerReport:
        batches = [RoundSamples.from_json(measured) for measured in document["batches"]]
        return cls(Loaded.from_json(document), Finished.from_json(document), batches)


@dataclass(frozen=True)
class ErrorInfo:
    """A failure: the trtconv error type's name (or InternalError) and its message."""

    type: str
    message: str


@dataclass
class WorkerFailure(JsonResult):
    """What a worker replies instead when it fails: `{"error": {"type", "message"}}`."""

    error: ErrorInfo
