"""`--backend best`: which candidate wins, and why each of the others lost (pure; no I/O).

Every (backend, precision) a machine could run is a candidate. A candidate is out before timing
when its backend cannot run that precision here ("not available"), its conversion fails
("conversion failed"), its validation misses the accuracy budget ("failed validation") or the
data cannot show either ("inconclusive validation": more samples would decide it). The
rest are timed in the same harness, at the same batch size, and the highest throughput wins; the
others are "slower", each with its ratio to the winner. When the winner's and the runner-up's
throughput intervals (95%, over the bench's interleaved rounds) overlap, the winner's reason and
the table's `within_noise_of` say so: another run could have crowned the runner-up. The table, in
this order, is the result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trtconv.core.results import JsonResult

WINNER = "winner"
SLOWER = "slower"
NOT_AVAILABLE = "not available"
CONVERSION_FAILED = "conversion failed"
FAILED_VALIDATION = "failed validation"
INCONCLUSIVE_VALIDATION = "inconclusive validation"  # not failed: more samples would decide it
NOT_TIMED = "not timed"
# A candidate's run mode: "" (the backend's default) or its throughput mode (RunOptions).
THROUGHPUT = "throughput"
VERDICTS = (
    WINNER,
    SLOWER,
    INCONCLUSIVE_VALIDATION,
    FAILED_VALIDATION,
    CONVERSION_FAILED,
    NOT_TIMED,
    NOT_AVAILABLE,
)


@dataclass
class Entrant(JsonResult):
    """One (backend, precision): how far it got, its validation and timing, and the verdict.

    `verdict` is set when the candidate drops out (with `reason`), or by `decide` for the timed.
    """

    backend: str
    precision: str
    mode: str = ""
    verdict: str = ""
    reason: str = ""
    fix: str = ""  # not available: what would make it available
    artifact: str | None = None  # the winner's: the output directory
    conversion_seconds: float | None = None
    top1_agreement: float | None = None
    max_abs_error: float | None = None
    throughput_per_s: float | None = None
    throughput_per_s_ci95: list[float] | None = None  # 95% interval over the bench's rounds
    latency_ms_p50: float | None = None
    speedup_vs_native: float | None = None
    relative_throughput: float | None = None  # throughput / the winner's

    @property
    def name(self) -> str:
        """'BACKEND PRECISION', with '+MODE' for a non-default run mode."""
        return f"{self.backend} {self.precision}" + (f" +{self.mode}" if self.mode else "")

    @property
    def label(self) -> str:
        """The candidate's folder and bench label: BACKEND-PRECISION (its mode shares them)."""
        return f"{self.backend}-{self.precision}"

    @property
    def timed(self) -> bool:
        return self.verdict == "" and self.throughput_per_s is not None

    def drop(self, verdict: str, reason: str, fix: str = "") -> None:
        """Take the candidate out of the running with `verdict`, a one-line `reason` and, when
        it is not available here, the `fix`."""
        self.verdict, self.reason, self.fix = verdict, reason, fix

    def to_json(self) -> dict[str, Any]:
        """A row of the tournament table: its name, then its fields."""
        return {"name": self.name, **super().to_json()}


@dataclass
class TournamentTable(JsonResult):
    """The tournament block of `convert --backend best`'s result (and of the winner's manifest):
    the rules (batch size, each candidate's timing budget), the winner, the runner-up within
    noise of it, and every candidate in table order (`ordered`)."""

    batch_size: int
    duration_s: float | None = None
    iterations: int | None = None
    threads: int | None = None
    rule: str = "fastest (samples/s at batch_size) of those that passed validation"
    winner: str | None = None
    within_noise_of: str | None = None
    candidates: list[Entrant] = field(default_factory=list)

    def timing_text(self) -> str:
        """How long each candidate was timed: 'N calls' or 'S s'."""
        if self.iterations:
            return f"{self.iterations} calls"
        return f"{self.duration_s:g} s"

    def verdicts(self) -> set[str]:
        """Every candidate's verdict."""
        return {candidate.verdict for candidate in self.candidates}


def decide(candidates: list[Entrant], batch_size: int) -> Entrant | None:
    """Pick the fastest timed candidate; give every candidate its verdict and reason.

    Candidates still in the running but without a timing (the bench failed for them) become
    "not timed". Returns the winner, or None when no candidate passed. Ties go to the earlier
    candidate (the registry's order).
    """
    for candidate in candidates:
        if candidate.verdict == "" and candidate.throughput_per_s is None:
            candidate.drop(NOT_TIMED, candidate.reason or "the benchmark did not time it")
    timed = [c for c in candidates if c.timed]
    if not timed:
        return None
    winner = max(timed, key=lambda c: c.throughput_per_s or 0.0)
    best = winner.throughput_per_s or 0.0
    for candidate in timed:
        speed = candidate.throughput_per_s or 0.0
        candidate.relative_throughput = round(speed / best, 4) if best else None
        if candidate is winner:
            candidate.verdict = WINNER
            candidate.reason = (
                f"fastest that passed validation: {speed:,.1f} samples/s at batch {batch_size}"
            )
            rival = runner_up_within_noise(timed, winner)
            if rival is not None:
                candidate.reason += f"; {noise_text(winner, rival)}"
        else:
            candidate.verdict = SLOWER
            candidate.reason = (
                f"slower: {speed:,.1f} vs {best:,.1f} samples/s at batch {batch_size} "
                f"({speed / best:.2f}x the winner)"
            )
    return winner


def runner_up_within_noise(timed: list[Entrant], winner: Entrant) -> Entrant | None:
    """The fastest timed candidate after `winner` when their throughput intervals overlap
    (within noise: the order could flip on another run); None otherwise or without intervals."""
    others = [c for c in timed if c is not winner]
    if not others or winner.throughput_per_s_ci95 is None:
        return None
    rival = max(others, key=lambda c: c.throughput_per_s or 0.0)
    if rival.throughput_per_s_ci95 is None:
        return None
    return rival if rival.throughput_per_s_ci95[1] >= winner.throughput_per_s_ci95[0] else None


def noise_text(winner: Entrant, rival: Entrant) -> str:
    """'within noise of NAME (throughput 95% intervals A-B and C-D samples/s overlap)'."""
    mine, theirs = winner.throughput_per_s_ci95 or [], rival.throughput_per_s_ci95 or []
    return (
        f"within noise of {rival.name} (throughput 95% intervals {mine[0]:,.1f}-{mine[1]:,.1f} "
        f"and {theirs[0]:,.1f}-{theirs[1]:,.1f} samples/s overlap)"
    )


def ordered(candidates: list[Entrant]) -> list[Entrant]:
    """The table's order: winner, the slower by speed, then the rest by verdict (stable)."""

    def key(candidate: Entrant) -> tuple[int, float]:
        return VERDICTS.index(candidate.verdict), -(candidate.throughput_per_s or 0.0)

    return sorted(candidates, key=key)


def absent_groups(rows: list[Entrant]) -> list[tuple[str, str, str]]:
    """The "not available" rows of a tournament block, one (names, reason, fix) per distinct
    reason: 'tftrt fp32, tftrt int8' say their shared reason once."""
    groups: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        if row.verdict == NOT_AVAILABLE:
            groups.setdefault((row.reason, row.fix), []).append(row.name)
    return [(", ".join(names), reason, fix) for (reason, fix), names in groups.items()]
