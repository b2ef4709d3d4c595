"""Embeddings judged by the direction of their vectors: the cosine similarity of converted and
native, per sample.

An `embedding` output holds one vector per sample (`[batch, D]`: a sentence, a face, a pooled
text) or one per position (`[batch, seq, D]`: a text backbone's token vectors). What a user of it
does (nearest neighbours, a classifier on top) reads its direction, not its digits, so its
agreement with the native model is their cosine similarity:

- `[batch, D]`: a sample agrees when the cosine of its two vectors reaches the bound;
- `[batch, seq, ..., D]`: each position's vectors are compared, over the positions the padding
  mask marks valid (trtconv.outputs.tokens); a sample agrees when at least maps.WITHIN_SHARE of
  its valid positions reach the bound (every one of fewer than 20), the dense rule of every
  map.

The figure is the share of samples that agree, a rate with its Wilson interval against a
minimum share (the budget's minimum rate, or the output's own: --tolerance NAME=X:MIN). The
bound is the precision's (tolerance.MIN_COSINE) unless the role sets one
(`--output-role NAME=embedding:COSINE`). Two zero vectors agree (cosine 1); a zero vector
against another shares no direction (0), and a non-finite cosine (NaN or Inf in the converted
output) is 0.
"""

from __future__ import annotations

import numpy as np

from trtconv.outputs.confidence import Rate
from trtconv.outputs.maps import NAMED_SAMPLES, WITHIN_SHARE, MapRate, per_sample
from trtconv.outputs.tokens import spread


def cosines(want: np.ndarray, got: np.ndarray) -> np.ndarray:
    """The cosine similarity of each vector (the last axis) of `got` with `want`'s, in
    [-1, 1], of shape `want.shape[:-1]`."""
    w, g = want.astype(np.float64), got.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        dot = (w * g).sum(axis=-1)
        norms = np.linalg.norm(w, axis=-1) * np.linalg.norm(g, axis=-1)
        found = dot / norms
    both_zero = (np.abs(w).sum(axis=-1) == 0) & (np.abs(g).sum(axis=-1) == 0)
    found = np.where(both_zero, 1.0, np.where(np.isfinite(found), found, 0.0))
    return np.asarray(np.clip(found, -1.0, 1.0))


def cosine_rate(
    want: np.ndarray,
    got: np.ndarray,
    bound: float,
    valid: np.ndarray | None = None,
    mask: str | None = None,
) -> MapRate:
    """The share of samples whose cosine reaches `bound` (a sequence: at WITHIN_SHARE of its
    `valid` positions, a `[batch, seq]` mask read from input `mask`; None: all). The words name
    the lowest cosines."""
    found = cosines(want, got)
    agrees, counted, lowest = _per_sample(found, bound, valid)
    indices = np.flatnonzero(counted)
    rate = Rate(int(np.count_nonzero(agrees[counted])), len(indices))
    what = " of samples" + _positions_words(found, valid, mask, len(indices))
    cosine = "cosine" if found.ndim == 1 else "token cosine"
    what += _lowest_words(indices, lowest[counted], agrees[counted], cosine)
    return MapRate(rate, f"cosine >= {bound:g}", what)


def sample_agrees(
    want: np.ndarray, got: np.ndarray, bound: float, valid: np.ndarray | None = None
) -> np.ndarray:
    """Per sample, 1.0 where it agrees by cosine_rate's rule, else 0.0 (a sample without a
    valid position agrees: nothing of it is judged)."""
    agrees, _, _ = _per_sample(cosines(want, got), bound, valid)
    return agrees.astype(np.float64)


def _per_sample(
    found: np.ndarray, bound: float, valid: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(whether each sample agrees, True where none of it is valid; which samples hold a valid
    position; each sample's lowest valid cosine) from the `cosines`."""
    if found.ndim == 1:
        return found >= bound, np.ones(len(found), bool), found
    marks = np.ones(found.shape, bool) if valid is None else spread(valid, found.shape)
    marks = marks.reshape(len(found), -1)
    flat = per_sample(found)
    counts = marks.sum(axis=1)
    reaching = ((flat >= bound) & marks).sum(axis=1)
    agrees = reaching >= WITHIN_SHARE * counts
    lowest = np.where(marks, flat, np.inf).min(axis=1) if flat.size else np.ones(len(flat))
    return agrees, counts > 0, lowest


def _positions_words(
    found: np.ndarray, valid: np.ndarray | None, mask: str | None, counted: int
) -> str:
    """'' for one vector per sample; else which positions were judged."""
    if found.ndim == 1:
        return ""
    share = f" at {WITHIN_SHARE:.0%} of their"
    if valid is None:
        return f"{share} positions ({per_sample(found).shape[1]} per sample)"
    tokens = int(spread(valid, found.shape).sum())
    skipped = len(found) - counted
    words = f"{share} valid tokens ({mask} marks {tokens:,} of {found.size:,} positions"
    words += f"; {skipped} sample(s) with none not counted)" if skipped else ")"
    return words


def _lowest_words(indices: np.ndarray, lowest: np.ndarray, agrees: np.ndarray, cosine: str) -> str:
    """'; every sample agrees, the lowest cosine 0.9981 at sample 4' or '; 2 sample(s) below,
    the worst: 17 (lowest cosine 0.912), 3 (0.95)' (`cosine`: what the lowest is of)."""
    if not len(indices):
        return ""
    if bool(agrees.all()):
        worst = int(np.argmin(lowest))
        return (
            f"; every sample agrees, the lowest {cosine} {lowest[worst]:.4f} at sample "
            f"{int(indices[worst])}"
        )
    below = np.flatnonzero(~agrees)
    ranked = below[np.argsort(lowest[below], kind="stable")][:NAMED_SAMPLES]
    named = ", ".join(
        f"{int(indices[i])} ({f'lowest {cosine} ' if n == 0 else ''}{lowest[i]:.4f})"
        for n, i in enumerate(ranked)
    )
    more = f" and {below.size - ranked.size} more" if below.size > ranked.size else ""
    return f"; {below.size} sample(s) below, the worst: {named}{more}"
