"""`trtconv bench --scenario server|single-stream|offline`'s options: a served model driven by
MLPerf LoadGen."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trtconv.core.errors import UsageError
from trtconv.options.serve import OnFailing, check_shadow
from trtconv.options.serving import DEFAULT_MAX_BATCH_SIZE, DEFAULT_QUEUE_DELAY_US
from trtconv.options.shared import check_positive

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
        check_shadow(self.shadow, OnFailing.WARN, None)
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
