"""The int8 ladder's time limit, held over the whole search.

Checking the limit only before a step lets the last step run past it by its own length (a strict
ladder ran 631 s against its 600 s). Here a step starts only when the time spent so far, plus
what the step is expected to take, plus what must follow it (the speed timing) fits the limit.
A step's cost is estimated from the steps of its kind so far (the longest of them); a kind that
has not run yet is estimated by the cheapest step of any kind, so the ladder never stops on a
guess larger than anything it measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable

# Kinds of steps, whose costs differ: a new calibration (the first step, another calibration
# method), a re-quantisation from a cached calibration scored on the whole slice (other weights,
# layers in float), a one-node probe scored on a few samples.
CALIBRATE, REQUANTIZE, PROBE = "calibrate", "requantize", "probe"


class TimeLimit:
    """`limit_s` seconds from `started` (default: now) for the search, of which `reserve_s` are
    kept for what must follow it."""

    def __init__(
        self, limit_s: float, reserve_s: float = 0.0, started: float | None = None
    ) -> None:
        self.limit_s = limit_s
        self.reserve_s = reserve_s
        # The conversion's start (time.perf_counter), when the limit counts from it; else now.
        self.started = time.perf_counter() if started is None else started
        self.costs: dict[str, list[float]] = {}

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def record(self, kind: str, seconds: float) -> None:
        """A step of `kind` took `seconds`."""
        self.costs.setdefault(kind, []).append(seconds)

    def estimate(self, kind: str) -> float:
        """What the next step of `kind` should take: the longest of its kind so far, else the
        cheapest step of any kind, else nothing."""
        if self.costs.get(kind):
            return max(self.costs[kind])
        measured = [cost for costs in self.costs.values() for cost in costs]
        return min(measured) if measured else 0.0

    def affords(self, kind: str) -> bool:
        """Whether a step of `kind` started now should end within the limit (less the
        reserve)."""
        return self.elapsed() + self.estimate(kind) + self.reserve_s <= self.limit_s

    def steps_of(self, kind: str) -> Callable[[], bool]:
        """An `out_of_time()` for a loop of steps of `kind` that checks before each one: the time
        between two calls is the cost of the step between them."""
        last: list[float] = []

        def out_of_time() -> bool:
            now = time.perf_counter()
            if last:
                self.record(kind, now - last[0])
            last[:] = [now]
            return not self.affords(kind)

        return out_of_time
