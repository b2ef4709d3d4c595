"""`trtconv bench --scenario server`: a served int8 artifact driven by MLPerf LoadGen."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.serving_fixtures import artifact, left_running, pytriton_or_skip
from trtconv.cli import main
from trtconv.core.processes import descendants
from trtconv.serving.load.latency import bounding_rate
from trtconv.serving.load.loadgen_driver import parse_summary

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # converts a small model, serves it and runs LoadGen

SUMMARY = """Scenario : Server
Completed samples per second    : 195.26
Result is : INVALID
  Performance constraints satisfied : NO
  Min duration satisfied : Yes
  Min queries satisfied : Yes
  Early stopping satisfied: NO
 * Processed 595 queries.
50.00 percentile latency (ns)   : 37385890
90.00 percentile latency (ns)   : 69493905
99.00 percentile latency (ns)   : 83829110
"""


def test_a_loadgen_summary_becomes_a_run() -> None:
    run = parse_summary(SUMMARY, 200.0, budget_ms=90.0, errors=0)
    assert (run.completed_qps, run.latency_ms_p99, run.queries) == (195.26, 83.829, 595)
    assert run.meets_budget and run.loadgen_result == "INVALID"
    assert run.loadgen_reasons == [
        "Performance constraints satisfied : NO",
        "Early stopping satisfied: NO",
    ]
    assert not parse_summary(SUMMARY, 200.0, budget_ms=80.0, errors=0).meets_budget
    assert not parse_summary(SUMMARY, 200.0, budget_ms=90.0, errors=1).meets_budget


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    out, err = capsys.readouterr()
    return int(stopped.value.code or 0), out, err


def test_the_server_scenario_needs_a_budget(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["bench", str(Path.cwd()), "--scenario", "server"], capsys)
    assert code == 2 and "--latency-budget-ms" in err


def test_server_scenario_reports_queries_per_second_at_budget(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytriton_or_skip()
    pytest.importorskip("mlperf_loadgen", reason="mlcommons-loadgen is not installed")
    model = artifact("ort", "int8")
    argv = ["bench", str(model), "--scenario", "server", "--latency-budget-ms", "2000",
            "--duration", "1", "--search-runs", "2", "--json"]  # flags beside values # fmt: skip
    code, out, err = run(argv, capsys)
    assert code == 0, err
    result = json.loads(out)
    (row,) = result["rows"]
    assert row["dynamic_batching"] and row["precision"] == "int8"
    # A 2 s budget is met at the first rates tried, even on a busy 2-core machine.
    assert row["qps_at_budget"] > 0 and row["latency_ms_p99"] <= 2000
    first, second = row["runs"]
    # Met: doubled, and raised to where a 1 s run holds queries enough to bound its p99 when
    # the first had too few.
    doubled = 2 * first["target_qps"]
    if first["latency_ms_p99_ci95"][1] is None:
        doubled = max(doubled, bounding_rate(1.0))
    assert second["target_qps"] == pytest.approx(doubled, abs=0.01)
    # One-second runs are INVALID by MLPerf's minimum duration, and say so.
    assert row["loadgen_result"] == "INVALID"
    assert "Min duration satisfied : NO" in row["loadgen_reasons"]
    assert "600 s" in result["notes"][0]
    assert sum(row["batches"].values()) > 0
    left = left_running(descendants(os.getpid()))
    assert left == [], "every served model's processes are ended"
