"""Dense outputs judged per sample: every figure is a rate over samples (windows, images),
never over elements, whose values inside one sample are not independent.

- A **decision map** (a binary output with more than one decision per sample: per-frame sigmoid
  maps `[N, T, F]`, a score map `[N, H, W, 1]`) is judged by how well the converted model finds
  the reference's positives: per sample, the F1 of its decisions at the threshold against the
  reference's (1 when neither has a positive), and the rate is the share of samples whose F1 is
  at least MIN_SAMPLE_F1. Element agreement would reward predicting nothing: an all-zero map
  agrees with a sparse one on almost every element, while its F1 is 0 on every sample that
  holds a positive.
- A **class map** (`[N, H, W, K]`): per sample, the share of its elements whose top-1 class
  agrees; the figure is their mean, its interval counts samples (`confidence.mean_interval`).
- A **regression** output: a sample is within tolerance when at least WITHIN_SHARE of its values
  lie within the bound of the reference's (all of them for a sample of fewer than 20 values).
  The bound is the atol where one is given (a value is also within at rtol x |reference| where
  there is an rtol), else REGRESSION_SPREAD x the reference output's spread (its standard
  deviation over every sample and element).
- A head **gated** by a score output (`--output-role bbox=regression:where=face_prob`) is judged
  only where the score output of the *reference* says an object is there: a binary score above
  its threshold, or a class other than the first (index 0 is "nothing there"). A sample with no
  object is not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import BINARY, CLASS_MAP, CLASSES, OutputRole
from trtconv.outputs.confidence import Rate
from trtconv.outputs.tokens import spread
from trtconv.outputs.tolerance import within_elements

# A decision map's sample agrees when the F1 of its positives is at least this.
MIN_SAMPLE_F1 = 0.9
# A regression sample is within tolerance when at least this share of its values are.
WITHIN_SHARE = 0.95
# int8 regression outputs (no atol): the bound is this fraction of the reference's spread.
REGRESSION_SPREAD = 0.1
# The bound when the reference does not vary at all (its spread is 0).
SPREAD_FLOOR = 1e-3


def per_sample(array: np.ndarray) -> np.ndarray:
    """`array` as [samples, elements]."""
    return array.reshape(len(array), -1)


def is_decision_map(role: OutputRole, array: np.ndarray) -> bool:
    """A binary output deciding more than once per sample."""
    return role.role == BINARY and per_sample(array).shape[1] > 1


def sample_f1(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Per sample, the F1 of the decisions `got` against `want` (both boolean maps): 2 x both
    positive / (positives in want + positives in got); 1 when neither holds a positive."""
    want2, got2 = per_sample(want).astype(bool), per_sample(got).astype(bool)
    both = np.logical_and(want2, got2).sum(axis=1)
    total = want2.sum(axis=1) + got2.sum(axis=1)
    return np.where(total == 0, 1.0, 2.0 * both / np.maximum(total, 1))


def pooled_f1(want: np.ndarray, got: np.ndarray) -> float:
    """The F1 of every positive of every sample together (reported beside the rate)."""
    both = int(np.logical_and(want, got).sum())
    total = int(want.sum()) + int(got.sum())
    return 1.0 if total == 0 else 2.0 * both / total


@dataclass(frozen=True)
class MapRate:
    """A rate over samples and the words that say what it counts."""

    rate: Rate
    check: str  # what the check is called, after the output's name
    what: str  # appended to the figure: ' of samples ...'
    bound: float | None = None  # regression: the per-value bound
    rtol: float | None = None  # and its relative part (within at rtol x |reference| too)


