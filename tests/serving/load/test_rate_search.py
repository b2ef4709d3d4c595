"""The rate search of `bench --scenario server`: each run decided on its p99's interval, and a
miss in the tail only run once more. LoadGen's runs are replaced by a fake serving figures given
per rate (the search's decisions are under test; tests/serving/load/test_server_bench.py runs
LoadGen against a served model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trtconv.measure.server_bench_result import LoadRun
from trtconv.options.server_bench import ServerBenchOptions
from trtconv.serving.load import rate_search
from trtconv.serving.load.rate_search import missed_by_a_stall, search, search_step

BUDGET = 20.0


def run(
    qps: float, p90: float, p99: float, interval: list[float | None] | None, errors: int = 0
) -> LoadRun:
    return LoadRun(
        target_qps=qps,
        completed_qps=qps,
        latency_ms_p50=1.0,
        latency_ms_p90=p90,
        latency_ms_p99=p99,
        meets_budget=p99 <= BUDGET,
        loadgen_result="INVALID",
        loadgen_reasons=[],
        queries=2000,
        errors=errors,
        latency_ms_p99_ci95=interval,
    )


def test_a_run_is_met_only_when_its_interval_shows_it() -> None:
    surely = run(100, 5.0, 8.0, [6.0, 12.0])
    straddles = run(200, 9.0, 15.0, [10.0, 25.0])  # met on the point alone
    too_few = run(50, 5.0, 8.0, [6.0, None])
    assert search_step(100, surely, BUDGET, 0.0, None) == (100, None)
    assert search_step(200, straddles, BUDGET, 100, None) == (100, 200)  # search below it
    assert search_step(50, too_few, BUDGET, 0.0, None) == (0.0, None)  # says nothing yet
    errors = run(100, 5.0, 8.0, [6.0, 12.0], errors=2)
    assert search_step(100, errors, BUDGET, 0.0, 400) == (0.0, 100)


def test_a_miss_in_the_tail_only_is_a_stall_a_saturated_server_is_not() -> None:
    assert missed_by_a_stall(run(300, 6.0, 45.0, [30.0, 60.0]), BUDGET)
    assert not missed_by_a_stall(run(300, 35.0, 45.0, [30.0, 60.0]), BUDGET)  # p90 missed too
    assert not missed_by_a_stall(run(300, 14.0, 23.0, [21.0, 25.0]), BUDGET)  # near capacity
    assert not missed_by_a_stall(run(300, 6.0, 15.0, [10.0, 25.0]), BUDGET)  # not surely missed
    assert not missed_by_a_stall(run(300, 6.0, 45.0, [30.0, 60.0], errors=1), BUDGET)


class Server:
    """A served model that meets the budget up to `capacity` queries/s, with one stall (a tail
    of late queries) on its `stall_on`-th run."""

    def __init__(self, capacity: float, stall_on: int | None = None) -> None:
        self.capacity, self.stall_on = capacity, stall_on
        self.rates: list[float] = []

    def load_run(self, client: Any, name: str, inputs: Any, qps: float, *rest: Any) -> LoadRun:
        self.rates.append(qps)
        if len(self.rates) == self.stall_on:
            return run(qps, 6.0, 45.0, [30.0, 60.0])
        if qps <= self.capacity:
            return run(qps, 5.0, 8.0, [6.0, 12.0])
        return run(qps, 35.0, 45.0, [30.0, 60.0])


@pytest.mark.parametrize("stall_on", [None, 3])
def test_a_stall_is_run_again_and_the_search_ends_where_it_would_without_it(
    stall_on: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = Server(capacity=700, stall_on=stall_on)
    monkeypatch.setattr(rate_search, "load_run", server.load_run)
    options = ServerBenchOptions((Path("m"),), BUDGET, run_s=3.0, search_runs=5)
    runs = search(None, "m", [], options, 100.0)
    decided = [r for r in runs if not missed_by_a_stall(r, BUDGET)]
    # 100, 200, 400 met, 800 missed, 600 met: the same five decisions with or without the stall
    assert [r.target_qps for r in decided] == [100, 200, 400, 800, 600]
    assert len(runs) == 5 + (stall_on is not None)  # the stalled run kept, and its repeat
    if stall_on:
        assert server.rates[stall_on - 1] == server.rates[stall_on] == 400


def test_the_reported_rate_is_the_fastest_surely_met_else_the_fastest_met_on_its_point() -> None:
    from trtconv.serving.load.rate_search import headline_run

    surely = run(300, 5.0, 8.0, [6.0, 12.0])
    straddles = run(400, 9.0, 19.5, [18.0, 21.0])  # met on the point alone, undecided
    missed = run(800, 35.0, 45.0, [30.0, 60.0])
    assert headline_run([surely, straddles, missed], BUDGET) is surely  # was: straddles
    assert headline_run([straddles, missed], BUDGET) is straddles  # nothing surely met
    assert headline_run([missed], BUDGET) is None
    errors = run(500, 5.0, 8.0, [6.0, 12.0], errors=1)
    assert headline_run([surely, errors], BUDGET) is surely
