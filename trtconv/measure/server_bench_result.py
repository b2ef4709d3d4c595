"""What a served model's load runs measure (typed; their fields are the JSON keys):
`bench --scenario server` (the rate search's runs, its rows, the overload runs) and
`--scenario single-stream|offline`. `deploy` reads a server bench back for its batching figures,
which is why these types sit below serving (in measure/), with the serving documents' schema
version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trtconv.core.results import JsonResult
from trtconv.facts.environment import Environment

SERVING_SCHEMA_VERSION = 1


@dataclass
class LoadRun(JsonResult):
    """One LoadGen Server run at a target rate: what it achieved and its verdicts."""

    target_qps: float
    completed_qps: float
    latency_ms_p50: float
    latency_ms_p90: float
    latency_ms_p99: float
    meets_budget: bool  # p99 within the latency budget
    loadgen_result: str  # VALID or INVALID, LoadGen's own verdict
    loadgen_reasons: list[str]  # its unmet constraints ("Min duration satisfied : NO", ...)
    queries: int
    errors: int
    # The p99's 95% interval over this run's query latencies (see latency.p99_interval):
    # [low, high]; high None when too few queries bound it from above; None: no latencies.
    latency_ms_p99_ci95: list[float | None] | None = None


@dataclass
class ServerRow(JsonResult):
    """One model served one way: the highest rate found whose p99 meets the budget."""

    model: str
    label: str
    backend: str
    precision: str
    dynamic_batching: bool
    max_batch_size: int
    max_queue_delay_us: int
    # completed queries/s of the fastest run that surely met the budget (its p99 interval within
    # it), else of the fastest whose point p99 met it; 0: none did (rate_search.headline_run)
    qps_at_budget: float
    latency_ms_p50: float | None
    latency_ms_p90: float | None
    latency_ms_p99: float | None
    loadgen_result: str | None  # of that run
    loadgen_reasons: list[str]
    batches: dict[str, int]  # batch size -> executions, over all runs (Triton's statistics)
    runs: list[LoadRun]
    latency_ms_p99_ci95: list[float | None] | None = None  # of the reported run
    # [the highest completed rate whose p99 interval lies within the budget, the lowest whose
    # interval lies wholly above it]; None ends: no run decided that side (min_qps_at_budget).
    qps_at_budget_bounds: list[float | None] = field(default_factory=lambda: [None, None])
    shadow_rate: float | None = None  # served with its shadow check at this rate (--shadow)


@dataclass
class OfferedRun(JsonResult):
    """One open-loop run at `offered_qps` (serving/load/overload.py): how its requests were
    answered."""

    offered_qps: float
    sent: int
    served: int
    refused: int  # queue full: answered UNAVAILABLE at once
    timed_out: int  # still queued at the queue timeout: answered UNAVAILABLE then
    refused_share: float
    timed_out_share: float
    errors: int  # anything else (unanswered by the end included)
    goodput_qps: float  # served within the budget, per second of the run
    latency_ms_p50: float | None  # of the served requests
    latency_ms_p99: float | None
    refused_latency_ms_p99: float | None  # how fast a refusal came back
    run_s: float
    multiple: float | None = None  # offered_qps over the measured capacity
    # The served requests' mean time in the server (queue and compute, Triton's statistics).
    server_latency_ms_mean: float | None = None


@dataclass
class OverloadRow(JsonResult):
    """`bench --scenario server --offered`: one model's capacity (served requests/s with a
    closed loop of requests in flight) and a run at each multiple of it."""

    model: str
    label: str
    capacity_qps: float
    max_queue_size: int | None
    queue_timeout_ms: float | None
    runs: list[OfferedRun]


@dataclass
class ServerBenchResult(JsonResult):
    """`trtconv bench --scenario server`: per model (and batching), queries/s at the budget."""

    scenario: str
    latency_budget_ms: float
    run_s: float
    rows: list[ServerRow]
    # qps_at_budget over the first model's (the baseline's), same batching: {label: ratio}.
    ratios_vs_baseline: dict[str, float | None]
    # qps_at_budget with dynamic batching over batch-1 serving, per model (compare_batching).
    batching_gain: dict[str, float | None]
    notes: list[str]
    environment: Environment = field(default_factory=Environment)
    # --offered: each model's goodput, latency and refusals at multiples of its capacity.
    overload: list[OverloadRow] = field(default_factory=list)
    schema_version: int = SERVING_SCHEMA_VERSION


@dataclass
class ScenarioRow(JsonResult):
    """One model under LoadGen's SingleStream (one query at a time, the next when it is
    answered) or Offline (every sample at once) scenario: one run of the asked length."""

    model: str
    label: str
    backend: str
    precision: str
    completed_qps: float  # SingleStream: queries/s with LoadGen's overhead; Offline: samples/s
    latency_ms_p50: float
    latency_ms_p90: float
    latency_ms_p99: float
    latency_ms_p99_ci95: list[float | None] | None
    early_stopping: list[str]  # LoadGen's early-stopping lines (SingleStream's estimates)
    loadgen_result: str
    loadgen_reasons: list[str]
    queries: int
    errors: int
    batches: dict[str, int]


@dataclass
class ScenarioBenchResult(JsonResult):
    """`trtconv bench --scenario single-stream|offline`: per model, one LoadGen run."""

    scenario: str
    run_s: float
    rows: list[ScenarioRow]
    ratios_vs_baseline: dict[str, float | None]  # completed_qps over the first model's
    notes: list[str]
    environment: Environment = field(default_factory=Environment)
    schema_version: int = SERVING_SCHEMA_VERSION
