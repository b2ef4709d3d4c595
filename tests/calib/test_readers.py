"""Calibration/validation readers: names, dtypes, shapes, held-out split, batching (no TF)."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from trtconv.calib.readers import (
    CALIBRATION,
    VALIDATION,
    batches,
    calibration_feed,
    describe,
    read_model_data,
    whole_batches,
)
from trtconv.core.data_contract import Preprocessing
from trtconv.core.errors import InputError, UsageError
from trtconv.core.model_io import ModelSignature, TensorSpec, parse_input_values

DIGITS_SIGNATURE = ModelSignature(
    inputs=(TensorSpec("image", (None, 8, 8, 1), "float32"),),
    outputs=(TensorSpec("probabilities", (None, 10), "float32"),),
)
TWO_INPUTS = ModelSignature(
    inputs=(
        TensorSpec("image", (None, 4, 4, 1), "float32"),
        TensorSpec("ids", (None, 3), "int64"),
    ),
    outputs=(TensorSpec("out", (None, 2), "float32"),),
)


def _npz(tmp_path: Path, name: str = "data.npz", **arrays: np.ndarray) -> Path:
    path = tmp_path / name
    np.savez(path, **arrays)
    return path


def test_digits_are_keyed_by_input_name_and_split_train_test() -> None:
    calib = read_model_data("digits", DIGITS_SIGNATURE, role=CALIBRATION, samples=100)
    held_out = read_model_data("digits", DIGITS_SIGNATURE, role=VALIDATION)
    assert list(calib.inputs) == ["image"] and calib.inputs["image"].dtype == np.float32
    assert len(calib) == 100 and calib.source == "digits[train]"
    assert held_out.source == "digits[test]" and len(held_out) == 450
    assert held_out.labels is not None
    # No calibration sample is a validation sample.
    calib_rows = {
        row.tobytes()
        for row in read_model_data("digits", DIGITS_SIGNATURE, role=CALIBRATION).inputs["image"]
    }
    assert not any(row.tobytes() in calib_rows for row in held_out.inputs["image"])


def test_npz_calibration_and_validation_parts_are_disjoint(tmp_path: Path) -> None:
    x = np.arange(50 * 64, dtype=np.float32).reshape(50, 8, 8, 1)
    path = _npz(tmp_path, x=x, y=np.arange(50) % 10)
    calib = read_model_data(str(path), DIGITS_SIGNATURE, role=CALIBRATION)
    held_out = read_model_data(str(path), DIGITS_SIGNATURE, role=VALIDATION)
    assert len(calib) == 40 and len(held_out) == 10
    firsts = set(calib.inputs["image"][:, 0, 0, 0]) & set(held_out.inputs["image"][:, 0, 0, 0])
    assert firsts == set()
    again = read_model_data(str(path), DIGITS_SIGNATURE, role=VALIDATION)
    assert again.sha256() == held_out.sha256()  # the split is fixed


def test_npz_arrays_named_after_inputs_and_same_kind_casts(tmp_path: Path) -> None:
    path = _npz(
        tmp_path,
        image=np.zeros((10, 4, 4, 1), np.float64),
        ids=np.ones((10, 3), np.int32),
    )
    data = read_model_data(str(path), TWO_INPUTS, role=CALIBRATION)
    assert data.inputs["image"].dtype == np.float32
    assert data.inputs["ids"].dtype == np.int64


def test_wrong_dtype_kind_is_refused(tmp_path: Path) -> None:
    path = _npz(tmp_path, x=np.zeros((10, 8, 8, 1), bool))
    with pytest.raises(InputError, match=r"input 'image' expects dtype float32, found bool"):
        read_model_data(str(path), DIGITS_SIGNATURE, role=CALIBRATION)


TOKENS = ModelSignature(
    inputs=(TensorSpec("ids", (None, 8), "float32"),),
    outputs=(TensorSpec("probabilities", (None, 10), "float32"),),
)


def test_integers_for_a_float_input_are_cast_when_exact(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ids = np.arange(-5, 5, dtype=np.int64).reshape(10, 1) * (2**24 // 5)
    path = _npz(tmp_path, x=np.broadcast_to(ids, (10, 8)).copy())
    with caplog.at_level(logging.INFO):
        data = read_model_data(str(path), TOKENS, role="all")
    assert data.x.dtype == np.float32
    assert np.array_equal(data.x.astype(np.int64), np.broadcast_to(ids, (10, 8)))
    assert "every value (in [-16777215, 13421772]) is exact in float32" in caplog.text


def test_integers_a_float_cannot_hold_are_refused_naming_the_range(tmp_path: Path) -> None:
    x = np.zeros((10, 8), np.int64)
    x[3, 0] = 2**24 + 1  # float32 rounds it to 2^24
    path = _npz(tmp_path, x=x)
    with pytest.raises(
        InputError, match=r"found int64 values in \[0, 16777217\]; float32 holds integers exactly"
    ):
        read_model_data(str(path), TOKENS, role="all")


def test_integer_images_stay_refused(tmp_path: Path) -> None:
    """Integer pixels change meaning as floats (0-255 against [0, 1]): only uint8 ones are raw
    pixels, which the preprocessing scales."""
    path = _npz(tmp_path, x=np.zeros((10, 8, 8, 1), np.int32))
    with pytest.raises(InputError, match=r"found int32.*integer images: give uint8 raw pixels"):
        read_model_data(str(path), DIGITS_SIGNATURE, role="all")


def test_wrong_shape_names_input_expected_and_found(tmp_path: Path) -> None:
    path = _npz(tmp_path, x=np.zeros((10, 8, 8, 3), np.float32))
    with pytest.raises(
        InputError, match=r"input 'image' has samples of shape 8x8x3.*expects 8x8x1"
    ):
        read_model_data(str(path), DIGITS_SIGNATURE, role=CALIBRATION)


def test_empty_and_unmatched_arrays_are_refused(tmp_path: Path) -> None:
    empty = _npz(tmp_path, "empty.npz", x=np.zeros((0, 8, 8, 1), np.float32))
    with pytest.raises(InputError, match="0 samples"):
        read_model_data(str(empty), DIGITS_SIGNATURE, role=CALIBRATION)
    # several arrays or several inputs: the names must match
    two = _npz(tmp_path, "two.npz", a=np.zeros((10, 8, 8, 1), np.float32), b=np.zeros((10, 3)))
    with pytest.raises(InputError, match=r"holds arrays a, b; the model expects inputs image\."):
        read_model_data(str(two), DIGITS_SIGNATURE, role=CALIBRATION)
    one = _npz(tmp_path, "one.npz", pixels=np.zeros((10, 4, 4, 1), np.float32))
    with pytest.raises(InputError, match=r"holds arrays pixels; the model expects inputs image, "):
        read_model_data(str(one), TWO_INPUTS, role=CALIBRATION)


def test_one_array_feeds_a_one_input_model_whatever_its_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`np.savez(path, inputs=x)` for a model whose one input is `image`: nothing to choose."""
    pixels = np.random.default_rng(0).random((10, 8, 8, 1)).astype(np.float32)
    path = _npz(tmp_path, "inputs.npz", inputs=pixels, y=np.arange(10))
    with caplog.at_level(logging.INFO, logger="trtconv.calib"):
        data = read_model_data(str(path), DIGITS_SIGNATURE, role="all")
    assert list(data.inputs) == ["image"] and np.array_equal(data.inputs["image"], pixels)
    assert data.labels is not None and len(data.labels) == 10  # `y` stays the labels
    said = [r.getMessage() for r in caplog.records if "feeds the model's one input" in r.message]
    assert said == [f"{path}: its one array 'inputs' feeds the model's one input 'image'"]
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip")
    with pytest.raises(InputError, match=r"not a readable \.npz"):
        read_model_data(str(garbage), DIGITS_SIGNATURE, role=CALIBRATION)


