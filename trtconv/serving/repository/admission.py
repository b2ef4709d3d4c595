"""Admission control: how many requests a served model's queue holds and how long one may wait
in it before Triton answers it UNAVAILABLE (gRPC) / 503 (HTTP) instead of serving it late.

Triton's dynamic batcher enforces both (`default_queue_policy { max_queue_size,
default_timeout_microseconds, timeout_action: REJECT }`): a request that finds the queue full is
refused at once; one still queued when its timeout expires is rejected then. The defaults come
from the latency budget and a measured rate, and say so (`Admission.source`):

- the queue timeout is the budget less one execution of the largest batch: a request that leaves
  the queue later cannot be answered within the budget;
- the queue holds what the measured rate drains within that timeout (at least one largest
  batch): a request beyond it would time out anyway, so it is refused before it waits.

Either figure given as 0 means no limit (Triton's meaning); both 0 mean no queue policy at all.

What a policy costs in Triton 2.51, the server PyTriton 0.7's wheel carries (measured on 2
cores, BENCHMARKS.md): any `default_queue_policy`, a queue size alone included, slows the
dispatch of a burst. 512 one-sample requests of the digits model sent at once: 830-900
requests/s with 296-480 of them timed out, against 3,600-4,800/s all served without a policy.
Under Poisson arrivals it costs nothing measurable (a MobileNetV2-size int8 model's highest rate
within a 20 ms p99: 1,992-2,004 queries/s with it, 1,966-1,979 without), and under overload it
does its job (at 2x capacity the accepted requests' p99 stayed at 44-54 ms against 3.0-3.3 s
without one). So `serve` turns it on only
when asked (`--admission`, or a queue size or timeout given) and measures without it
(`bench --scenario server` searches the served rate with none; `--offered` turns it on);
`deploy` writes it by default, for a Triton whose batcher may not pay this.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trtconv.core.numbers import human

# Without a measured rate (deploy with neither --bench nor --serving), the queue holds this many
# of the largest batches.
UNMEASURED_QUEUE_BATCHES = 8
MIN_TIMEOUT_MS = 1.0


@dataclass(frozen=True)
class Admission:
    """A bounded queue and a per-request queue timeout, and where the figures came from."""

    max_queue_size: int
    timeout_us: int
    source: str

    @property
    def timeout_ms(self) -> float:
        return self.timeout_us / 1000

    @property
    def enabled(self) -> bool:
        """False when neither the queue nor the wait is bounded: no queue policy is written."""
        return self.max_queue_size > 0 or self.timeout_us > 0


# `serve` without --admission: no queue policy, and why.
ADMISSION_OFF = Admission(0, 0, "not asked for: --admission to turn it on")


def admission(
    budget_ms: float,
    max_batch: int,
    batch_ms: float | None = None,
    rate_per_s: float | None = None,
    *,
    measured: str = "",
    queue_size: int | None = None,
    timeout_ms: float | None = None,
) -> Admission:
    """The queue policy for a model batching up to `max_batch`, answering within `budget_ms`.

    `batch_ms`: one execution of the largest batch; `rate_per_s`: the samples/s the model
    serves (default: `max_batch` / `batch_ms`); `measured` says where they were measured.
    `queue_size` / `timeout_ms` given (the flags) win over the derived ones; 0 is no limit.
    """
    if rate_per_s is None and batch_ms:
        rate_per_s = max_batch / (batch_ms / 1000)
    why = []
    if timeout_ms == 0:
        timeout, why_timeout = 0.0, "no queue timeout (given)"
    elif timeout_ms is not None:
        timeout, why_timeout = timeout_ms, f"timeout {human(timeout_ms)} ms (given)"
    elif batch_ms is not None:
        timeout = max(MIN_TIMEOUT_MS, budget_ms - batch_ms)
        why_timeout = (
            f"timeout {human(timeout)} ms = the {human(budget_ms)} ms latency budget less one "
            f"batch-{max_batch} execution ({human(batch_ms)} ms{measured})"
        )
    else:
        timeout = budget_ms
        why_timeout = f"timeout {human(timeout)} ms = the latency budget (no execution measured)"
    why.append(why_timeout)
    if queue_size == 0:
        size, why_size = 0, "no queue limit (given)"
    elif queue_size is not None:
        size, why_size = queue_size, f"queue {queue_size} (given)"
    elif rate_per_s:
        # without a timeout, the budget is how long a queued request can afford to wait
        window = f"the {'timeout' if timeout else 'latency budget'}"
        size = max(max_batch, math.floor(rate_per_s * (timeout or budget_ms) / 1000))
        why_size = f"queue {size} = what {human(rate_per_s)} samples/s{measured} drains in {window}"
    else:
        size = UNMEASURED_QUEUE_BATCHES * max_batch
        why_size = (
            f"queue {size} = {UNMEASURED_QUEUE_BATCHES} batches of {max_batch} (no measured rate)"
        )
    why.append(why_size)
    timeout_us = max(1, round(timeout * 1000)) if timeout else 0
    return Admission(int(size), timeout_us, "; ".join(why))
