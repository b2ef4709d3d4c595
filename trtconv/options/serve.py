"""`trtconv serve`'s options: the server, admission control and the shadow check."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trtconv.core.choices import Choice
from trtconv.core.errors import UsageError
from trtconv.options.serving import (
    DEFAULT_LATENCY_BUDGET_MS,
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_QUEUE_DELAY_US,
    LOOPBACK,
    check_admission,
)
from trtconv.options.shared import check_positive

# serve: how long a stop (SIGINT/SIGTERM) waits for the requests in flight, after not-ready.
DEFAULT_DRAIN_TIMEOUT_S = 10.0


class OnFailing(Choice):
    """What `serve --shadow` does once its live verdict is failing: say so, or serve the native
    model."""

    WARN = "warn"
    FALLBACK = "fallback"


def check_shadow(rate: float | None, on_failing: OnFailing, capture: Path | None) -> None:
    """Raise UsageError for a shadow rate outside (0, 1], or a fallback or capture asked for
    without a shadow check."""
    if rate is None:
        if on_failing != OnFailing.WARN:
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
    on_failing: OnFailing = OnFailing.WARN
    shadow_capture: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", Path(self.model))
        object.__setattr__(self, "on_failing", OnFailing.parse("--on-failing", self.on_failing))
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