def test_unknown_spec_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="neither 'digits', 'random'"):
        read_model_data("/no/such/data", DIGITS_SIGNATURE, role=CALIBRATION)


def test_random_only_by_name_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="trtconv"):
        calib = read_model_data("random", TWO_INPUTS, role=CALIBRATION, samples=16)
        held_out = read_model_data("random", TWO_INPUTS, role=VALIDATION, samples=16)
    assert "timing only" in caplog.text
    assert calib.inputs["ids"].dtype == np.int64 and calib.inputs["image"].shape == (16, 4, 4, 1)
    assert calib.sha256() != held_out.sha256()


def test_image_folder_uses_model_card_preprocessing(tmp_path: Path) -> None:
    from PIL import Image

    for label in ("a", "b"):
        (tmp_path / "images" / label).mkdir(parents=True)
        for i in range(5):
            pixels = np.full((16, 16), 16 * i, np.uint8)
            Image.fromarray(pixels).save(tmp_path / "images" / label / f"{i}.png")
    model = tmp_path / "model"
    (model / "saved_model").mkdir(parents=True)
    (model / "trtconv.json").write_text('{"preprocessing": {"scale": 0.0625, "offset": -1.0}}')
    data = read_model_data(
        str(tmp_path / "images"),
        DIGITS_SIGNATURE,
        role=CALIBRATION,
        saved_model=model / "saved_model",
    )
    assert data.inputs["image"].shape[1:] == (8, 8, 1) and len(data) == 8
    values = set(np.unique(data.inputs["image"]))
    assert values <= {16 * i * 0.0625 - 1.0 for i in range(5)}


