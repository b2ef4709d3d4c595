"""How sure a measured rate is: its interval, and the three-valued rule verdicts are decided by.

Every rate a validation measures (top-1 or decision agreement, the share of samples within
tolerance, each model's accuracy) is k of n samples: its interval is the Wilson score interval
(as scipy's `binomtest(k, n).proportion_ci` computes it). The accuracy drop is a difference of
two proportions measured on the SAME samples (reference and candidate), so its interval is a
paired bootstrap over the per-sample correctness (`scipy.stats.bootstrap(paired=True)`, BCa,
seeded).

The rule: a figure that must reach a bound *passes* when its interval clears the bound, *fails*
when the interval cannot reach it, and is *inconclusive* when the interval straddles it (more
samples would decide). `confidence` 0 restores point decisions: the figure itself against the
bound, as before intervals. scipy loads inside the functions (`trtconv --help` stays fast).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

PASSED, FAILED, INCONCLUSIVE = "passed", "failed", "inconclusive"
# The level of the intervals every report carries (`<figure>_ci95`), whatever decides verdicts.
CI95 = 0.95
# The bootstrap's resamples (scipy's default) and seed: the same data gives the same interval.
BOOTSTRAP_RESAMPLES = 9999
BOOTSTRAP_SEED = 0
# Resamples per vectorised call: bounds the bootstrap's memory on large validations.
BOOTSTRAP_BATCH = 1000
# samples_needed searches up to this many samples; beyond it a figure is "undecidable".
MAX_SAMPLES = 10**8

Interval = tuple[float, float]


def proportion_interval(successes: int, samples: int, level: float = CI95) -> Interval | None:
    """The Wilson score interval of `successes` out of `samples` at `level`; None without
    samples. Newcombe's closed form, computed as scipy's `binomtest(k, n).proportion_ci(
    method="wilson")` computes it, without the exact p-value `binomtest` works out first
    (1.7 ms a call here, where this takes microseconds: `samples_needed` calls it a dozen times,
    and the live verdict of `serve --shadow` after every batch)."""
    if samples < 1:
        return None
    from scipy.special import ndtri

    k, n = int(successes), int(samples)
    p = k / n
    z = float(ndtri(0.5 + 0.5 * level))
    denominator = 2 * (n + z**2)
    centre = (2 * n * p + z**2) / denominator
    delta = z / denominator * math.sqrt(4 * n * p * (1 - p) + z**2)
    return 0.0 if k == 0 else centre - delta, 1.0 if k == n else centre + delta


def mean_interval(mean: float, samples: int, level: float = CI95) -> Interval | None:
    """The Wilson score interval of a mean of `samples` per-sample values in [0, 1] (a class
    map's per-sample agreement): Wilson's closed form at p = `mean`, n = `samples`. Values in
    [0, 1] with mean p vary at most as p(1 - p), a 0/1 sample's, so the interval is at least as
    wide as it must be. None without samples."""
    if samples < 1:
        return None
    from scipy.stats import norm

    z = float(norm.ppf(0.5 + level / 2))
    centre = (mean + z * z / (2 * samples)) / (1 + z * z / samples)
    half = (
        z
        / (1 + z * z / samples)
        * math.sqrt(max(mean * (1 - mean), 0.0) / samples + z * z / (4 * samples * samples))
    )
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_difference_interval(
    first: np.ndarray, second: np.ndarray, level: float = CI95
) -> Interval | None:
    """The interval of mean(first) - mean(second), two 0/1 vectors over the same samples (the
    reference's and the candidate's correctness: the accuracy drop). None without samples.

    A paired bootstrap (BCa, seeded, BOOTSTRAP_RESAMPLES resamples): the samples are resampled
    together, so what the two models share cancels. scipy has no closed form for a difference
    of paired proportions; the bootstrap needs none. When every sample differs alike (usually:
    none differs) no resample varies and the interval is that one value: the bootstrap cannot
    see differences that never occurred. The agreement check bounds those (a sample's
    correctness can differ only where the two models' decisions do).
    """
    first, second = np.asarray(first, np.float64), np.asarray(second, np.float64)
    if not len(first):
        return None
    differences = first - second
    if np.all(differences == differences[0]):
        # No resample can vary (usually: no sample differs). BCa is undefined there; the
        # difference seen is the interval. What was not seen is bounded by the agreement check
        # (a sample's correctness differs only where the decisions differ).
        return float(differences[0]), float(differences[0])
    from scipy.stats import bootstrap

    found = bootstrap(
        (first, second),
        _mean_difference,
        paired=True,
        vectorized=True,
        confidence_level=level,
        n_resamples=BOOTSTRAP_RESAMPLES,
        batch=BOOTSTRAP_BATCH,
        method="BCa",
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    ).confidence_interval
    return float(found.low), float(found.high)


def _mean_difference(first: np.ndarray, second: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.asarray(first.mean(axis=axis) - second.mean(axis=axis))


def at_least(value: float, interval: Interval | None, minimum: float) -> str:
    """PASSED when `interval` clears `minimum` (its low end reaches it), FAILED when it cannot
    reach it (its high end is below), else INCONCLUSIVE. `interval` None: the point rule."""
    if interval is None:
        return PASSED if value >= minimum else FAILED
    low, high = interval
    if low >= minimum:
        return PASSED
    return FAILED if high < minimum else INCONCLUSIVE


def at_most(value: float, interval: Interval | None, maximum: float) -> str:
    """PASSED when `interval` stays at or below `maximum`, FAILED when it lies wholly above,
    else INCONCLUSIVE. `interval` None: the point rule."""
    if interval is None:
        return PASSED if value <= maximum else FAILED
    low, high = interval
    if high <= maximum:
        return PASSED
    return FAILED if low > maximum else INCONCLUSIVE


def samples_needed(rate: float, bound: float, level: float = CI95) -> int | None:
    """About how many samples would decide a rate measured at `rate` against `bound`: the
    fewest n whose Wilson interval at that rate (round(rate * n) of n) clears the bound, above
    it when `rate` > `bound` (passes) and below it when `rate` < `bound` (fails). None when no
    count decides it (the rate is the bound, or the bound is 1 or 0 and cannot be cleared)."""
    if rate == bound or not 0 < level < 1:
        return None

    def decides(samples: int) -> bool:
        # Counts rounded against the decision: a small n must not look decided by rounding (6/7
        # as 3 of 4 would "fail" 0.97 at n=4 although 6 of 7 cannot).
        above = rate > bound
        count = math.floor(rate * samples) if above else math.ceil(rate * samples)
        interval = proportion_interval(count, samples, level)
        assert interval is not None
        return interval[0] >= bound if above else interval[1] < bound

    return _smallest(decides)


def samples_to_show(minimum: float, level: float = CI95) -> int | None:
    """The fewest samples that could ever show a rate of at least `minimum`: those at which
    even n of n (every sample agreeing) clears it. None when none can (`minimum` 1)."""
    if minimum <= 0:
        return 1
    return samples_needed(1.0, minimum, level)


def rate_to_show(minimum: float, samples: int, level: float = CI95) -> float | None:
    """The lowest rate k/n (n = `samples`) whose Wilson interval at `level` clears `minimum`:
    what a search must reach on that many samples for the rule to pass it. None when even n of n
    does not."""
    if samples < 1:
        return None

    def shows(successes: int) -> bool:
        interval = proportion_interval(successes, samples, level)
        return interval is not None and interval[0] >= minimum

    if not shows(samples):
        return None
    low, high = -1, samples  # shows(high) holds; shows(low) does not (or low is -1)
    while high - low > 1:
        middle = (low + high) // 2
        if shows(middle):
            high = middle
        else:
            low = middle
    return high / samples


def difference_samples_needed(
    value: float, interval: Interval, bound: float, samples: int
) -> int | None:
    """About how many samples would put a paired difference measured at `value`, with
    `interval` on `samples` samples, wholly on one side of `bound`: the interval narrows as
    1/sqrt(n), so n = samples * (half-width / distance to the bound)^2. None when `value` is the
    bound."""
    distance = abs(bound - value)
    if distance == 0 or samples < 1:
        return None
    half_width = (interval[1] - interval[0]) / 2
    return max(samples + 1, math.ceil(samples * (half_width / distance) ** 2))


def _smallest(decides: Callable[[int], bool]) -> int | None:
    """The smallest n in [1, MAX_SAMPLES] for which `decides(n)` holds, taking it as monotone
    (doubling, then bisection); None when even MAX_SAMPLES does not."""
    high = 1
    while not decides(high):
        if high >= MAX_SAMPLES:
            return None
        high = min(high * 2, MAX_SAMPLES)
    low = high // 2  # decides(low) is False (or low is 0)
    while high - low > 1:
        middle = (low + high) // 2
        if decides(middle):
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True)
class Rate:
    """k of n samples: a measured rate, its 95% interval (reported) and its decision against a
    bound at the `confidence` level (0: the point rule). `successes` may be fractional: the sum
    of per-sample values in [0, 1] (a class map's per-sample agreement), whose interval is
    `mean_interval`'s."""

    successes: float
    samples: int

    @property
    def value(self) -> float:
        """k / n (1.0 without samples: nothing disagreed)."""
        return self.successes / self.samples if self.samples else 1.0

    def interval(self, level: float = CI95) -> Interval | None:
        """The Wilson interval at `level` (None without samples)."""
        if float(self.successes).is_integer():
            return proportion_interval(int(self.successes), self.samples, level)
        return mean_interval(self.value, self.samples, level)

    def decide(self, minimum: float, confidence: float) -> str:
        """PASSED, FAILED or INCONCLUSIVE against `minimum`, at `confidence` (0: point)."""
        decision = self.interval(confidence) if confidence > 0 else None
        return at_least(self.value, decision, minimum)


def percent(level: float) -> str:
    """0.95 -> '95%', 0.999 -> '99.9%'."""
    return f"{level * 100:g}%"


def interval_text(
    value: float, interval: Interval | None, samples: int, signed: bool = False, note: str = ""
) -> str:
    """'0.981 (0.898-0.997, n=52; NOTE)': the figure, its interval rounded outwards (a bound
    never looks closer to the budget than it is), the samples. `signed`: for a difference,
    '+0.010 (-0.005 to +0.025, n=450)'."""
    number = "{:+.3f}" if signed else "{:.3f}"
    inside = f"n={samples}"
    if interval is not None:
        low, high = math.floor(interval[0] * 1000) / 1000, math.ceil(interval[1] * 1000) / 1000
        between = " to " if signed else "-"
        inside = f"{number.format(low)}{between}{number.format(high)}, {inside}"
    return f"{number.format(value)} ({inside}{'; ' + note if note else ''})"
