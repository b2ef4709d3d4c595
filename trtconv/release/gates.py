"""Gates and the recommendation: pure functions over measured values (no I/O, no timing).

Every gate reports its measured value, its threshold and pass/fail. A value that could not be
measured (no labels for accuracy, no bench row) fails its gate: a release never passes on a
number it does not have. The accuracy gates are decided by the 95% intervals the validation
recorded (trtconv.outputs.confidence): passed when the interval clears the threshold, failed
when it misses it, inconclusive (not passed) when it straddles it; on the point figure when the
validation decided on point figures (confidence 0). The speed gates are decided the same way by
the bench's intervals over its interleaved rounds.

A gate that applies to no output reads "not applicable" and passes: the accuracy-drop gate
measures what an output decides (roles classes, binary, class_map), the agreement gate how often
an output agrees with the native model (those roles, and an embedding's samples reaching its
cosine bound), so on a model whose outputs all are tensors or regressions they have nothing to
constrain (and an embedding model no accuracy drop); the validation gate still requires every
output judged and within its tolerance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from trtconv.core.numbers import human, human_against
from trtconv.outputs.confidence import (
    FAILED,
    INCONCLUSIVE,
    PASSED,
    Interval,
    at_least,
    at_most,
    interval_text,
)
from trtconv.release.settings import GateSettings

# Among equally fast targets prefer the lower precision (the precision ladder's order).
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
    # The accuracy figures' 95% intervals and samples; None intervals: point decisions.
    top1_agreement_ci95: Interval | None = None
    accuracy_drop_ci95: Interval | None = None
    accuracy_samples: int | None = None
    # The bench's 95% intervals over its interleaved rounds (None: a single round, or a bench
    # recorded before intervals) and how many rounds they rest on.
    speedup_vs_baseline_ci95: tuple[float, float] | None = None
    latency_ms_p99_ci95: tuple[float, float] | None = None
    rounds: int | None = None
    # Whether some output decides (a classes, binary or class_map role), and whether some is
    # judged by its agreement (those, or an embedding); None: not recorded.
    decides: bool | None = None
    agrees: bool | None = None


@dataclass(frozen=True)
class GateResult:
    """One gate applied to one target. `verdict` is "passed", "failed" or, for a gate whose
    interval straddles the threshold, "inconclusive" (then `passed` is False too);
    `measured_ci95` is the interval the gate was judged on (None: the point value)."""

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
            object.__setattr__(self, "verdict", PASSED if self.passed else FAILED)


def _numeric_gate(
    name: str, comparison: str, threshold: float, measured: float | None, what: str
) -> GateResult:
    if measured is None:
        return GateResult(
            name=name,
            comparison=comparison,
            threshold=threshold,
            measured=None,
            passed=False,
            detail=f"{what} was not measured",
        )
    passed = measured <= threshold if comparison == "<=" else measured >= threshold
    shown = human_against(measured, threshold)
    detail = f"{what} {shown} {'meets' if passed else 'misses'} {comparison} {threshold:g}"
    return GateResult(
        name=name,
        comparison=comparison,
        threshold=threshold,
        measured=measured,
        passed=passed,
        detail=detail,
    )


def _accuracy_gate(
    name: str, comparison: str, threshold: float, measures: Measures, what: str
) -> GateResult:
    """An accuracy gate decided by the figure's recorded interval (`_ci95`; None: the point)."""
    figure = "top1_agreement" if comparison == ">=" else "accuracy_drop"
    measured = getattr(measures, figure)
    if measured is None:
        return GateResult(
            name=name,
            comparison=comparison,
            threshold=threshold,
            measured=None,
            passed=False,
            detail=f"{what} was not measured",
        )
    interval: Interval | None = getattr(measures, f"{figure}_ci95")
    decide = at_least if comparison == ">=" else at_most
    verdict = decide(measured, interval, threshold)
    shown = interval_text(
        measured, interval, measures.accuracy_samples or 0, signed=figure == "accuracy_drop"
    )
    words = {PASSED: "meets", INCONCLUSIVE: "is inconclusive against"}.get(verdict, "misses")
    detail = f"{what} {shown} {words} {comparison} {threshold:g}"
    if verdict == INCONCLUSIVE:
        detail += ": its 95% interval straddles it (more samples would decide it)"
    passed = verdict == PASSED
    return GateResult(
        name=name,
        comparison=comparison,
        threshold=threshold,
        measured=measured,
        passed=passed,
        detail=detail,
        verdict=verdict,
        measured_ci95=interval,
    )


def evaluate_gates(settings: GateSettings, measures: Measures) -> list[GateResult]:
    """Apply the configured gates, plus the always-on one: the conversion's validation passed."""
    validated = measures.validation_passed
    undecided = measures.validation_verdict == INCONCLUSIVE
    results = [
        GateResult(
            name="validation_passed",
            comparison="==",
            threshold=True,
            measured=validated,
            passed=validated is True,
            detail="converted model agrees with native within its precision's tolerance"
            if validated
            else f"conversion validation {measures.validation_verdict or 'did not pass'}",
            verdict=INCONCLUSIVE if undecided else "",
        )
    ]
    accuracy = (
        ("max_accuracy_drop", "<=", settings.max_accuracy_drop, "accuracy drop vs native"),
        ("min_top1_agreement", ">=", settings.min_top1_agreement, "top-1 agreement with native"),
    )
    for name, comparison, bound, what in accuracy:
        if bound is None:
            continue
        # Ahead of the interval and the point figure alike: a model none of whose outputs
        # decides (agrees, for the agreement gate) has nothing these gates measure.
        applies = measures.decides if comparison == "<=" else measures.agrees
        if applies is False:
            results.append(_not_applicable(name, comparison, bound, what))
        else:
            results.append(_accuracy_gate(name, comparison, bound, measures, what))
    return results + speed_gates(settings, measures)


