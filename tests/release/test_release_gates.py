"""Gates and the recommendation, on known numbers."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers.conversions import bench_row, converted, passing_validation
from trtconv.facts.environment import Environment
from trtconv.options.bench import SpeedGoal
from trtconv.outputs.confidence import FAILED, INCONCLUSIVE, PASSED
from trtconv.release.command_options import speed_goal
from trtconv.release.config import parse_config
from trtconv.release.document import ReleaseDocument, TargetEntry
from trtconv.release.gates import GatedTarget, Measures, evaluate_gates, recommend
from trtconv.release.settings import GateSettings
from trtconv.release.verdict import judge_targets

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
        GatedTarget("ort-fp32", "fp32", 900.0, True),
        GatedTarget("ort-int8", "int8", 1200.0, True),
        GatedTarget("trt-fp16", "fp16", 5000.0, False),
    ]
    chosen = recommend(candidates)
    assert chosen is not None and chosen.target == "ort-int8"


def test_recommend_ties_follow_the_precision_ladder() -> None:
    candidates = [
        GatedTarget("ort-fp32", "fp32", 1000.0, True),
        GatedTarget("ort-int8", "int8", 1000.0, True),
    ]
    chosen = recommend(candidates)
    assert chosen is not None and chosen.target == "ort-int8"


def test_recommend_none_when_nothing_passes() -> None:
    assert recommend([GatedTarget("ort-fp32", "fp32", 1000.0, False)]) is None
    assert recommend([GatedTarget("ort-fp32", "fp32", None, True)]) is None
    assert recommend([]) is None


def test_accuracy_gates_are_decided_by_the_recorded_intervals() -> None:
    """51 of 52 agreeing (0.981, 95% interval 0.898-0.997) cannot show 0.97: inconclusive, not
    passed; a threshold below the interval passes, one above it fails; without intervals
    (the validation decided on point figures) the point decides."""
    measured = Measures(
        validation_passed=True,
        top1_agreement=51 / 52,
        top1_agreement_ci95=(0.8985, 0.9966),
        accuracy_drop=0.0192,
        accuracy_drop_ci95=(0.0, 0.0962),
        accuracy_samples=52,
    )
    gates = {g.name: g for g in evaluate_gates(GateSettings(0.02, 0.97), measured)}
    agreement, drop = gates["min_top1_agreement"], gates["max_accuracy_drop"]
    assert (
        not agreement.passed and agreement.verdict == INCONCLUSIVE and agreement.measured == 51 / 52
    )
    assert "0.981 (0.898-0.997, n=52) is inconclusive against >= 0.97" in agreement.detail
    assert (
        not drop.passed
        and drop.verdict == INCONCLUSIVE
        and "+0.019 (+0.000 to +0.097" in drop.detail
    )
    low = {g.name: g for g in evaluate_gates(GateSettings(0.2, 0.85), measured)}
    assert low["min_top1_agreement"].passed and low["max_accuracy_drop"].passed
    high = evaluate_gates(GateSettings(min_top1_agreement=0.999), measured)[-1]
    assert not high.passed and high.verdict == FAILED  # the whole interval is below 0.999
    point = Measures(validation_passed=True, top1_agreement=51 / 52, accuracy_samples=52)
    assert evaluate_gates(GateSettings(min_top1_agreement=0.97), point)[-1].passed


def test_an_inconclusive_validation_is_said_so_by_its_gate() -> None:
    gate = evaluate_gates(
        GateSettings(), Measures(validation_passed=False, validation_verdict="inconclusive")
    )[0]
    assert not gate.passed and gate.verdict == INCONCLUSIVE and gate.detail.endswith("inconclusive")


# ---------------------------------------------------------------- speed gates on intervals


def speed(speedup: tuple[float, float] | None, p99: tuple[float, float] | None) -> Measures:
    """GOOD's figures with the bench's intervals around them (over 10 rounds)."""
    return replace(GOOD, speedup_vs_baseline_ci95=speedup, latency_ms_p99_ci95=p99, rounds=10)


@pytest.mark.parametrize(
    ("speedup", "p99", "expected"),
    [
        ((1.8, 2.2), (2.8, 3.3), (PASSED, PASSED)),
        ((1.2, 1.4), (3.6, 4.0), (FAILED, FAILED)),
        ((1.4, 2.2), (2.9, 3.8), (INCONCLUSIVE, INCONCLUSIVE)),
    ],
)
def test_speed_gates_judge_the_interval(
    speedup: tuple[float, float], p99: tuple[float, float], expected: tuple[str, str]
) -> None:
    settings = GateSettings(min_speedup=1.5, max_latency_ms_p99=3.5, gate_batch_size=8)
    gates = {g.name: g for g in evaluate_gates(settings, speed(speedup, p99))}
    assert (gates["min_speedup"].verdict, gates["max_latency_ms_p99"].verdict) == expected
    for gate, interval in ((gates["min_speedup"], speedup), (gates["max_latency_ms_p99"], p99)):
        assert gate.measured_ci95 == interval
        assert gate.passed is (gate.verdict == PASSED)
        assert "95% interval" in gate.detail and "over 10 rounds" in gate.detail


def test_speed_gates_without_an_interval_judge_the_point_value() -> None:
    settings = GateSettings(min_speedup=1.5, max_latency_ms_p99=2.5)
    gates = {g.name: g for g in evaluate_gates(settings, GOOD)}
    assert gates["min_speedup"].verdict == PASSED and gates["min_speedup"].passed
    assert gates["max_latency_ms_p99"].verdict == FAILED
    assert gates["min_speedup"].measured_ci95 is None
    assert gates["validation_passed"].verdict == PASSED  # every gate has a verdict


def test_a_release_undecided_on_speed_is_inconclusive_in_one_sentence(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"")
    raw = {
        "model": {"path": str(model)},
        "targets": [{"backend": "ort", "precision": "int8"}],
        "calibration": {"data": "digits"},
        "gates": {"min_speedup": 1.05, "speed_time_limit_s": 30},
    }
    config = parse_config(raw, tmp_path / "release.toml")
    assert speed_goal(config) == SpeedGoal(8, 1.05, None, 30.0)
    row = bench_row(
        batch_size=8,
        throughput_per_s=900.0,
        speedup_vs_baseline=1.06,
        speedup_vs_baseline_ci95=(1.01, 1.11),
        rounds=30,
    )
    target = TargetEntry("ort-int8", "ort", "int8", converted("ort", "int8"))
    target.bench = [row]
    recommendation, reason = judge_targets(config, [target])
    assert recommendation is None and target.inconclusive and not target.passed
    assert reason.startswith("inconclusive: ")
    assert "ort-int8 min_speedup 1.01-1.11 (>= 1.05) at batch 8" in reason
    assert "30 s (gates.speed_time_limit_s)" in reason and reason.count(". ") == 0
    document = ReleaseDocument(
        config=config,
        config_sha256="",
        release_dir="",
        source_model=None,
        targets=[target],
        bench=None,
        plots=[],
        steps=[],
        environment=Environment(),
        created_at="",
    )
    assert (document.verdict, document.exit_code) == (INCONCLUSIVE, 4)
    # Any failed gate makes it failed, not inconclusive.
    target.bench = [replace(row, speedup_vs_baseline_ci95=(0.9, 1.0))]
    judge_targets(config, [target])
    assert document.verdict == FAILED


def test_an_undecided_accuracy_gate_asks_for_samples_not_bench_rounds(tmp_path: Path) -> None:
    """Before: 'the 95% interval of ort-int8 min_top1_agreement 0.8955-0.9872 ...
    straddles its threshold after the bench added rounds': no bench round decides accuracy."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"")
    (tmp_path / "eval.npz").write_bytes(b"")
    raw = {
        "model": {"path": str(model)},
        "targets": [{"backend": "ort", "precision": "int8"}],
        "calibration": {"data": "digits"},
        "eval": {"data": str(tmp_path / "eval.npz")},
        "gates": {"min_top1_agreement": 0.9, "min_speedup": 0.5},
    }
    config = parse_config(raw, tmp_path / "release.toml")
    report = passing_validation(samples=80)
    probs = replace(report.outputs["probs"], agreement=0.9625, agreement_ci95=(0.8955, 0.9872))
    report = replace(report, outputs={"probs": probs}, confidence=0.95)
    conversion = converted("ort", "int8")
    conversion = replace(conversion, result=replace(conversion.result, validation=report))
    row = bench_row(
        batch_size=8,
        throughput_per_s=900.0,
        speedup_vs_baseline=3.0,
        speedup_vs_baseline_ci95=(2.8, 3.2),
        rounds=10,
    )
    target = TargetEntry("ort-int8", "ort", "int8", conversion)
    target.bench = [row]
    recommendation, reason = judge_targets(config, [target])
    assert recommendation is None and target.inconclusive
    assert "ort-int8 min_top1_agreement 0.8955-0.9872 (>= 0.9)" in reason
    assert "more evaluation samples would decide it" in reason and "eval.npz" in reason
    assert "bench added rounds" not in reason and "speed_time_limit_s" not in reason
