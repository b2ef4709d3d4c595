"""Gates and the recommendation: pure functions over measured values (no I/O, no timing).

Every gate reports its measured value, its threshold and pass/fail. A value that could not be
measured (no labels for accuracy, no bench row) fails its gate: a release never passes on a
number it does not have.

A gate that applies to no output reads "not applicable" and passes: the top-1 agreement and
accuracy-drop gates measure what an output decides (roles classes, binary, class_map), so on a
model whose outputs all are tensors or regressions they have nothing to constrain; the
validation gate still requires every output judged and within its tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    # Whether some output decides (a classes, binary or class_map role); None: not recorded.
    decides: bool | None = None


DECISION_GATES = ("max_accuracy_drop", "min_top1_agreement")  # measure what outputs decide


@dataclass(frozen=True)
class GateResult:
    """One gate applied to one target."""

    name: str
    comparison: str  # "<=", ">=" or "=="
    threshold: float | bool
    measured: float | bool | None
    passed: bool
    detail: str


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
    batch = f"at batch {settings.gate_batch_size}"
    numeric = (
        ("max_accuracy_drop", "<=", settings.max_accuracy_drop, measures.accuracy_drop,
         "accuracy drop vs native"),
        ("min_top1_agreement", ">=", settings.min_top1_agreement, measures.top1_agreement,
         "top-1 agreement with native"),
        ("min_speedup", ">=", settings.min_speedup, measures.speedup_vs_baseline,
         f"throughput speedup vs native {batch}"),
        ("max_latency_ms_p99", "<=", settings.max_latency_ms_p99, measures.latency_ms_p99,
         f"p99 latency (ms) {batch}"),
    )  # fmt: skip
    for name, comparison, threshold, measured, what in numeric:
        if threshold is None:
            continue
        if name in DECISION_GATES and measures.decides is False:
            results.append(_not_applicable(name, comparison, threshold, what))
        else:
            results.append(_numeric_gate(name, comparison, threshold, measured, what))
    return results


def _not_applicable(name: str, comparison: str, threshold: float, what: str) -> GateResult:
    """A decision gate on a model none of whose outputs decides: passes, measuring nothing."""
    detail = (
        f"not applicable: no output decides anything ({what} needs a classes, binary or "
        "class_map role; set one with [outputs] roles in the release config)"
    )
    return GateResult(name, comparison, threshold, None, True, detail)


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
