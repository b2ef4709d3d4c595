"""`bench --scenario server --offered`: answers sorted by what Triton said, the curve's
figures, and its table."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from trtconv.cli._server_bench import parse_offered, render
from trtconv.core.errors import UsageError
from trtconv.measure.server_bench_result import OverloadRow, ServerBenchResult
from trtconv.options.server_bench import ServerBenchOptions
from trtconv.serving.load.overload import classify, tally


def test_answers_are_sorted_by_triton_s_message() -> None:
    assert classify(None) == "served"
    assert classify(RuntimeError("[StatusCode.UNAVAILABLE] Exceeds maximum queue size")) == (
        "refused"
    )
    assert classify(RuntimeError("[StatusCode.UNAVAILABLE] Request timeout expired")) == (
        "timed_out"
    )
    assert classify(RuntimeError("[StatusCode.INTERNAL] model failed")) == "error"


def test_goodput_counts_the_served_within_the_budget() -> None:
    answers = [("served", 5.0)] * 6 + [("served", 50.0)] * 2 + [("refused", 1.0)] * 2
    run = tally(10.0, [*answers, ("timed_out", 20.0)], budget_ms=10.0, run_s=2.0)
    assert (run.sent, run.served, run.refused, run.timed_out, run.errors) == (11, 8, 2, 1, 0)
    assert run.goodput_qps == 3.0  # 6 within 10 ms, over 2 s
    assert run.refused_share == pytest.approx(2 / 11, abs=1e-4)
    assert run.latency_ms_p99 is not None and run.latency_ms_p99 <= 50.0


def test_offered_multiples_are_checked() -> None:
    assert parse_offered("0.5,1,1.5,2,3") == (0.5, 1.0, 1.5, 2.0, 3.0)
    assert parse_offered(None) == ()
    with pytest.raises(UsageError, match="--offered"):
        parse_offered("1,x")
    with pytest.raises(UsageError, match="--offered"):
        ServerBenchOptions(("m",), 10.0, offered=(1.0, 0.0))


def test_the_curve_is_a_table_per_model() -> None:
    run = tally(200.0, [("served", 5.0)] * 3 + [("refused", 1.0)], budget_ms=10.0, run_s=1.0)
    run.multiple = 2.0
    result = ServerBenchResult(
        scenario="server",
        latency_budget_ms=10.0,
        run_s=1.0,
        rows=[],
        ratios_vs_baseline={},
        batching_gain={},
        notes=[],
        overload=[
            OverloadRow(
                model="m",
                label="digits",
                capacity_qps=100.0,
                max_queue_size=16,
                queue_timeout_ms=50.0,
                runs=[run],
            )
        ],
    )
    out = io.StringIO()
    render(result, Console(file=out, width=200))
    text = out.getvalue()
    assert "capacity 100.0 requests/s" in text and "queue 16, timeout 50 ms" in text
    assert "2x" in text and "25.0%" in text  # one refused in four
    assert "server mean ms" in text
    assert ServerBenchResult.from_json(result.to_json()).overload[0].runs[0].refused == 1


def test_the_server_s_own_time_comes_from_triton_s_statistics() -> None:
    from types import SimpleNamespace

    from trtconv.serving.load.loadgen_driver import served_totals

    success = SimpleNamespace(count=40, ns=800_000_000)
    stats = SimpleNamespace(
        model_stats=[SimpleNamespace(inference_stats=SimpleNamespace(success=success))]
    )
    client = SimpleNamespace(get_inference_statistics=lambda name: stats)
    assert served_totals(client, "digits") == (40, 800_000_000)
