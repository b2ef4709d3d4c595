"""How sure a serving run's p99 is, and the rates a latency budget is surely met or missed at.

LoadGen writes every query's latency to its trace (in the Server scenario `"Latency"` events:
the delay from the scheduled issue time to the issue, and from the issue to the completion;
their sum is the latency its summary's percentiles are taken over; in SingleStream and Offline
each `"Sample"` event's issue and completion times). The p99's interval is the exact,
distribution-free order-statistic interval over those latencies (scipy's `quantile_test`): the
ranks between which the true 99th percentile lies with 95% confidence, from the binomial law of
how many queries fall below it. No bootstrap: resampling cannot see beyond the largest latency
seen, which a p99 of a few hundred queries is close to. Too few queries leave the interval
unbounded above (368 are needed at 95%: `queries_to_bound_p99`); its high end is then None.

The rate bounds feed `min_qps_at_budget` (trtconv.release.gates): the budget is *surely met*
at a run's rate when its p99's whole interval is within the budget, *surely missed* when the
whole interval is above it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trtconv.core.numbers import human
from trtconv.measure.server_bench_result import LoadRun
from trtconv.outputs.confidence import CI95, FAILED, PASSED, at_most

PERCENTILE = 0.99
# A run at rate r for t seconds holds a Poisson number of queries around r * t: aiming a quarter
# above the count that bounds the p99 leaves it short about once in a hundred thousand runs.
QUERY_MARGIN = 1.25
LATENCY_EVENT = re.compile(
    r'"name"\s*:\s*"Latency".*?"issue_delay"\s*:\s*(\d+)\s*,\s*"issue_to_done"\s*:\s*(\d+)'
)


def trace_latencies_ms(trace: str) -> np.ndarray:
    """Every query's latency (ms) from LoadGen's mlperf_log_trace.json text: the Server
    scenario's Latency events, else (SingleStream, Offline, which write none) each Sample's
    issue to completion. The file is not strict JSON (some keys are quoted twice), so the events
    are read by pattern."""
    found = [int(delay) + int(done) for delay, done in LATENCY_EVENT.findall(trace)]
    if not found:
        found = [int(done) - int(start) for start, done in SAMPLE_EVENT.findall(trace)]
    return np.asarray(found, dtype=np.float64) / 1e6


SAMPLE_EVENT = re.compile(r'"issue_start_ns"\s*:\s*(\d+)\s*,\s*"complete_ns"\s*:\s*(\d+)')


def trace_file_latencies_ms(path: Path) -> np.ndarray:
    """`trace_latencies_ms` of a trace file, read a line at a time (a long run's trace holds
    about 1.5 kB per query); empty when there is none."""
    if not path.is_file():
        return trace_latencies_ms("")
    with path.open(encoding="utf-8", errors="replace") as lines:
        kept = [line for line in lines if '"Latency"' in line or '"complete_ns"' in line]
    return trace_latencies_ms("".join(kept))


def percentile_ms(latencies: np.ndarray, level: float = PERCENTILE) -> float:
    """LoadGen's percentile: the sorted latency at index floor(n * level)."""
    ordered = np.sort(latencies)
    return float(ordered[min(int(len(ordered) * level), len(ordered) - 1)])


def p99_interval(latencies: np.ndarray, level: float = CI95) -> list[float | None] | None:
    """The 95% order-statistic interval of the 99th percentile of `latencies` (ms): [low,
    high], high None when too few queries bound it; None without latencies."""
    if len(latencies) == 0:
        return None
    from scipy.stats import quantile_test

    test = quantile_test(latencies, q=percentile_ms(latencies), p=PERCENTILE)
    found = test.confidence_interval(confidence_level=level)
    low, high = float(found.low), float(found.high)
    return [
        round(low, 3) if math.isfinite(low) else round(float(np.min(latencies)), 3),
        round(high, 3) if math.isfinite(high) else None,
    ]


def queries_to_bound_p99(level: float = CI95, percentile: float = PERCENTILE) -> int:
    """The fewest latencies whose `p99_interval` has an upper end: the largest of n lies above
    the true percentile with probability 1 - percentile^n, which must reach (1 + level) / 2
    (368 for a p99 at 95%)."""
    return math.ceil(math.log((1 - level) / 2) / math.log(percentile))


def bounding_rate(run_s: float) -> float:
    """The lowest rate (queries/s) at which a run of `run_s` seconds surely holds queries
    enough to bound its p99 from above: below it no run of that length can show a budget met."""
    return queries_to_bound_p99() * QUERY_MARGIN / run_s


def next_search_rate(
    rate: float, run: LoadRun, met: float, missed: float | None, run_s: float
) -> float:
    """The rate search's next rate after `run` at `rate`: doubling while runs meet the budget,
    then bisecting between the best rate that met it (`met`, 0 for none) and the lowest that
    did not (`missed`). A run that met it on too few queries to show it surely (its p99
    interval open above) is followed by one at `bounding_rate` at least: a slow first probe
    must not spend the search on runs that can decide nothing."""
    if missed is not None:
        return (met + missed) / 2 if met else rate / 2
    interval = run.latency_ms_p99_ci95
    if interval is not None and interval[1] is None:
        return max(rate * 2, bounding_rate(run_s))
    return rate * 2


def budget_verdict(run: LoadRun, budget_ms: float) -> str:
    """passed (surely met), failed (surely missed) or inconclusive, from the run's p99
    interval (`at_most`, the rule of every gate); the point rule without an interval."""
    interval = run.latency_ms_p99_ci95
    if interval is None:
        return at_most(run.latency_ms_p99, None, budget_ms)
    low, high = interval
    return at_most(run.latency_ms_p99, (low or 0.0, math.inf if high is None else high), budget_ms)


def rate_bounds(runs: Sequence[LoadRun], budget_ms: float) -> list[float | None]:
    """[the highest completed rate at which the budget was surely met, the lowest at which it
    was surely missed]; None where no run decided that side. A run with errors decides nothing
    met."""
    verdicts = [(run, budget_verdict(run, budget_ms)) for run in runs]
    met = [run.completed_qps for run, verdict in verdicts if verdict == PASSED and not run.errors]
    missed = [run.completed_qps for run, verdict in verdicts if verdict == FAILED]
    return [max(met) if met else None, min(missed) if missed else None]


def p99_interval_text(interval: list[float | None] | None, missing: str = "-") -> str:
    """A p99 interval (ms) as "low-high", "low-open" when too few queries bound it from above,
    `missing` without one."""
    if interval is None:
        return missing
    low, high = interval
    return f"{low:.2f}-{'open' if high is None else f'{high:.2f}'}"


def run_line(run: LoadRun, budget_ms: float) -> str:
    """One run as a progress line: its rate, its p99 with the interval and what that says of
    the budget, e.g. "at 153.3 queries/s (152.8/s completed): p99 3.21 ms (2.90-4.10), meets
    the 50 ms budget"."""
    interval = run.latency_ms_p99_ci95
    shown = "" if interval is None else f" ({p99_interval_text(interval)})"
    verdict = budget_verdict(run, budget_ms)
    said = {PASSED: "meets", FAILED: "misses"}.get(verdict, "undecided against")
    errors = f", {run.errors} failed request(s)" if run.errors else ""
    rates = f"at {human(run.target_qps)} queries/s ({human(run.completed_qps)}/s completed)"
    p99 = f"p99 {run.latency_ms_p99:.2f} ms{shown}"
    straddles = " (its interval straddles it)" if verdict not in (PASSED, FAILED) else ""
    return f"{rates}: {p99}, {said} the {human(budget_ms)} ms budget{straddles}{errors}"
