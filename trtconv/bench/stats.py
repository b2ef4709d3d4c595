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
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

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
    """Summary of latency samples, all in milliseconds except `cv_percent` and `count`."""

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

    def to_dict(self, prefix: str = "latency_ms_") -> dict[str, Any]:
        """Flat, unit-suffixed keys: `latency_ms_p99`, ..., plus `cv_percent` and `iterations`."""
        data = asdict(self)
        flat: dict[str, Any] = {
            "iterations": data.pop("count"),
            "cv_percent": data.pop("cv_percent"),
            "cv_trimmed_percent": data.pop("cv_trimmed_percent"),
        }
        flat.update({f"{prefix}{key}": value for key, value in data.items()})
        return flat


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
