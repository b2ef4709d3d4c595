"""The 95% intervals over bench rounds, on synthetic timing samples (nothing is timed): each is
what `scipy.stats.bootstrap` gives for the same statistic, called here directly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats as scipy_stats

from trtconv.bench.messages import RoundSamples
from trtconv.bench.rounds import REWARM_CALLS, Schedule, goal_verdicts, rewarm
from trtconv.measure import stats
from trtconv.measure.bench_result import Settings
from trtconv.measure.loop_budget import Budget
from trtconv.options.bench import SpeedGoal
from trtconv.outputs.confidence import FAILED, INCONCLUSIVE, PASSED, at_least, at_most

RNG = np.random.default_rng(7)
ROUNDS = 12


def scipy_interval(data: tuple[Any, ...], statistic: Any, **options: Any) -> tuple[float, float]:
    """scipy's own BCa interval, with bench's resamples, level and seed."""
    result = scipy_stats.bootstrap(
        data,
        statistic,
        n_resamples=stats.N_RESAMPLES,
        confidence_level=stats.CONFIDENCE,
        method="BCa",
        rng=np.random.default_rng(stats.SEED),
        **options,
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def drifting_rounds(speed: float, drift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Calls and wall ns of rounds of ~0.3 s whose speed follows `drift` (shared by models
    timed in the same rounds) plus a little noise of their own."""
    walls = np.full(ROUNDS, 3e8)
    rate = speed * drift * RNG.normal(1.0, 0.01, ROUNDS)  # calls per second
    return np.round(rate * 0.3).astype(int), walls


def test_throughput_interval_is_scipys_bootstrap_of_batch_calls_over_wall_time() -> None:
    calls, walls = drifting_rounds(1000.0, RNG.normal(1.0, 0.1, ROUNDS))

    def statistic(c: np.ndarray, w: np.ndarray, axis: int = -1) -> np.ndarray:
        return 8 * np.sum(c, axis=axis) / (np.sum(w, axis=axis) / 1e9)

    expected = scipy_interval((calls, walls), statistic, paired=True, vectorized=True)
    assert stats.throughput_interval(8, calls, walls) == pytest.approx(expected, rel=1e-12)
    point = stats.throughput_per_s(8, int(calls.sum()), int(walls.sum()))
    low, high = expected
    assert low <= point <= high


def test_speedup_interval_pairs_rounds_so_shared_drift_cancels() -> None:
    drift = RNG.normal(1.0, 0.2, ROUNDS)  # the machine: +-20% from round to round
    calls, walls = drifting_rounds(3000.0, drift)
    base_calls, base_walls = drifting_rounds(1000.0, drift)

    def ratio(c: Any, w: Any, bc: Any, bw: Any, axis: int = -1) -> Any:
        rate = np.sum(c, axis=axis) / np.sum(w, axis=axis)
        return rate / (np.sum(bc, axis=axis) / np.sum(bw, axis=axis))

    data = (calls, walls, base_calls, base_walls)
    expected = scipy_interval(data, ratio, paired=True, vectorized=True)
    paired = stats.speedup_interval(*data)
    assert paired == pytest.approx(expected, rel=1e-12)
    assert paired[0] < 3.0 < paired[1]
    # Drawing the model's and the baseline's rounds independently keeps the drift: wider.
    unpaired = _unpaired(data, ratio)
    assert paired[1] - paired[0] < (unpaired[1] - unpaired[0]) / 3


def _unpaired(data: tuple[np.ndarray, ...], ratio: Any) -> tuple[float, float]:
    """The speed-up's interval when the model's and the baseline's rounds are resampled
    independently (rounds as indices into each model's own figures)."""
    calls, walls, base_calls, base_walls = data

    def statistic(mine: np.ndarray, theirs: np.ndarray, axis: int = -1) -> np.ndarray:
        m, t = mine.astype(int), theirs.astype(int)
        return ratio(calls[m], walls[m], base_calls[t], base_walls[t], axis=axis)

    indices = np.arange(ROUNDS, dtype=float)
    return scipy_interval((indices, indices), statistic, vectorized=True)


