"""Latency statistics as pure functions of an array of samples (after trtexec and TF-TRT).

Definitions (also in BENCHMARKS.md):

- percentiles use linear interpolation between closest ranks (numpy's default method);
- the trimmed mean drops `TRIM_FRACTION` (10%) of the samples at each end, then averages, like
  `scipy.stats.trim_mean(x, 0.1)`, which TF-TRT's benchmark runner reports by default;
- the coefficient of variation is the population standard deviation over the mean, in percent,
  as trtexec computes it for GPU compute time; `cv_trimmed_percent` is the same over the samples
  the trimmed mean keeps (the central 80%). Stability warnings use the trimmed CV: on a CPU a few
  scheduler stalls of a 30 µs call make the raw CV 60-100% on an otherwise quiet, steady run
  (measured here), while a disturbed run moves the whole central mass and still trips it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from trtconv.outputs.confidence import Interval

TRIM_FRACTION = 0.1
PERCENTILES = (50, 90, 95, 99)
# trtexec warns when GPU compute time varies by more than 1% (kUNSTABLE_PERF_REPORTING_THRESHOLD
# in samples/common/sampleReporting.cpp): kernels timed with CUDA events are that steady. A CPU
# call also goes through the Python interpreter, the OS scheduler and frequency scaling, and a
# sub-millisecond call (digits-cnn) moves by tens of microseconds for those reasons alone; since
# the standard deviation is dominated by rare stalls, a run disturbed by other load shows tens or
# hundreds of percent. The warning therefore reads the trimmed CV (central 80%); 10% tolerates the
# CPU's normal jitter and still flags disturbed runs; BENCHMARKS.md records quiet-machine CVs.
CV_WARN_PERCENT_CPU = 10.0
CV_WARN_PERCENT_GPU = 1.0


@dataclass(frozen=True)
class LatencyStats:
    """Summary of latency samples, all in milliseconds except `cv_percent` and `count` (a bench
    row holds them as `latency_ms_p99`, ..., `iterations`)."""

    count: int
    min: float
    mean: float
    trimmed_mean: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    std: float
    cv_percent: float
    cv_trimmed_percent: float


def as_samples(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A 1-D float64 array; raises ValueError when it is empty or holds NaN/Inf."""
    array = np.asarray(values, dtype=np.float64).ravel()
    if array.size == 0:
        raise ValueError("no samples")
    if not np.isfinite(array).all():
        raise ValueError("samples hold NaN or Inf")
    return array


def percentile(values: Sequence[float] | np.ndarray, q: float) -> float:
    """The q-th percentile (0..100), linear interpolation between closest ranks."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside [0, 100]")
    return float(np.percentile(as_samples(values), q))


def trimmed(values: Sequence[float] | np.ndarray, fraction: float = TRIM_FRACTION) -> np.ndarray:
    """The sorted samples without int(fraction * n) of them at each end."""
    if not 0 <= fraction < 0.5:
        raise ValueError(f"trim fraction {fraction} is outside [0, 0.5)")
    array = np.sort(as_samples(values))
    cut = int(fraction * array.size)
    return array[cut : array.size - cut]


def trimmed_mean(values: Sequence[float] | np.ndarray, fraction: float = TRIM_FRACTION) -> float:
    """Mean after dropping int(fraction * n) of the sorted samples at each end."""
    return float(trimmed(values, fraction).mean())


def coefficient_of_variation(values: Sequence[float] | np.ndarray) -> float:
    """Population standard deviation over the mean, in percent (0 for constant samples)."""
    array = as_samples(values)
    mean = float(array.mean())
    if mean == 0:
        return 0.0
    return float(array.std() / mean * 100.0)


def summarize(latencies_ms: Sequence[float] | np.ndarray) -> LatencyStats:
    """All the latency statistics trtconv reports for one model and batch size."""
    array = as_samples(latencies_ms)
    p50, p90, p95, p99 = (float(v) for v in np.percentile(array, PERCENTILES))
    return LatencyStats(
        count=int(array.size),
        min=float(array.min()),
        mean=float(array.mean()),
        trimmed_mean=trimmed_mean(array),
        p50=p50,
        p90=p90,
        p95=p95,
        p99=p99,
        max=float(array.max()),
        std=float(array.std()),
        cv_percent=coefficient_of_variation(array),
        cv_trimmed_percent=coefficient_of_variation(trimmed(array)),
    )


def throughput_per_s(batch_size: int, iterations: int, wall_ns: int) -> float:
    """Samples per second over the timed loop's wall time (trtexec: queries / total walltime)."""
    if wall_ns <= 0:
        raise ValueError("wall time must be positive")
    return batch_size * iterations / (wall_ns / 1e9)


