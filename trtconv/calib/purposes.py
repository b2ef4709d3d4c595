"""Which samples of the user's data serve which purpose, and which a validation may reuse.

Only int8 calibration, the int8 ladder's search and fp16's keep-float32 ranges fit anything to
the data; a validation on samples nothing was fitted to needs no hold-out. So a data source that
is not the model's training data is shared by purpose: its samples in one seeded order, the
first ones fitted (as many as the precision fits), the rest validated on. A source the model
trained on (its model card says so, or `digits`, whose fixed train split is what models here
train on) keeps its fixed hold-out: the held-out part validates, the rest calibrates.

A conversion records each purpose as an entry (`purpose`, `source`, `part`, `start`, `stop`,
`samples`, `total`): positions `start:stop` of the part's seeded order. `validate` reads them
back and never judges on a sample a conversion was fitted to (`drop_fitted`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from trtconv.calib.sources import (
    DIGITS,
    DIGITS_SPLIT_SEED,
    DIGITS_TEST_FRACTION,
    HOLDOUT_FRACTION,
    HOLDOUT_SEED,
    ArraySet,
)
from trtconv.core.data_contract import Purpose
from trtconv.model.savedmodel import read_model_card

# Parts of a source: its calibration part and held-out part (the fixed 80/20 split; digits:
# train/test), and every sample in the seeded order (a source shared by purpose).
CALIBRATION_PART, HELD_OUT_PART, SHUFFLED = "calibration", "held-out", "shuffled"
CALIBRATION, SEARCH, FP16_RANGES, VALIDATION = "calibration", "search", "fp16 ranges", "validation"
FITTED = (CALIBRATION, SEARCH, FP16_RANGES)


def trained_on(spec: str, saved_model: Path | None) -> str | None:
    """Why `spec` counts as the model's training data (validate on its held-out part only), or
    None when nothing says the model trained on it."""
    if spec == DIGITS:
        return "digits: its fixed train split is what models here train on"
    source = card_data(saved_model)
    if source and same_source(source, spec):
        return f"the model card says the model trained on {spec}"
    return None


def card_data(saved_model: Path | None) -> str | None:
    """The data the model card beside `saved_model` says the model trained on, if any."""
    card = read_model_card(saved_model) if saved_model is not None else None
    return card.data_source if card is not None else None


def same_source(first: str, second: str) -> bool:
    """True when two data specs name the same data (the same path, however written)."""
    if first == second:
        return True
    return Path(first).expanduser().resolve() == Path(second).expanduser().resolve()


def part_order(spec: str, total: int, part: str) -> np.ndarray:
    """The indices (in the source's file order) of `part`, in its seeded order."""
    digits = spec == DIGITS
    seed = DIGITS_SPLIT_SEED if digits else HOLDOUT_SEED
    fraction = DIGITS_TEST_FRACTION if digits else HOLDOUT_FRACTION
    order = np.random.default_rng(seed).permutation(total)
    cut = int(total * (1 - fraction))
    return {CALIBRATION_PART: order[:cut], HELD_OUT_PART: order[cut:], SHUFFLED: order}[part]


def shuffled(data: ArraySet) -> ArraySet:
    """Every sample of `data` (read whole, in file order) in the seeded order."""
    ordered = data.take(part_order("", len(data), SHUFFLED))
    ordered.source = f"{data.source}[shuffled]"
    return ordered


def entry(purpose: str, spec: str, part: str, span: tuple[int, int], total: int | None) -> Purpose:
    """One purpose of a conversion's data, as its manifest records it (`total`: the source's
    samples, None when it was not read whole)."""
    start, stop = span
    return Purpose(
        purpose=purpose,
        source=spec,
        part=part,
        start=start,
        stop=stop,
        samples=stop - start,
        total=total,
    )


def fitted_indices(purposes: Sequence[Purpose], spec: str) -> set[int]:
    """The samples of `spec` (indices in its file order) a conversion was fitted to."""
    found: set[int] = set()
    for used in purposes:
        if used.total is None or used.purpose not in FITTED:
            continue
        if same_source(used.source, spec):
            order = part_order(spec, used.total, used.part)
            found.update(int(i) for i in order[used.start : used.stop])
    return found


def drop_fitted(
    data: ArraySet, spec: str, part: str | None, purposes: Sequence[Purpose]
) -> tuple[ArraySet, int]:
    """(`data` without the samples a conversion was fitted to, how many were dropped). `data` is
    `spec`'s `part` (HELD_OUT_PART in its seeded order; None: every sample in file order) read
    whole."""
    fitted = fitted_indices(purposes, spec)
    if not fitted:
        return data, 0
    totals = (used.total for used in purposes if same_source(used.source, spec))
    total = next((int(t) for t in totals if t is not None), 0)
    if total == 0 or (part is None and len(data) != total):
        return data, 0  # another version of the file: nothing to match it by
    indices = np.arange(len(data)) if part is None else part_order(spec, total, part)
    if len(indices) != len(data):  # another version of the file: nothing to match it by
        return data, 0
    keep = np.array([i for i, index in enumerate(indices) if int(index) not in fitted], int)
    return data.take(keep), len(data) - len(keep)