def speed_gates(settings: GateSettings, measures: Measures) -> list[GateResult]:
    """The configured speed gates (`min_speedup`, `max_latency_ms_p99`), each judged on the
    bench's 95% interval when it has one: passed when the whole interval meets the threshold,
    failed when none of it does, inconclusive when it straddles it (see `_interval_gate`);
    on the point value otherwise."""
    batch = f"at batch {settings.gate_batch_size}"
    speed = (
        (
            "min_speedup",
            ">=",
            settings.min_speedup,
            measures.speedup_vs_baseline,
            measures.speedup_vs_baseline_ci95,
            f"throughput speedup vs native {batch}",
        ),
        (
            "max_latency_ms_p99",
            "<=",
            settings.max_latency_ms_p99,
            measures.latency_ms_p99,
            measures.latency_ms_p99_ci95,
            f"p99 latency (ms) {batch}",
        ),
    )
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


def _not_applicable(name: str, comparison: str, threshold: float, what: str) -> GateResult:
    """A decision gate on a model none of whose outputs decides: passes, measuring nothing."""
    roles = "a classes, binary or class_map role"
    if comparison == ">=":  # the agreement gate: an embedding's cosine counts too
        roles = "a classes, binary, class_map or embedding role"
    detail = (
        f"not applicable: no output decides anything ({what} needs {roles}; set one with "
        "[outputs] roles in the release config)"
    )
    return GateResult(
        name=name,
        comparison=comparison,
        threshold=threshold,
        measured=None,
        passed=True,
        detail=detail,
    )


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
    decide = at_least if comparison == ">=" else at_most
    verdict = decide(measured, (low, high), threshold)
    words = {PASSED: "meets", FAILED: "misses", INCONCLUSIVE: "straddles"}
    rounds = f" over {measures.rounds} rounds" if measures.rounds else ""
    detail = (
        f"{what} {human(measured)}, 95% interval {human_against(low, threshold)}-"
        f"{human_against(high, threshold)}{rounds}, "
        f"{words[verdict]} {comparison} {threshold:g}"
    )
    passed = verdict == PASSED
    return GateResult(
        name=name,
        comparison=comparison,
        threshold=threshold,
        measured=measured,
        passed=passed,
        detail=detail,
        verdict=verdict,
        measured_ci95=(low, high),
    )


@dataclass(frozen=True)
class GatedTarget:
    """A converted target as the recommendation sees it."""

    target: str
    precision: str
    throughput_per_s: float | None
    passed_all_gates: bool


def _ladder_rank(precision: str) -> int:
    return PRECISION_LADDER.index(precision) if precision in PRECISION_LADDER else 99


def recommend(candidates: list[GatedTarget]) -> GatedTarget | None:
    """The fastest candidate that passed every gate (ties: lower precision first), or None."""
    eligible = [c for c in candidates if c.passed_all_gates and c.throughput_per_s is not None]
    if not eligible:
        return None
    return min(eligible, key=lambda c: (-(c.throughput_per_s or 0.0), _ladder_rank(c.precision)))


def qps_at_budget_gate(
    minimum: float,
    qps_at_budget: float | None,
    bounds: list[float | None] | None,
    budget_ms: float,
) -> GateResult:
    """`min_qps_at_budget`: the queries/s a served model takes with its p99 latency within
    `budget_ms` (`bench --scenario server`), decided by `at_least` as every gate is, on the
    interval its serving runs bracket (trtconv.serving.load.latency.rate_bounds): [the highest rate
    whose p99 interval lies within the budget, the lowest whose p99 interval lies above it].
    Passed when the budget was surely met at `minimum` or more, failed when it was surely
    missed below `minimum`, inconclusive otherwise (the point figure alone decides nothing)."""
    name, what = "min_qps_at_budget", f"queries/s with p99 within {budget_ms:g} ms"
    if qps_at_budget is None:
        return GateResult(
            name=name,
            comparison=">=",
            threshold=minimum,
            measured=None,
            passed=False,
            detail=f"{what} was not measured",
        )
    low, high = bounds if bounds is not None else (None, None)
    interval = (low or 0.0, math.inf if high is None else high)
    verdict = at_least(qps_at_budget, interval, minimum)
    shown = f"budget surely met at {_rate(low)}, surely missed at {_rate(high)}"
    words = {PASSED: "meets", FAILED: "misses", INCONCLUSIVE: "is inconclusive against"}
    detail = f"{what} {qps_at_budget:.6g} ({shown}) {words[verdict]} >= {minimum:g}"
    if verdict == INCONCLUSIVE:
        detail += ": no run's p99 interval decides the budget at that rate (longer runs would)"
    decided = (low, high) if low is not None and high is not None else None
    passed = verdict == PASSED
    return GateResult(
        name=name,
        comparison=">=",
        threshold=minimum,
        measured=qps_at_budget,
        passed=passed,
        detail=detail,
        verdict=verdict,
        measured_ci95=decided,
    )


def _rate(value: float | None) -> str:
    return "no rate tried" if value is None else f"{value:.6g}/s"
