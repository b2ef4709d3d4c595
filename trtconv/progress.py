"""Step-level progress for long commands: `progress(done, total, label)` between steps.

The CLI passes a callback that draws a bar on a terminal (trtconv.cli._output.progress_bar) and
None elsewhere; api functions and tests pass their own or none.
"""

from __future__ import annotations

from collections.abc import Callable

# progress(steps done, steps planned, what runs now); done == total means finished.
Progress = Callable[[int, int, str], None]


class Steps:
    """Announces each step of a known plan: `start(label)` before it, `finish()` at the end."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress = progress
        self.total = total
        self.done = 0

    def start(self, label: str) -> None:
        """Step `label` starts (the steps before it are done)."""
        if self.progress is not None:
            self.progress(min(self.done, self.total - 1), self.total, label)
        self.done += 1

    def finish(self) -> None:
        """Every step is done."""
        if self.progress is not None:
            self.progress(self.total, self.total, "done")
