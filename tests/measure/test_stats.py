"""Statistics as pure functions on known arrays."""

from __future__ import annotations

import numpy as np
import pytest

from trtconv.measure import stats

SKEWED = [1.0] * 9 + [100.0]


@pytest.mark.parametrize("q", [0, 10, 50, 90, 95, 99, 100])
def test_percentile_matches_numpy_linear(q: float) -> None:
    values = np.random.default_rng(1).exponential(2.0, size=257)
    assert stats.percentile(values, q) == pytest.approx(np.percentile(values, q))


def test_summary_of_one_to_hundred() -> None:
    summary = stats.summarize(np.arange(1, 101, dtype=float))
    assert (summary.min, summary.max, summary.count) == (1.0, 100.0, 100)
    assert summary.p50 == pytest.approx(50.5)
    assert summary.p90 == pytest.approx(90.1)
    assert summary.p99 == pytest.approx(99.01)
    # 10% off each end leaves 11..90, whose mean is 50.5.
    assert summary.trimmed_mean == pytest.approx(50.5)
    assert summary.min <= summary.p50 <= summary.p90 <= summary.p95 <= summary.p99 <= summary.max


def test_trimmed_mean_drops_the_outlier_the_mean_keeps() -> None:
    assert stats.trimmed_mean(SKEWED) == pytest.approx(1.0)
    assert stats.summarize(SKEWED).mean == pytest.approx(10.9)


def test_trimmed_mean_matches_scipy() -> None:
    scipy_stats = pytest.importorskip("scipy.stats")
    values = np.random.default_rng(2).lognormal(size=73)
    for fraction in (0.0, 0.05, 0.1, 0.25):
        expected = scipy_stats.trim_mean(values, fraction)
        assert stats.trimmed_mean(values, fraction) == pytest.approx(expected)


def test_trimmed_mean_of_few_samples_keeps_them_all() -> None:
    # int(0.1 * 5) == 0: nothing to trim.
    assert stats.trimmed_mean([1, 2, 3, 4, 10]) == pytest.approx(4.0)


def test_coefficient_of_variation_is_population_std_over_mean() -> None:
    # mean 5, population standard deviation 2.
    assert stats.coefficient_of_variation([2, 4, 4, 4, 5, 5, 7, 9]) == pytest.approx(40.0)
    assert stats.coefficient_of_variation([3.0, 3.0, 3.0]) == 0.0
    assert stats.coefficient_of_variation([0.0, 0.0]) == 0.0


@pytest.mark.parametrize("bad", [[], [1.0, float("nan")], [float("inf")]])
def test_bad_samples_raise(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        stats.summarize(bad)


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError):
        stats.trimmed_mean([1.0, 2.0], 0.5)
    with pytest.raises(ValueError):
        stats.percentile([1.0], 101)
    with pytest.raises(ValueError):
        stats.throughput_per_s(8, 10, 0)


def test_throughput_and_speedup() -> None:
    assert stats.throughput_per_s(8, 100, 2_000_000_000) == pytest.approx(400.0)
    assert stats.speedup(400.0, 100.0) == pytest.approx(4.0)
    assert stats.speedup(400.0, None) is None


def test_trimmed_cv_ignores_rare_stalls_but_not_a_spread() -> None:
    steady = np.full(1000, 0.030)
    steady[::100] = 1.0  # ten scheduler stalls of a 30 µs call
    summary = stats.summarize(steady)
    assert summary.cv_percent > 100
    assert summary.cv_trimmed_percent == pytest.approx(0.0)
    spread = np.linspace(0.02, 0.04, 1000)  # the whole central mass moves
    assert stats.summarize(spread).cv_trimmed_percent > 10
