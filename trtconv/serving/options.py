"""The options of `trtconv deploy` and `trtconv serve`, and the batching defaults they share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trtconv.core.errors import UsageError

# Dynamic batching without a measurement: batches up to 8, preferring 4 and 8, and a request
# waits at most 100 µs for others to join it (short next to a small model's own latency).
DEFAULT_MAX_BATCH_SIZE = 8
DEFAULT_PREFERRED_BATCH_SIZES = (4, 8)
DEFAULT_QUEUE_DELAY_US = 100
LOOPBACK = "127.0.0.1"


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(Path(m) for m in self.models))
        object.__setattr__(self, "output", Path(self.output))
        if not self.models:
            raise UsageError("Give at least one artifact or SavedModel to deploy.")
        check_positive("--instances", self.instances)
        if self.threads is not None:
            check_positive("--threads", self.threads)


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", Path(self.model))
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


def check_positive(flag: str, value: int) -> None:
    if value < 1:
        raise UsageError(f"{flag} must be at least 1, found {value}.")


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "models", tuple(Path(m) for m in self.models))
        if not self.models:
            raise UsageError("Give at least one model to bench.")
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