def test_batches_whole_batches_and_describe() -> None:
    data = read_model_data("digits", DIGITS_SIGNATURE, role=CALIBRATION, samples=70)
    sizes = [len(batch["image"]) for batch in batches(data, 32)]
    assert sizes == [32, 32, 6]
    trimmed = whole_batches(data, 32)
    assert len(trimmed) == 64
    feed = calibration_feed(trimmed, 32)
    assert [len(b["image"]) for b in feed()] == [32, 32] == [len(b["image"]) for b in feed()]
    block = describe(trimmed, "digits", "entropy")
    assert block.samples == 64 and block.method == "entropy" and len(block.sha256) == 64
    # The manifest's block, keys in their recorded order.
    assert list(block.to_json()) == ["source", "part", "samples", "method", "sha256", "input_stats"]
    assert set(block.to_json()["input_stats"]["image"]) == {"mean", "std", "min", "max"}


FLAGGED = ModelSignature(
    inputs=(
        TensorSpec("is_training", (), "bool"),
        TensorSpec("x", (None, 3), "float32"),
    ),
    outputs=(TensorSpec("out", (None, 2), "float32"),),
)


def test_a_0d_flag_is_given_to_every_batch_as_one_value(tmp_path: Path) -> None:
    x = np.arange(30, dtype=np.float32).reshape(10, 3)
    path = _npz(tmp_path, x=x, is_training=np.array(False))
    data = read_model_data(str(path), FLAGGED, role="all")
    assert len(data) == 10 and data.scalars == {"is_training"}
    feeds = list(calibration_feed(data, 4)())
    assert [f["is_training"].shape for f in feeds] == [(), (), ()]
    assert not any(bool(f["is_training"]) for f in feeds)
    assert [len(f["x"]) for f in feeds] == [4, 4, 2]


def test_one_flag_per_sample_must_be_one_value(tmp_path: Path) -> None:
    x = np.zeros((10, 3), np.float32)
    same = read_model_data(
        str(_npz(tmp_path, "same.npz", x=x, is_training=np.ones(10, bool))), FLAGGED, role="all"
    )
    assert same.inputs["is_training"].all()
    mixed = _npz(tmp_path, "mixed.npz", x=x, is_training=np.arange(10) % 2 == 0)
    with pytest.raises(
        InputError,
        match=r"is_training: bool\[\] takes one value for a whole batch, found 2 different "
        r"values \(False, True, ...\); give one: a 0-d array .* or --input-value is_training=",
    ):
        read_model_data(str(mixed), FLAGGED, role="all")


def test_input_value_sets_an_input_the_data_does_not_hold(tmp_path: Path) -> None:
    path = _npz(tmp_path, x=np.zeros((6, 3), np.float32))
    with pytest.raises(InputError, match=r"set a flag with --input-value is_training=VALUE"):
        read_model_data(str(path), FLAGGED, role="all")
    prep = Preprocessing(input_values={"is_training": True})
    data = read_model_data(str(path), FLAGGED, role="all", preprocessing=prep)
    assert data.inputs["is_training"].dtype == np.bool_ and data.inputs["is_training"].all()
    both = _npz(tmp_path, "both.npz", x=np.zeros((6, 3), np.float32), is_training=np.array(True))
    with pytest.raises(UsageError, match=r"sets input 'is_training', which .*both.npz holds too"):
        read_model_data(str(both), FLAGGED, role="all", preprocessing=prep)
    for bad, message in (
        ({"is_training": 1}, r"is_training=1: input is_training: bool\[\] takes true or false"),
        ({"flag": True}, r"the model has no input 'flag' \(inputs: is_training, x\)"),
    ):
        with pytest.raises(UsageError, match=message):
            read_model_data(
                str(path), FLAGGED, role="all", preprocessing=Preprocessing(input_values=bad)
            )


def test_random_data_needs_a_flag_set_and_then_holds_it() -> None:
    with pytest.raises(InputError, match=r"Random data cannot choose input is_training: bool\[\]"):
        read_model_data("random", FLAGGED, role="all", samples=8)
    prep = Preprocessing(input_values={"is_training": False})
    data = read_model_data("random", FLAGGED, role="all", samples=8, preprocessing=prep)
    assert data.inputs["is_training"].shape == (8,) and not data.inputs["is_training"].any()


def test_parse_input_values() -> None:
    assert parse_input_values(["is_training=false", "rate=0.5", "k=3"]) == {
        "is_training": False,
        "rate": 0.5,
        "k": 3,
    }
    for bad in ("is_training", "=1", "mode=eval"):
        with pytest.raises(UsageError, match="--input-value takes NAME=VALUE"):
            parse_input_values([bad])


def test_a_0d_array_for_a_batched_input_says_what_it_holds(tmp_path: Path) -> None:
    path = _npz(tmp_path, x=np.array(5.0, np.float32))
    with pytest.raises(
        InputError, match=r"input 'image' holds one value per sample .* the model expects 8x8x1"
    ):
        read_model_data(str(path), DIGITS_SIGNATURE, role="all")