@dataclass(frozen=True)
class SampleErrors:
    """Per counted sample (`indices` into the batch): whether it lies within the bound (at
    least WITHIN_SHARE of its values, every value below 20 values), and its largest error
    (infinite where the converted output is not finite)."""

    indices: np.ndarray
    within: np.ndarray
    largest: np.ndarray

    @property
    def rate(self) -> Rate:
        """The samples within, of those counted."""
        return Rate(int(np.count_nonzero(self.within)), len(self.indices))

    def worst_text(self, bound: float, rtol: float | None = None) -> str:
        """'; 2 sample(s) beyond 0.05, the worst: 17 (max abs error 0.0982), 203 (0.071)', or
        '; every sample within, the largest error 0.0312 at sample 40' (nothing hidden)."""
        if not len(self.indices):
            return ""
        outside = int(np.count_nonzero(~self.within))
        if not outside:
            worst = int(np.argmax(self.largest))
            return (
                f"; every sample within, the largest error {self.largest[worst]:.3g} at sample "
                f"{int(self.indices[worst])}"
            )
        beyond = f"{bound:.3g}{rtol_words(rtol)}"
        return f"; {outside} sample(s) beyond {beyond}, the worst: {self.worst_named()}"

    def worst_named(self) -> str:
        """The samples outside the bound, worst first: '17 (max abs error 0.0982), 203 (0.071)
        and 4 more' (NAMED_SAMPLES at most)."""
        outside = np.flatnonzero(~self.within)
        ranked = outside[np.argsort(-self.largest[outside], kind="stable")][:NAMED_SAMPLES]
        named = ", ".join(
            f"{int(self.indices[i])} ({'max abs error ' if n == 0 else ''}{self.largest[i]:.3g})"
            for n, i in enumerate(ranked)
        )
        more = f" and {outside.size - ranked.size} more" if outside.size > ranked.size else ""
        return named + more


# Samples named at most in a detail line (the count is always given).
NAMED_SAMPLES = 5


def sample_errors(
    want: np.ndarray,
    got: np.ndarray,
    bound: float,
    gate: np.ndarray | None = None,
    share: float = WITHIN_SHARE,
    rtol: float | None = None,
) -> SampleErrors:
    """Which samples lie within `bound` (or `rtol` x |reference|, the element test of
    tolerance.within_elements): at least `share` of their values (where `gate`, a boolean
    array of `want`'s shape, says an object is there: all of them for a sample of fewer than
    20, as 0.95 of 19 rounds up to 19); samples with no value gated are not counted."""
    errors = np.abs(got.astype(np.float64) - want.astype(np.float64))
    errors = np.where(np.isnan(errors), np.inf, errors)  # NaN is never within
    counted = per_sample(np.ones(want.shape, bool) if gate is None else gate)
    flat = per_sample(errors)
    values = counted.sum(axis=1)
    inside = per_sample(within_elements(want, got, bound, rtol))
    shares = (inside & counted).sum(axis=1) / np.maximum(values, 1)
    largest = np.where(counted, flat, 0.0).max(axis=1) if flat.size else np.zeros(len(flat))
    judged = values > 0
    return SampleErrors(np.flatnonzero(judged), shares[judged] >= share, largest[judged])


def decision_map_rate(want: np.ndarray, got: np.ndarray, threshold: float) -> MapRate:
    """The share of samples whose F1 of the decisions (`want`, `got`: boolean maps) at the
    threshold is at least MIN_SAMPLE_F1."""
    f1 = sample_f1(want, got)
    holding = int(per_sample(want).any(axis=1).sum())
    rate = Rate(int(np.count_nonzero(f1 >= MIN_SAMPLE_F1)), len(f1))
    what = (
        f" of samples with F1 >= {MIN_SAMPLE_F1:g}; {holding} of {len(f1)} samples hold "
        f"positives, pooled F1 {pooled_f1(want, got):.3f}"
    )
    return MapRate(rate, f"sample F1 >= {MIN_SAMPLE_F1:g} at {threshold:g}", what)


def class_map_rate(want: np.ndarray, got: np.ndarray) -> MapRate:
    """The mean over samples of each sample's share of elements whose class agrees."""
    shares = per_sample(want == got).mean(axis=1)
    rate = Rate(float(shares.sum()), len(shares))
    return MapRate(rate, "per-element top-1 agreement", " (per-sample mean)")


