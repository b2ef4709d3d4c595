"""What `serve` returns once stopped (typed; its fields are the JSON keys)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trtconv.core.results import JsonResult
from trtconv.measure.server_bench_result import SERVING_SCHEMA_VERSION
from trtconv.serving.server.shadow.check import ShadowResult


@dataclass
class ServeResult(JsonResult):
    """`trtconv serve` once stopped (`--stop-after`, SIGTERM or SIGINT): what it served, what
    timed out in its queue, the batches its dynamic batcher formed ({batch size: count of
    runner calls}) and the admission control it ran with."""

    name: str
    model: str
    backend: str
    precision: str
    http_url: str
    grpc_url: str
    max_batch_size: int
    max_queue_delay_us: int
    requests: int
    failed_requests: int
    batches: dict[str, int]
    served_s: float
    metrics_url: str = ""
    # Requests Triton's queue policy rejected when their queue timeout expired (its REJECTED
    # counter); refusals at a full queue are answered at once and Triton 2.51 counts none.
    timed_out_requests: int = 0
    latency_budget_ms: float | None = None
    max_queue_size: int | None = None  # None: no batcher (a fixed-batch model); 0: no limit
    queue_timeout_ms: float | None = None
    admission_source: str = ""
    warmup_ms: dict[str, float] = field(default_factory=dict)
    stopped_by: str = "stop-after"  # or SIGTERM, SIGINT
    instances: int = 1  # Triton model instances, one runner each
    retried_requests: int = 0  # requests of batches that failed, run again alone
    # requests the native model served once the shadow check failed (--on-failing fallback)
    native_served_requests: int = 0
    shadow: ShadowResult | None = None  # the shadow check (--shadow), its live verdict
    schema_version: int = SERVING_SCHEMA_VERSION
