"""Gates and the recommendation, on known numbers."""

from __future__ import annotations

from trtconv.release.config import GateSettings
from trtconv.release.gates import Candidate, Measures, evaluate_gates, recommend

GOOD = Measures(
    validation_passed=True,
    accuracy_drop=0.004,
    top1_agreement=0.995,
    speedup_vs_baseline=2.0,
    latency_ms_p99=3.0,
    throughput_per_s=1000.0,
)


def by_name(settings: GateSettings, measures: Measures) -> dict[str, tuple[object, bool]]:
    return {g.name: (g.measured, g.passed) for g in evaluate_gates(settings, measures)}


def test_only_configured_gates_apply_plus_validation() -> None:
    assert by_name(GateSettings(), GOOD) == {"validation_passed": (True, True)}


def test_every_gate_reports_measured_value_and_verdict() -> None:
    settings = GateSettings(
        max_accuracy_drop=0.01,
        min_top1_agreement=0.999,
        min_speedup=1.5,
        max_latency_ms_p99=2.5,
        gate_batch_size=8,
    )
    assert by_name(settings, GOOD) == {
        "validation_passed": (True, True),
        "max_accuracy_drop": (0.004, True),
        "min_top1_agreement": (0.995, False),
        "min_speedup": (2.0, True),
        "max_latency_ms_p99": (3.0, False),
    }
    speedup = next(g for g in evaluate_gates(settings, GOOD) if g.name == "min_speedup")
    assert speedup.threshold == 1.5 and speedup.comparison == ">="
    assert "at batch 8" in speedup.detail


def test_thresholds_are_inclusive() -> None:
    settings = GateSettings(min_speedup=2.0, max_latency_ms_p99=3.0)
    assert all(g.passed for g in evaluate_gates(settings, GOOD))


def test_unmeasured_value_fails_its_gate() -> None:
    gates = evaluate_gates(GateSettings(max_accuracy_drop=0.5), Measures(validation_passed=True))
    drop = gates[-1]
    assert drop.measured is None and not drop.passed
    assert "not measured" in drop.detail


def test_failed_validation_fails() -> None:
    gates = evaluate_gates(GateSettings(), Measures(validation_passed=False))
    assert gates[0].passed is False


def test_recommend_fastest_passing() -> None:
    candidates = [
        Candidate("ort-fp32", "fp32", 900.0, True),
        Candidate("ort-int8", "int8", 1200.0, True),
        Candidate("trt-fp16", "fp16", 5000.0, False),
    ]
    chosen = recommend(candidates)
    assert chosen is not None and chosen.target == "ort-int8"


def test_recommend_ties_follow_the_precision_ladder() -> None:
    candidates = [
        Candidate("ort-fp32", "fp32", 1000.0, True),
        Candidate("ort-int8", "int8", 1000.0, True),
    ]
    chosen = recommend(candidates)
    assert chosen is not None and chosen.target == "ort-int8"


def test_recommend_none_when_nothing_passes() -> None:
    assert recommend([Candidate("ort-fp32", "fp32", 1000.0, False)]) is None
    assert recommend([Candidate("ort-fp32", "fp32", None, True)]) is None
    assert recommend([]) is None