@pytest.mark.parametrize("q", [50, 99])
def test_percentile_interval_is_scipys_bootstrap_of_the_pooled_percentile(q: float) -> None:
    rounds = [RNG.lognormal(-1.0, 0.3 + 0.02 * i, size=300 + 37 * i) for i in range(8)]

    def pooled(indices: np.ndarray) -> float:
        return float(np.percentile(np.concatenate([rounds[int(i)] for i in indices]), q))

    indices = np.arange(len(rounds), dtype=float)
    expected = scipy_interval((indices,), pooled, vectorized=False)
    assert stats.percentile_interval(rounds, q) == pytest.approx(expected, rel=1e-9)


def test_pooled_percentile_of_resampled_rounds_equals_numpy_on_the_concatenation() -> None:
    rounds = [np.round(RNG.exponential(1.0, size=n), 2) for n in (5, 40, 1, 17)]  # with ties
    pooled = stats._Pooled([np.asarray(r) for r in rounds])
    rows = RNG.integers(0, len(rounds), size=(50, len(rounds)))
    for q in (0, 1, 50, 99, 100):
        expected = [np.percentile(np.concatenate([rounds[i] for i in row]), q) for row in rows]
        assert pooled.percentile(rows, q) == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_no_interval_from_one_round_and_a_point_from_rounds_that_never_vary() -> None:
    assert stats.throughput_interval(1, [100], [10**8]) is None
    assert stats.speedup_interval([100], [10**8], [50], [10**8]) is None
    assert stats.percentile_interval([[1.0, 2.0]], 99) is None
    same = stats.throughput_interval(1, [100] * 5, [10**8] * 5)
    assert same == (1000.0, 1000.0)


@pytest.mark.parametrize(
    ("interval", "minimum", "verdict"),
    [
        ((1.10, 1.30), True, PASSED),
        ((1.05, 1.30), True, PASSED),  # the threshold itself meets >=
        ((0.90, 1.04), True, FAILED),
        ((1.00, 1.10), True, INCONCLUSIVE),
        ((0.80, 1.05), False, PASSED),  # <=: the whole interval at or below
        ((1.06, 1.20), False, FAILED),
        ((1.00, 1.10), False, INCONCLUSIVE),
    ],
)
def test_speed_intervals_are_decided_by_the_shared_rule(
    interval: tuple[float, float], minimum: bool, verdict: str
) -> None:
    """The speed gates use the verdict rule of the accuracy intervals (outputs.confidence)."""
    decide = at_least if minimum else at_most
    assert decide(sum(interval) / 2, interval, 1.05) == verdict


# ---------------------------------------------------------------- rounds: budgets and goals


def settings(**budget: Any) -> Settings:
    return Settings(batch_sizes=(1, 8), data="random", device="auto", min_iterations=10, **budget)


def test_the_budget_is_split_between_rounds() -> None:
    calls = [b.iterations for b in settings(iterations=25, rounds=10).round_budgets()]
    assert calls == [3] * 5 + [2] * 5 and sum(c or 0 for c in calls) == 25
    assert settings(iterations=5, rounds=10).round_budgets() == [Budget(iterations=1)] * 5
    timed = settings(duration_s=3.0, rounds=10).round_budgets()
    assert [(b.seconds, b.min_iterations) for b in timed] == [(pytest.approx(0.3), 1)] * 10
    assert settings(duration_s=3.0, rounds=1).round_budgets() == [
        Budget(seconds=3.0, min_iterations=10)
    ]


