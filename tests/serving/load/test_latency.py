"""The p99's interval over LoadGen's per-query latencies, and the rates a budget is surely
met or missed at."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trtconv.measure.server_bench_result import LoadRun
from trtconv.serving.load.latency import (
    bounding_rate,
    next_search_rate,
    p99_interval,
    percentile_ms,
    queries_to_bound_p99,
    rate_bounds,
    run_line,
    trace_file_latencies_ms,
    trace_latencies_ms,
)

# Two of LoadGen's trace lines (its file is not strict JSON: keys quoted twice elsewhere).
TRACE = """{"traceEvents":[
{"name":"LogDetail","ph":"X","args":{"key":""loadgen_version""}},
{"name":"Latency","ph": "C","ts":25518.6,"args":{ "issue_delay":4288386,"issue_to_done":2919865}},
{"name":"Latency","ph": "C","ts":25069.5,"args":{ "issue_delay":891,"issue_to_done":16013391}},
"""


def test_latencies_are_the_issue_delay_plus_the_time_to_done(tmp_path: Path) -> None:
    assert trace_latencies_ms(TRACE).tolist() == pytest.approx([7.208251, 16.014282])
    assert len(trace_latencies_ms("")) == 0
    trace = tmp_path / "mlperf_log_trace.json"
    trace.write_text(TRACE)
    assert trace_file_latencies_ms(trace).tolist() == pytest.approx([7.208251, 16.014282])
    assert len(trace_file_latencies_ms(tmp_path / "absent.json")) == 0


def test_the_percentile_is_loadgens_index() -> None:
    latencies = np.arange(1.0, 401.0)  # 1..400 ms
    assert percentile_ms(latencies) == 397.0  # sorted[floor(400 * 0.99)]


def test_the_p99_interval_holds_the_p99_and_opens_with_few_queries() -> None:
    rng = np.random.default_rng(0)
    many = rng.exponential(3.0, 5000)
    low, high = p99_interval(many)
    assert high is not None and low < percentile_ms(many) < high
    # The true p99 of an exponential with mean 3 ms: 3 ln(100).
    assert low < 3 * np.log(100) < high
    few = rng.exponential(3.0, 100)
    assert p99_interval(few)[1] is None  # 100 queries cannot bound a p99 from above
    assert p99_interval(np.array([])) is None


def run(qps: float, p99: float, interval: list[float | None] | None, errors: int = 0) -> LoadRun:
    return LoadRun(
        target_qps=qps,
        completed_qps=qps,
        latency_ms_p50=1.0,
        latency_ms_p90=2.0,
        latency_ms_p99=p99,
        meets_budget=p99 <= 20,
        loadgen_result="INVALID",
        loadgen_reasons=[],
        queries=500,
        errors=errors,
        latency_ms_p99_ci95=interval,
    )


def test_rate_bounds_take_only_runs_their_interval_decides() -> None:
    runs = [
        run(50, 8.0, [6.0, 12.0]),  # surely met
        run(100, 15.0, [10.0, 25.0]),  # met on the point, the interval straddles 20
        run(200, 40.0, [30.0, None]),  # surely missed
        run(400, 90.0, [60.0, None]),
        run(80, 9.0, [7.0, 11.0], errors=3),  # errors: decides nothing met
    ]
    assert rate_bounds(runs, 20.0) == [50, 200]
    assert rate_bounds(runs[1:2], 20.0) == [None, None]
    # Without an interval the point decides.
    assert rate_bounds([run(70, 19.0, None)], 20.0) == [70, None]


def test_the_queries_that_bound_a_p99_are_the_fewest_scipy_bounds() -> None:
    needed = queries_to_bound_p99()
    assert p99_interval(np.arange(float(needed)))[1] is not None
    assert p99_interval(np.arange(float(needed - 1)))[1] is None
    assert bounding_rate(3.0) * 3.0 > needed  # a 3 s run at that rate holds more, on average


def test_the_search_doubles_then_bisects() -> None:
    bounded, open_above = run(100, 8.0, [6.0, 12.0]), run(100, 8.0, [6.0, None])
    assert next_search_rate(400, bounded, 400, None, 5.0) == 800
    assert next_search_rate(400, open_above, 400, None, 5.0) == 800  # already above the bound
    assert next_search_rate(800, run(800, 40.0, [30.0, 50.0]), 400, 800, 5.0) == 600
    assert next_search_rate(100, run(100, 40.0, [30.0, None]), 0.0, 100, 5.0) == 50


def test_a_run_that_met_the_budget_on_too_few_queries_is_followed_by_one_that_can_show_it() -> None:
    # A slow first probe started the search at 50 queries/s: 3 s runs at 50 and at 100 hold
    # 150 and 300 queries, neither enough to show the budget surely met.
    following = next_search_rate(50, run(50, 8.0, [6.0, None]), 50, None, 3.0)
    assert following == bounding_rate(3.0) > 100
    # Once a run missed, the bisection stays between what met and what missed.
    assert next_search_rate(100, run(100, 40.0, [30.0, None]), 50, 100, 3.0) == 75


def test_each_run_is_told_as_its_rate_its_p99_and_what_the_interval_says() -> None:
    met = run_line(run(100, 8.0, [6.0, 12.0]), 20.0)
    assert met == (
        "at 100 queries/s (100/s completed): p99 8.00 ms (6.00-12.00), meets the 20 ms budget"
    )
    missed = run_line(run(200, 40.0, [30.0, None], errors=2), 20.0)
    assert missed.endswith(
        "p99 40.00 ms (30.00-open), misses the 20 ms budget, 2 failed request(s)"
    )
    straddles = run_line(run(100, 15.0, [10.0, 25.0]), 20.0)
    assert straddles.endswith(
        "p99 15.00 ms (10.00-25.00), undecided against the 20 ms budget (its interval straddles it)"
    )
