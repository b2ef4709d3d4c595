"""Step-level progress for long commands: `progress(done, total, label)` between steps.

The CLI passes a callback that draws a bar on a terminal (trtconv.cli._output.progress_bar) and
None elsewhere; api functions and tests pass their own or none.
"""

from __future__ import annotations

from collections.abc import Callable

# progress(steps done, steps planned, what runs now); done == total means finished.
Progress = Callable[[int, int, str], None]


class Steps:
    """Announces each step of a known plan: `start(label)` before it, `finish()` at the end;
    `within()` lets a step report its own sub-steps (the int8 ladder's) under its label."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress = progress
        self.total = total
        self.done = 0
        self.index = 0  # the current step's place
        self.label = ""

    def start(self, label: str) -> None:
        """Step `label` starts (the steps before it are done)."""
        self.index, self.label = min(self.done, self.total - 1), label
        if self.progress is not None:
            self.progress(self.index, self.total, label)
        self.done += 1

    def within(self) -> Progress | None:
        """A progress callback for the current step's own sub-steps: each shows as
        "STEP: LABEL (k/n)" at the current step's place; None when nobody listens."""
        if self.progress is None:
            return None
        outer, step, index = self.progress, self.label, self.index

        def report(done: int, total: int, label: str) -> None:
            count = f" ({done + 1}/{total})" if done < total else ""
            outer(index, self.total, f"{step}: {label}{count}")

        return report

    def finish(self) -> None:
        """Every step is done."""
        if self.progress is not None:
            self.progress(self.total, self.total, "done")
