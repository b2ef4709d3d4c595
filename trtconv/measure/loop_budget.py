"""How long a timed loop runs: a number of calls, or seconds and at least some calls. The bench
settings give each worker its budgets; the worker's loop asks `done` after every call."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
    """How long a loop runs: `iterations` calls, or `seconds` (and at least `min_iterations`)."""

    iterations: int | None = None
    seconds: float | None = None
    min_iterations: int = 1

    def done(self, calls: int, elapsed_ns: int) -> bool:
        """True when the loop has made enough calls for this budget."""
        if self.iterations is not None:
            return calls >= self.iterations
        seconds = self.seconds or 0.0
        return calls >= self.min_iterations and elapsed_ns >= seconds * 1e9
