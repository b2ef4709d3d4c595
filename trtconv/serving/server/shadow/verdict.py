"""The live verdict: per output and figure, the running share of the compared samples that
agree (or lie within tolerance) with its interval, three-valued against the manifest's bound.

A figure is *holding* while its interval lies above the bound, *failing* once it lies below,
*undecided* while it straddles it (with about how many more samples would decide it at the rate
seen). The rule is validation's (trtconv.outputs.confidence: Wilson intervals, `Rate.decide`),
with one difference a stream needs: a rate is decided only once it counts the samples that could
show its bound at all (`samples_to_show`: 124 for 0.97 at 95%). A validation decides once; a live
verdict is looked at after every batch, and on its first few samples one disagreement puts the
interval below the bound: simulated streams of a good artifact (true agreement 0.99, bound 0.97,
decided after every sample) turned failing at some point 6.1% of the time, 0.05% with the floor
(docs/serving.md). A figure decided by values (fp32, tf32: every element of every sample
within atol) fails at the first sample outside and holds once enough samples lie within to show
the rule (trtconv.outputs.exact). Counts run from the server's start: a shift after a long good
run shows later than on a fresh server (docs/serving.md says so). Pure numpy and scipy: the
shadow's worker feeds it counts (judge.py), the metrics page and the summary read snapshots.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from trtconv.core.results import JsonResult
from trtconv.outputs.confidence import (
    CI95,
    FAILED,
    PASSED,
    Interval,
    Rate,
    interval_text,
    percent,
    samples_needed,
    samples_to_show,
)
from trtconv.outputs.exact import samples_for_values

HOLDING, FAILING, UNDECIDED = "holding", "failing", "undecided"
STATES = (HOLDING, FAILING, UNDECIDED)
# The figure a values rule counts: the samples every element of which lies within atol.
VALUES_FIGURE = "samples within atol"


@dataclass(frozen=True)
class Count:
    """One figure of one output on some samples: `successes` of `samples` (a class map's
    per-sample shares summed: fractional), judged against `minimum` (None: the values rule,
    every sample within)."""

    output: str
    figure: str
    minimum: float | None
    successes: float
    samples: int

    @property
    def key(self) -> tuple[str, str]:
        return self.output, self.figure

    @property
    def all_within(self) -> bool:
        """Every sample counted agreed (or lay within)."""
        return self.successes >= self.samples - 1e-9


@dataclass(frozen=True)
class FigureVerdict(JsonResult):
    """A figure's live verdict: the counts, the share and its 95% interval, the bound, the state,
    the samples more that would decide it (undecided only; None when no count would), the
    samples compared when its state last changed, and the samples it counts before its
    interval decides it (`samples_floor`: the fewest that could show its bound; the values
    rule's: those that show it holding)."""

    output: str
    figure: str
    successes: float
    samples: int
    share: float
    share_ci95: Interval | None
    minimum: float | None
    state: str
    samples_needed: int | None
    changed_at_samples: int
    samples_floor: int = 0

    def line(self, confidence: float) -> str:
        """What a change of state says: 'shadow: probabilities top-1 agreement failing: 0.812
        (0.745-0.865, n=160; minimum 0.97)'."""
        bound = "every sample within" if self.minimum is None else f"minimum {self.minimum:g}"
        level = "" if confidence == CI95 else f"decided at {percent(confidence)}; "
        figure = interval_text(self.share, self.share_ci95, self.samples, note=level + bound)
        said = f"shadow: {self.output} {self.figure} {self.state}: {figure}"
        if self.state == UNDECIDED and self.samples_needed is not None:
            said += f"; about {self.samples_needed} more samples would decide it"
        return said


class LiveFigure:
    """The running counts of one figure and the state they were last decided at."""

    def __init__(
        self, output: str, figure: str, minimum: float | None, confidence: float = CI95
    ) -> None:
        self.output, self.figure, self.minimum = output, figure, minimum
        self.successes, self.samples = 0.0, 0
        self.state, self.changed_at = UNDECIDED, 0
        # Decided from the samples that could show the bound held at all (all agreeing): before
        # them one disagreement among the first few would fail it (see the module's docstring).
        shown = samples_to_show(minimum, confidence) if minimum is not None else None
        self.least = shown or 0

    def add(self, count: Count, confidence: float) -> bool:
        """Add `count`; True when the state changed."""
        self.successes += count.successes
        self.samples += count.samples
        state = self.decide(confidence)
        changed = state != self.state
        if changed:
            self.state, self.changed_at = state, self.samples
        return changed

    @property
    def rate(self) -> Rate:
        whole = abs(self.successes - round(self.successes)) < 1e-9
        return Rate(round(self.successes) if whole else self.successes, self.samples)

    def decide(self, confidence: float) -> str:
        """HOLDING, FAILING or UNDECIDED on the counts so far."""
        if not self.samples:
            return UNDECIDED
        if self.minimum is None:  # the values rule
            if self.successes < self.samples:
                return FAILING
            return HOLDING if self.samples >= samples_for_values(confidence) else UNDECIDED
        if self.samples < self.least:
            return UNDECIDED
        decided = self.rate.decide(self.minimum, confidence)
        return HOLDING if decided == PASSED else FAILING if decided == FAILED else UNDECIDED

    def needed(self, confidence: float) -> int | None:
        """About how many more samples would decide an undecided figure at the rate seen."""
        if self.state != UNDECIDED:
            return 0
        if self.minimum is None:
            return max(0, samples_for_values(confidence) - self.samples)
        value = self.rate.value if self.samples else 1.0
        total = samples_needed(value, self.minimum, confidence)
        return None if total is None else max(1, total - self.samples, self.least - self.samples)

    def verdict(self, confidence: float) -> FigureVerdict:
        rate = self.rate
        return FigureVerdict(
            output=self.output,
            figure=self.figure,
            successes=round(self.successes, 6),
            samples=self.samples,
            share=rate.value if self.samples else 0.0,
            share_ci95=rate.interval(),
            minimum=self.minimum,
            state=self.state,
            samples_needed=self.needed(confidence),
            changed_at_samples=self.changed_at,
            samples_floor=self.least
            if self.minimum is not None
            else samples_for_values(confidence),
        )


def overall(states: Iterable[str]) -> str:
    """FAILING when a figure fails, UNDECIDED when one is undecided (or none is known yet),
    else HOLDING."""
    found = set(states)
    if FAILING in found:
        return FAILING
    return HOLDING if found == {HOLDING} else UNDECIDED


class LiveVerdict:
    """The live verdict over every figure the compared samples were counted on, decided at
    `confidence`; `add` returns the lines of the figures whose state changed."""

    def __init__(self, confidence: float) -> None:
        self.confidence = confidence
        self.figures: dict[tuple[str, str], LiveFigure] = {}

    def add(self, counts: Iterable[Count]) -> list[str]:
        lines = []
        for count in counts:
            figure = self.figures.get(count.key)
            if figure is None:
                figure = LiveFigure(count.output, count.figure, count.minimum, self.confidence)
                self.figures[count.key] = figure
            if figure.add(count, self.confidence):
                lines.append(figure.verdict(self.confidence).line(self.confidence))
        return lines

    @property
    def state(self) -> str:
        return overall(figure.state for figure in self.figures.values())

    def snapshot(self) -> list[FigureVerdict]:
        """Every figure's verdict now, by output and figure."""
        return [self.figures[key].verdict(self.confidence) for key in sorted(self.figures)]
