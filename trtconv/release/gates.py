"""Gates and the recommendation: pure functions over measured values (no I/O, no timing).

Every gate reports its measured value, its threshold and pass/fail. A value that could not be
measured (no labels for accuracy, no bench row) fails its gate: a release never passes on a
number it does not have.
"""

from __future__ import annotations

from dataclasses import dataclass

from trtconv.bench import stats
from trtconv.release.config import GateSettings

# Among equally fast targets prefer the lower precision (issue 5's precision ladder).
PRECISION_LADDER = ("int8", "fp16", "bf16", "tf32", "fp32")


@dataclass(frozen=True)
class Measures:
    """What a target's gates are judged on; None: not measured."""

    validation_passed: bool | None = None
    validation_verdict: str | None = None  # "failed" or "not judged" when it did not pass
    accuracy_drop: float | None = None
    top1_agreement: float | None = None
    speedup_vs_baseline: float | None = None
    latency_ms_p99: float | None = None
    throughput_per_s: float | None = None
    # The bench's 95% intervals over its interleaved rounds (None: a single round, or a bench
    # recorded before intervals) and how many rounds they rest on.
    speedup_vs_baseline_ci95: tuple[float, float] | None = None
    latency_ms_p99_ci95: tuple[float, float] | None = None
    rounds: int | None = None


@dataclass(frozen=True)
class GateResult:
    """One gate applied to one target. `verdict` is "passed", "failed" or, for a speed gate
    whose interval straddles the threshold, "inconclusive" (then `passed` is False too);
    `measured_ci95` is the interval a speed gate was judged on."""

    name: str
    comparison: str  # "<=", ">=" or "=="
    threshold: float | bool
    measured: float | bool | None
    passed: bool
    detail: str
    verdict: str = ""  # "" at construction: from `passed`
    measured_ci95: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if not self.verdict:
            object.__setattr__(self, "verdict", stats.PASSED if self.passed else stats.FAILED)


def _numeric_gate(
    name: str, comparison: str, threshold: float, measured: float | None, what: str
) -> GateResult:
    if measured is None:
        return GateResult(name, comparison, threshold, None, False, f"{what} was not measured")
    passed = measured <= threshold if comparison == "<=" else measured >= threshold
    detail = f"{what} {measured:.6g} {'meets' if passed else 'misses'} {comparison} {threshold:g}"
    return GateResult(name, comparison, threshold, measured, passed, detail)


def evaluate_gates(settings: GateSettings, measures: Measures) -> list[GateResult]:
    """Apply the configured gates, plus the always-on one: the conversion's validation passed."""
    validated = measures.validation_passed
    results = [
        GateResult(
            "validation_passed",
            "==",
            True,
            validated,
            validated is True,
            "converted model agrees with native within its precision's tolerance"
            if validated
            else f"conversion validation {measures.validation_verdict or 'did not pass'}",
        )
    ]
    numeric = (
        ("max_accuracy_drop", "<=", settings.max_accuracy_drop, measures.accuracy_drop,
         "accuracy drop vs native"),
        ("min_top1_agreement", ">=", settings.min_top1_agreement, measures.top1_agreement,
         "top-1 agreement with native"),
    )  # fmt: skip
    for name, comparison, threshold, measured, what in numeric:
        if threshold is not None:
            results.append(_numeric_gate(name, comparison, threshold, measured, what))
    return results + speed_gates(settings, measures)


def speed_gates(settings: GateSettings, measures: Measures) -> list[GateResult]:
    """The configured speed gates (`min_speedup`, `max_latency_ms_p99`), each judged on the
    bench's 95% interval when it has one: passed when the whole interval meets the threshold,
    failed when none of it does, inconclusive when it straddles it (see `_interval_gate`);
    on the point value otherwise."""
    batch = f"at batch {settings.gate_batch_size}"
    speed = (
        ("min_speedup", ">=", settings.min_speedup, measures.speedup_vs_baseline,
         measures.speedup_vs_baseline_ci95, f"throughput speedup vs native {batch}"),
        ("max_latency_ms_p99", "<=", settings.max_latency_ms_p99, measures.latency_ms_p99,
         measures.latency_ms_p99_ci95, f"p99 latency (ms) {batch}"),
    )  # fmt: skip
    results = []
    for name, comparison, threshold, measured, interval, what in speed:
        if threshold is None:
            continue
        if measured is None or interval is None:
            results.append(_numeric_gate(name, comparison, threshold, measured, what))
        else:
            results.append(
                _interval_gate(name, comparison, threshold, (measured, interval), what, measures)
            )
    return results


def _interval_gate(
    name: str,
    comparison: str,
    threshold: float,
    figure: tuple[float, tuple[float, float]],
    what: str,
    measures: Measures,
) -> GateResult:
    """A gate judged on `figure` (the point value and its 95% interval)."""
    measured, (low, high) = figure
    verdict = stats.decide((low, high), threshold, at_least=comparison == ">=")
    words = {stats.PASSED: "meets", stats.FAILED: "misses", stats.INCONCLUSIVE: "straddles"}
    rounds = f" over {measures.rounds} rounds" if measures.rounds else ""
    detail = (
        f"{what} {measured:.6g}, 95% interval {low:.6g}-{high:.6g}{rounds}, "
        f"{words[verdict]} {comparison} {threshold:g}"
    )
    passed = verdict == stats.PASSED
    return GateResult(name, comparison, threshold, measured, passed, detail, verdict, (low, high))


@dataclass(frozen=True)
class Candidate:
    """A converted target as the recommendation sees it."""

    target: str
    precision: str
    throughput_per_s: float | None
    passed_all_gates: bool


def _ladder_rank(precision: str) -> int:
    return PRECISION_LADDER.index(precision) if precision in PRECISION_LADDER else 99


def recommend(candidates: list[Candidate]) -> Candidate | None:
    """The fastest candidate that passed every gate (ties: lower precision first), or None."""
    eligible = [c for c in candidates if c.passed_all_gates and c.throughput_per_s is not None]
    if not eligible:
        return None
    return min(eligible, key=lambda c: (-(c.throughput_per_s or 0.0), _ladder_rank(c.precision)))
