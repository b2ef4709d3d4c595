"""What `deploy`, `serve` and the benches of a served model share: dynamic batching's defaults,
where the server listens, and admission control's budget and its check."""

from __future__ import annotations

from trtconv.core.errors import UsageError

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


def check_admission(budget_ms: float, queue_size: int | None, timeout_ms: float | None) -> None:
    """Raise UsageError for a budget that is not positive, or a queue size or timeout below 0
    (0: no limit, Triton's own meaning)."""
    if budget_ms <= 0:
        raise UsageError(f"--latency-budget-ms must be positive, found {budget_ms}.")
    if queue_size is not None and queue_size < 0:
        raise UsageError(f"--max-queue-size must be 0 (no limit) or more, found {queue_size}.")
    if timeout_ms is not None and timeout_ms < 0:
        raise UsageError(f"--queue-timeout-ms must be 0 (no timeout) or more, found {timeout_ms}.")