def test_rounds_are_rewarmed_unless_that_costs_a_slow_model_too_much() -> None:
    fast = RoundSamples(1, [0.05] * 100, 5_000_000, 0)
    slow = RoundSamples(1, [200.0] * 2, 400_000_000, 0)
    budget = Budget(seconds=0.3, min_iterations=1)
    assert rewarm(fast, budget) == Budget(iterations=REWARM_CALLS)
    assert rewarm(slow, budget) == Budget(iterations=0)
    assert rewarm(slow, Budget(iterations=100)) == Budget(iterations=REWARM_CALLS)


def synthetic_round(
    batch_size: int, latency_ms: float, rng: np.random.Generator, calls: int = 20
) -> RoundSamples:
    latencies = list(rng.normal(latency_ms, latency_ms * 0.05, calls))
    return RoundSamples(batch_size, latencies, int(sum(latencies) * 1e6), 0)


def test_goal_verdicts_of_a_clearly_faster_model() -> None:
    rng = np.random.default_rng(1)
    base = [synthetic_round(8, 2.0, rng) for _ in range(6)]
    fast = [synthetic_round(8, 1.0, rng) for _ in range(6)]
    goal = SpeedGoal(batch_size=8, min_speedup=1.5, max_latency_ms_p99=1.5)
    assert goal_verdicts(goal, fast, base) == {
        "min_speedup": PASSED,
        "max_latency_ms_p99": PASSED,
    }
    goal = SpeedGoal(batch_size=8, min_speedup=2.5, max_latency_ms_p99=0.5)
    assert set(goal_verdicts(goal, fast, base).values()) == {FAILED}
    assert goal_verdicts(goal, fast[:1], base[:1]) == {}  # one round: no interval yet


class StandIn:
    """A worker stand-in: rounds of synthetic samples whose speed-up vs the baseline alternates
    around 1.0 (rounds that never settle), so a goal at 1.0 stays undecided."""

    def __init__(self, label: str, latency_ms: float, swing: float = 0.0) -> None:
        self.label, self.latency_ms, self.swing, self.calls = label, latency_ms, swing, 0
        self.rng = np.random.default_rng(len(label))

    def round(self, batch_size: int, warmup: Any, measure: Any) -> RoundSamples:
        self.calls += 1
        factor = 1 + self.swing * (-1) ** self.calls
        return synthetic_round(batch_size, self.latency_ms * factor, self.rng)


def test_a_goal_that_stays_undecided_stops_at_its_time_limit() -> None:
    goal = SpeedGoal(batch_size=8, min_speedup=1.0, time_limit_s=0.0)
    workers = [StandIn("native", 1.0), StandIn("ort", 1.0, swing=0.2)]
    plan = Settings(
        batch_sizes=(1, 8), data="random", device="auto", iterations=40, rounds=4, goal=goal
    )
    schedule = Schedule(workers, plan, "native")  # type: ignore[arg-type]
    measured = schedule.run()
    at_8 = [r for r in measured["ort"] if r.batch_size == 8]
    assert len(at_8) == 4  # the limit left no time for extra rounds
    assert schedule.notes and "ort: still undecided" in schedule.notes[0]


def test_a_goal_adds_rounds_until_decided() -> None:
    goal = SpeedGoal(batch_size=8, min_speedup=1.35, time_limit_s=30.0)
    # 1.5x faster, but every other round 15% slower or faster: the first 2 rounds (1.76x and
    # 1.30x) straddle 1.35; with more rounds the interval narrows around 1.5x and clears it.
    workers = [StandIn("native", 1.5), StandIn("ort", 1.0, swing=0.15)]
    plan = Settings(
        batch_sizes=(8,), data="random", device="auto", iterations=4, rounds=2, goal=goal
    )
    schedule = Schedule(workers, plan, "native")  # type: ignore[arg-type]
    measured = schedule.run()
    assert not schedule.notes
    assert not schedule.undecided(goal)
    assert len(measured["ort"]) > 2 and len(measured["native"]) == len(measured["ort"])
    assert all(r.batch_size == 8 for r in measured["ort"])
