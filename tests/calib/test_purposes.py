"""Which samples serve which purpose, and which a validation may reuse (no model needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.helpers.rules import rules
from trtconv.calib.purposes import (
    HELD_OUT_PART,
    SHUFFLED,
    drop_fitted,
    entry,
    fitted_indices,
    part_order,
    trained_on,
)
from trtconv.calib.sources import ArraySet, split_holdout
from trtconv.convert.data import ConversionData, _fit, deciding_data, fitted_count
from trtconv.core.data_contract import DataContract
from trtconv.outputs.compare import compare
from trtconv.outputs.exact import samples_for_values, samples_to_decide


def numbered(samples: int) -> ArraySet:
    """Samples whose one feature is their index in the file."""
    x = np.arange(samples, dtype=np.float32).reshape(samples, 1)
    return ArraySet({"x": x}, None, "n.npz")


def test_the_held_out_part_is_the_seeded_orders_tail() -> None:
    data = numbered(50)
    _, held = split_holdout(data)
    assert list(held.x[:, 0].astype(int)) == list(part_order("n.npz", 50, HELD_OUT_PART))


def test_validate_leaves_out_every_fitted_sample_whatever_the_split() -> None:
    fitted = part_order("n.npz", 50, SHUFFLED)[:12]
    purposes = [
        entry("calibration", "n.npz", SHUFFLED, (0, 12), 50),
        entry("validation", "n.npz", SHUFFLED, (12, 50), 50),
    ]
    assert fitted_indices(purposes, "n.npz") == {int(i) for i in fitted}
    kept, dropped = drop_fitted(numbered(50), "n.npz", None, purposes)
    assert dropped == 12 and len(kept) == 38
    assert not set(kept.x[:, 0].astype(int)) & set(fitted)
    _, held = split_holdout(numbered(50))
    kept, dropped = drop_fitted(held, "n.npz", HELD_OUT_PART, purposes)
    assert not set(kept.x[:, 0].astype(int)) & set(fitted)
    assert dropped == len(held) - len(kept)
    # Another source, or a source of another size, loses nothing.
    assert drop_fitted(numbered(50), "other.npz", None, purposes)[1] == 0
    assert drop_fitted(numbered(40), "n.npz", None, purposes)[1] == 0


def test_a_model_card_naming_the_data_makes_it_training_data(tmp_path: Path) -> None:
    model = tmp_path / "m" / "saved_model"
    model.mkdir(parents=True)
    assert trained_on("x.npz", model) is None
    assert trained_on("digits", model) is not None
    (model.parent / "trtconv.json").write_text(json.dumps({"data": {"source": "x.npz"}}))
    assert "model card" in (trained_on("x.npz", model) or "")
    assert trained_on("y.npz", model) is None


def test_a_shared_source_fits_what_the_precision_needs_and_no_more() -> None:
    assert fitted_count(800, None, int8=True) == 128
    assert fitted_count(300, None, int8=True) == 128
    assert fitted_count(7, None, int8=True) == 3
    assert fitted_count(800, 400, int8=True) == 400
    assert fitted_count(800, None, int8=False) == 64  # fp16's ranges


def test_the_data_that_would_decide_it_is_the_users_unused_samples_first() -> None:
    held = numbered(160)
    data = ConversionData("x.npz", DataContract(), held, pool=1000)
    assert "840 more that nothing was fitted to (--validate-samples 381)" in deciding_data(
        data, 381
    )
    spent = ConversionData("x.npz", DataContract(), held, pool=160)
    assert "221 more than n.npz spares" in deciding_data(spent, 381)
    assert "--validate-data" in deciding_data(spent, 381)


def test_samples_to_decide_an_inconclusive_report() -> None:
    probs = np.random.default_rng(0).random((7, 4)).astype(np.float32)
    fp32 = compare({"p": probs}, {"p": probs}, rules("fp32"))
    assert fp32.verdict == "inconclusive" and samples_to_decide(fp32) == samples_for_values(0.95)
    int8 = compare({"p": probs}, {"p": probs}, rules("int8"))
    assert int8.verdict == "inconclusive" and samples_to_decide(int8) == 125
    many = np.random.default_rng(0).random((100, 4)).astype(np.float32)
    assert samples_to_decide(compare({"p": many}, {"p": many}, rules("fp32"))) is None


def test_a_search_slice_from_the_validation_source_is_recorded_as_its_own() -> None:
    """--validate-data with samples to spare: the ladder scores on them, and the manifest says
    they are that source's, so `validate` leaves them out there too."""
    validation = numbered(1400)
    data = ConversionData("cal.npz", DataContract(), validation)
    fitted = _fit(
        data, numbered(600), (500, 1000), True, (SHUFFLED, SHUFFLED), 600, validate_data="val.npz"
    )
    used = {p.purpose: p for p in fitted.purposes}
    assert (used["calibration"].source, used["calibration"].samples) == ("cal.npz", 480)
    assert (used["validation"].source, used["validation"].samples) == ("val.npz", 1000)
    assert used["search"].source == "val.npz" and used["search"].total == 1400
    assert (used["search"].start, used["search"].stop) == (1000, 1400)
    assert fitted.pool == 1000  # the 400 searched on are spent