def speedup(throughput: float, baseline_throughput: float | None) -> float | None:
    """Throughput relative to the baseline's at the same batch size; None without a baseline."""
    if baseline_throughput is None or baseline_throughput <= 0:
        return None
    return throughput / baseline_throughput


# ---------------------------------------------------------------------------- intervals over rounds
#
# bench times every model in rounds, interleaved (native, A, B, native, A, B, ...), so a drift of
# the machine's speed hits every model in the same round. A figure's 95% interval comes from a
# bootstrap over rounds (`scipy.stats.bootstrap`, BCa, N_RESAMPLES resamples, seeded): a round is
# the unit resampled, with all of its calls, and a speed-up resamples the SAME rounds of the model
# and the baseline together (paired), so what drifted between rounds cancels in the ratio. Each
# statistic is the one the point figure uses, recomputed over the resampled rounds: throughput is
# batch x calls over wall time summed over the rounds, the speed-up the ratio of two such
# throughputs, a latency percentile that of the pooled calls of the rounds.

CONFIDENCE = 0.95
N_RESAMPLES = 9999
SEED = 0
# bench's verdicts of a figure against a threshold, by its interval.
INTERVAL_METHOD = (
    f"{CONFIDENCE:.0%} bootstrap over rounds (scipy.stats.bootstrap, BCa, {N_RESAMPLES} resamples, "
    f"seed {SEED}; speed-ups paired by round)"
)


def _bootstrap(data: tuple[np.ndarray, ...], statistic: Any, paired: bool) -> Interval | None:
    """The 95% BCa interval of `statistic` over the rounds in `data` (one array per variable,
    one value per round); None with fewer than 2 rounds. When BCa is undefined (every resample
    gives the same value, or the jackknife is degenerate) the percentile interval is used, and
    when that is too, the interval is the point value itself (nothing varied)."""
    import warnings

    from scipy import stats as scipy_stats

    if len(data[0]) < 2:
        return None
    point = float(statistic(*data, axis=-1))
    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # degenerate data: handled below
            result = scipy_stats.bootstrap(
                data,
                statistic,
                n_resamples=N_RESAMPLES,
                vectorized=True,
                paired=paired,
                confidence_level=CONFIDENCE,
                method=method,
                rng=np.random.default_rng(SEED),
            )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if np.isfinite(low) and np.isfinite(high):
            return min(low, point), max(high, point)
    return point, point


def _rate(calls: np.ndarray, wall_ns: np.ndarray, axis: int = -1) -> np.ndarray:
    """Calls per second over the summed wall time of the rounds on `axis`."""
    return np.sum(calls, axis=axis) / (np.sum(wall_ns, axis=axis) / 1e9)


def throughput_interval(
    batch_size: int, calls: Sequence[int], wall_ns: Sequence[int]
) -> Interval | None:
    """95% interval of `throughput_per_s` (batch x calls over the wall time of all rounds), by a
    bootstrap over rounds; `calls` and `wall_ns` hold one value per round. None with < 2 rounds."""

    def statistic(c: np.ndarray, w: np.ndarray, axis: int = -1) -> np.ndarray:
        return batch_size * _rate(c, w, axis)

    data = (np.asarray(calls, dtype=np.float64), np.asarray(wall_ns, dtype=np.float64))
    return _bootstrap(data, statistic, paired=True)