def regression_bound(
    want: np.ndarray, atol: float | None, rtol: float | None = None
) -> tuple[float, str]:
    """(the per-value bound, what it is relative to: with `rtol`, a value is also within at
    rtol x |reference|)."""
    if atol is not None:
        return atol, f"atol {atol:g}{rtol_words(rtol)}"
    spread = float(want.astype(np.float64).std())
    bound = REGRESSION_SPREAD * spread if spread > 0 else SPREAD_FLOOR
    return bound, f"{REGRESSION_SPREAD:g} x the reference's spread (std) {spread:.3g}"


def rtol_words(rtol: float | None) -> str:
    """', rtol 1e-05' (the relative part of a bound), '' without one."""
    return f", rtol {rtol:.3g}" if rtol else ""


def regression_rate(
    want: np.ndarray,
    got: np.ndarray,
    atol: float | None,
    gate: np.ndarray | None = None,
    gate_name: str | None = None,
    rtol: float | None = None,
) -> MapRate:
    """The share of samples at least WITHIN_SHARE of whose values (where `gate`, a boolean
    array of `want`'s shape, says an object is there) lie within the bound (atol or `rtol` x
    |reference|; without an atol, a share of the spread and no rtol); samples with no value
    gated are not counted. The words name the worst samples and their errors."""
    rtol = rtol if atol is not None else None
    bound, why = regression_bound(want if gate is None else want[gate], atol, rtol)
    found = sample_errors(want, got, bound, gate, rtol=rtol)
    rate = found.rate
    values = per_sample(want).shape[1] if gate is None else per_sample(gate).shape[1]
    share = "every value" if values < 20 else f"{WITHIN_SHARE:.0%} of values"
    what = f" of samples with {share} within {bound:.3g}, {why}"
    if gate_name is not None:
        what += f"; judged where {gate_name} says an object is there ({rate.samples} of "
        what += f"{len(want)} samples)"
    what += found.worst_text(bound, rtol)
    return MapRate(rate, "within tolerance", what, bound, rtol)


def gate_of(name: str, role: OutputRole, scores: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Where the reference's score output `name` (its `role`, its `scores`) says an object is
    there, broadcast to `target`'s shape. Raises UsageError when the two do not line up."""
    if role.role == BINARY:
        present = scores > (role.threshold if role.threshold is not None else 0.5)
    elif role.role in (CLASSES, CLASS_MAP) and np.issubdtype(scores.dtype, np.floating):
        present = scores.argmax(axis=-1) != 0
    else:
        raise UsageError(
            f"where={name}: output '{name}' is {role.role}; a gate must be a binary score or "
            "class scores (class 0 meaning nothing there)."
        )
    while present.ndim > 1 and present.shape[-1] == 1:
        present = present[..., 0]
    if target.shape[: present.ndim] != present.shape:
        raise UsageError(
            f"where={name}: its decisions of shape {list(present.shape)} do not line up with "
            f"the judged output's shape {list(target.shape)} (the leading axes must match)."
        )
    extra = target.ndim - present.ndim
    return np.broadcast_to(present.reshape(present.shape + (1,) * extra), target.shape)


def sample_scores(
    role: OutputRole, want: np.ndarray, got: np.ndarray, valid: np.ndarray | None = None
) -> np.ndarray:
    """One score in [0, 1] per sample for decisions `want` and `got` (what a search ranks
    samples by): the F1 of a decision map's positives, else the share of decisions agreeing
    (over the positions `valid` marks, a `[batch, seq]` mask; a sample with none scores 1)."""
    if role.role == BINARY and per_sample(want).shape[1] > 1:
        return sample_f1(want, got)
    if valid is None:
        return per_sample(want == got).mean(axis=1)
    marks = per_sample(spread(valid, want.shape))
    counts = marks.sum(axis=1)
    hits = (per_sample(want == got) & marks).sum(axis=1)
    return np.where(counts > 0, hits / np.maximum(counts, 1), 1.0)
