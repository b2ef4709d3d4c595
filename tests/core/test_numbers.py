"""Figures rounded for people (ladder lines printed 0.9885579082980972)."""

from __future__ import annotations

import math

from trtconv.core.numbers import human, human_against
from trtconv.release.config import GateSettings
from trtconv.release.gates import Measures, evaluate_gates


def test_four_significant_digits_and_thousands() -> None:
    assert human(0.9885579082980972) == "0.9886"
    assert human(1234.5678) == "1235"
    assert human(123456.7) == "123,457"
    assert human(0.000123456) == "0.0001235"
    assert (human(None), human(math.inf)) == ("n/a", "inf")


def test_a_figure_beside_its_bound_never_reads_as_the_bound() -> None:
    assert human_against(0.96996, 0.97) == "0.96996"
    assert human_against(0.9700004, 0.97) == "0.9700004"
    assert human_against(0.97, 0.97) == "0.97"
    assert human_against(0.9885579082980972, 0.97) == "0.9886"


def test_gate_details_are_rounded() -> None:
    measures = Measures(
        validation_passed=True,
        speedup_vs_baseline=1.4999999,
        rounds=5,
        speedup_vs_baseline_ci95=(1.234567891, 1.76543219),
    )
    gates = {g.name: g for g in evaluate_gates(GateSettings(min_speedup=1.5), measures)}
    detail = gates["min_speedup"].detail
    assert "1.5, 95% interval 1.235-1.765 over 5 rounds" in detail, detail
    latency = Measures(validation_passed=True, latency_ms_p99=3.0000001234)
    gate = evaluate_gates(GateSettings(max_latency_ms_p99=3.0), latency)[-1]
    assert gate.detail.startswith("p99 latency (ms) at batch") and "3.0000001 misses" in gate.detail