def speedup_interval(
    calls: Sequence[int],
    wall_ns: Sequence[int],
    baseline_calls: Sequence[int],
    baseline_wall_ns: Sequence[int],
) -> Interval | None:
    """95% interval of the speed-up (throughput over the baseline's at the same batch size) by a
    paired bootstrap over rounds: round i of the model and round i of the baseline, timed one
    after the other, are drawn together. Rounds beyond the shorter list are left out. None with
    < 2 rounds."""
    count = min(len(calls), len(baseline_calls))
    data = tuple(
        np.asarray(values[:count], dtype=np.float64)
        for values in (calls, wall_ns, baseline_calls, baseline_wall_ns)
    )

    def statistic(
        c: np.ndarray, w: np.ndarray, bc: np.ndarray, bw: np.ndarray, axis: int = -1
    ) -> np.ndarray:
        return _rate(c, w, axis) / _rate(bc, bw, axis)

    return _bootstrap(data, statistic, paired=True)


def percentile_interval(rounds: Sequence[Sequence[float]], q: float) -> Interval | None:
    """95% interval of the q-th percentile (linear, as `percentile`) of all calls pooled, by a
    bootstrap over rounds: each resample pools the calls of the rounds drawn (a round drawn twice
    counts twice). None with < 2 rounds."""
    if len(rounds) < 2:
        return None
    pooled = _Pooled([as_samples(samples) for samples in rounds])

    def statistic(indices: np.ndarray, axis: int = -1) -> np.ndarray:
        return pooled.percentile(indices, q)

    return _bootstrap((np.arange(len(rounds), dtype=np.float64),), statistic, paired=False)


class _Pooled:
    """The calls of every round, for percentiles of resampled rounds without concatenating
    them: `percentile(indices, q)` equals `np.percentile(np.concatenate([rounds[i] for i in
    row]), q)` for each row of round indices, by a binary search over the pooled sorted values
    (about log2(calls) steps of one `searchsorted` per round, for all resamples at once)."""

    def __init__(self, rounds: list[np.ndarray]) -> None:
        self.sorted_rounds = [np.sort(samples) for samples in rounds]
        self.values = np.sort(np.concatenate(rounds))

    def _counts(self, values: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Per resample, how many pooled calls (round i counted weights[:, i] times) are <= its
        value."""
        found = np.zeros(values.shape, dtype=np.int64)
        for index, samples in enumerate(self.sorted_rounds):
            found += weights[:, index] * np.searchsorted(samples, values, side="right")
        return found

    def _kth(self, weights: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Per resample, the k-th (0-based) smallest of its pooled calls."""
        low = np.zeros(len(k), dtype=np.int64)
        high = np.full(len(k), self.values.size - 1, dtype=np.int64)
        while np.any(low < high):
            middle = (low + high) // 2
            above = self._counts(self.values[middle], weights) > k
            high = np.where(above, middle, high)
            low = np.where(above, low, middle + 1)
        return self.values[low]

    def percentile(self, indices: np.ndarray, q: float) -> np.ndarray:
        """The q-th percentile of the pooled calls of each row of round `indices` (any leading
        shape; rounds on the last axis)."""
        shape = indices.shape[:-1]
        rows = indices.reshape(-1, indices.shape[-1]).astype(np.int64)
        count = len(self.sorted_rounds)
        weights = np.stack([np.count_nonzero(rows == i, axis=1) for i in range(count)], axis=1)
        sizes = np.array([samples.size for samples in self.sorted_rounds])
        total = weights @ sizes
        position = (total - 1) * (q / 100.0)
        below = np.floor(position).astype(np.int64)
        lower = self._kth(weights, below)
        upper = self._kth(weights, np.minimum(below + 1, total - 1))
        return (lower + (position - below) * (upper - lower)).reshape(shape)
