"""min_qps_at_budget: passed, failed or inconclusive by the rule every gate follows."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtconv.core.errors import UsageError
from trtconv.outputs.confidence import FAILED, INCONCLUSIVE, PASSED
from trtconv.release.config import load_config
from trtconv.release.gates import qps_at_budget_gate


def test_passed_when_the_budget_was_surely_met_at_the_minimum_or_more() -> None:
    gate = qps_at_budget_gate(100, 130.0, [120.0, 300.0], 20)
    assert (gate.verdict, gate.passed, gate.measured_ci95) == (PASSED, True, (120.0, 300.0))
    assert "meets >= 100" in gate.detail and "surely met at 120/s" in gate.detail


def test_failed_when_the_budget_was_surely_missed_below_the_minimum() -> None:
    gate = qps_at_budget_gate(100, 40.0, [30.0, 80.0], 20)
    assert (gate.verdict, gate.passed) == (FAILED, False)
    assert "misses >= 100" in gate.detail


def test_inconclusive_when_no_run_decides_the_budget_at_the_minimum() -> None:
    # The point figure reaches the minimum, but that run's p99 interval straddles the budget.
    gate = qps_at_budget_gate(100, 130.0, [60.0, None], 20)
    assert (gate.verdict, gate.passed, gate.measured_ci95) == (INCONCLUSIVE, False, None)
    assert "surely missed at no rate tried" in gate.detail
    assert qps_at_budget_gate(100, 0.0, [None, None], 20).verdict == INCONCLUSIVE


def test_not_measured_fails() -> None:
    gate = qps_at_budget_gate(100, None, None, 20)
    assert (gate.verdict, gate.measured) == (FAILED, None)
    assert "was not measured" in gate.detail


CONFIG = """[model]
path = "{model}"

[[targets]]
backend = "ort"
precision = "fp32"

[gates]
min_qps_at_budget = 100
"""


def test_the_gate_needs_a_serving_budget_and_the_tables_are_read(tmp_path: Path) -> None:
    model = tmp_path / "model" / "saved_model"
    model.mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"")  # config loading never loads TensorFlow
    config = tmp_path / "release.toml"
    config.write_text(CONFIG.format(model=model))
    with pytest.raises(UsageError, match=r"gates\.min_qps_at_budget: needs \[serving\]"):
        load_config(config)
    config.write_text(
        CONFIG.format(model=model) + "\n[serving]\nlatency_budget_ms = 20\nsearch_runs = 4\n"
        "\n[deploy]\ntriton = true\n"
    )
    loaded = load_config(config)
    assert loaded.gates.min_qps_at_budget == 100 and loaded.deploy.triton
    assert (loaded.serving.latency_budget_ms, loaded.serving.search_runs) == (20, 4)
    config.write_text(CONFIG.format(model=model) + "\n[serving]\nlatency_budget = 20\n")
    with pytest.raises(UsageError, match="serving"):
        load_config(config)
