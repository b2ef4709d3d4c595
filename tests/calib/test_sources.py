"""Data loaders: digits split, .npz and image folders, and the checks on what they read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trtconv.calib.preprocessing import Preprocessing
from trtconv.calib.sources import (
    ArraySet,
    ImagePreprocessing,
    check_arrays,
    check_input_shape,
    load_digits,
    load_file,
    load_image_folder,
    load_npz,
    split_holdout,
)
from trtconv.core.errors import InputError, UsageError


def test_digits_split_is_fixed_disjoint_and_scaled() -> None:
    train, test = load_digits("train"), load_digits("test")
    assert len(train) + len(test) == len(load_digits("all")) == 1797
    assert train.x.shape[1:] == (8, 8, 1) and train.x.dtype == np.float32
    assert train.x.min() >= 0.0 and train.x.max() <= 1.0
    assert train.sha256() == load_digits("train").sha256()  # same split every run
    train_rows = {row.tobytes() for row in train.x}
    assert sum(row.tobytes() in train_rows for row in test.x) < 0.1 * len(test)  # few duplicates
    with pytest.raises(UsageError, match="Unknown digits split"):
        load_digits("validation")


def test_npz_round_trip_and_named_inputs(tmp_path: Path) -> None:
    x = np.ones((4, 2, 2, 1), np.float32)
    np.savez(tmp_path / "d.npz", x=x, y=np.array([0, 1, 0, 1]))
    data = load_file(str(tmp_path / "d.npz"))
    np.testing.assert_array_equal(data.x, x)
    assert data.labels is not None and data.labels.tolist() == [0, 1, 0, 1]
    np.savez(tmp_path / "two.npz", a=x, b=x)
    assert sorted(load_npz(tmp_path / "two.npz").inputs) == ["a", "b"]


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"x": np.zeros((0, 2), np.float32)}, "0 samples"),
        ({"x": np.array([[np.inf]], np.float32)}, "NaN or Inf"),
        ({"x": np.zeros((3, 2), np.float32), "y": np.array([0, 1])}, "differ in length"),
        ({"x": np.zeros((2, 2), np.float32), "y": np.array([0.0, 1.0])}, "must be integers"),
        ({"y": np.array([0, 1])}, "no input arrays"),
    ],
)
def test_npz_checks(tmp_path: Path, arrays: dict[str, np.ndarray], message: str) -> None:
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match=message) as raised:
        load_npz(tmp_path / "bad.npz")
    assert "bad.npz" in str(raised.value)


def test_labels_out_of_range_for_a_known_class_count() -> None:
    data = ArraySet({"x": np.zeros((3, 1), np.float32)}, np.array([0, 9, 10]), "mem")
    check_arrays(data, num_classes=11)
    with pytest.raises(InputError, match=r"\[0, 9\], found \[0, 10\]"):
        check_arrays(data, num_classes=10)


def test_input_shape_check_names_expected_and_found() -> None:
    data = ArraySet({"x": np.zeros((2, 8, 8), np.float32)}, None, "mem")
    with pytest.raises(InputError, match="shape 8x8, but the model expects 8x8x1"):
        check_input_shape(data, "x", (8, 8, 1))
    check_input_shape(data, "x", (None, 8))  # None is a free dimension


def test_image_folder_decodes_resizes_and_labels(tmp_path: Path) -> None:
    from PIL import Image

    for name, level in (("cat", 255), ("dog", 0)):
        (tmp_path / name).mkdir()
        for i in range(3):
            Image.fromarray(np.full((10, 6, 3), level, np.uint8)).save(tmp_path / name / f"{i}.png")
    data = load_image_folder(tmp_path, ImagePreprocessing((4, 4), 1, Preprocessing(1 / 255)))
    assert data.class_names == ["cat", "dog"]
    assert data.x.shape == (6, 4, 4, 1)
    assert data.labels is not None and data.labels.tolist() == [0, 0, 0, 1, 1, 1]
    np.testing.assert_allclose(data.x[:3], 1.0)
    np.testing.assert_allclose(data.x[3:], 0.0)


RGB4 = ImagePreprocessing((4, 4), 3, Preprocessing(1.0, 0.0))


def test_image_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no class sub-folders"):
        load_image_folder(tmp_path, RGB4)
    (tmp_path / "a").mkdir()
    with pytest.raises(InputError, match="holds no images"):
        load_image_folder(tmp_path, RGB4)
    (tmp_path / "a" / "x.png").write_bytes(b"not a png")
    with pytest.raises(InputError, match="could not be decoded"):
        load_image_folder(tmp_path, RGB4)


def test_load_file_dispatch_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="neither 'digits'"):
        load_file(str(tmp_path / "nowhere"))
    (tmp_path / "data.csv").write_text("1,2\n")
    with pytest.raises(InputError, match=r"expected \.npz or a folder"):
        load_file(str(tmp_path / "data.csv"))
    with pytest.raises(InputError, match="does not exist"):
        load_file(str(tmp_path / "missing.npz"))
    with pytest.raises(UsageError, match="needs an image size"):
        load_file(str(tmp_path))


def test_empty_npz_file_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "empty.npz"
    path.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.npz is not a readable \.npz archive"):
        load_npz(path)


def test_holdout_split_is_fixed_disjoint_and_complete() -> None:
    rows = np.arange(50, dtype=np.float32).reshape(50, 1, 1, 1)
    data = ArraySet({"x": rows}, np.arange(50) % 2, "fifty")
    kept, held_out = split_holdout(data)
    assert (len(kept), len(held_out)) == (40, 10)
    assert (kept.source, held_out.source) == ("fifty[train]", "fifty[test]")
    kept_ids, held_ids = set(kept.x.ravel()), set(held_out.x.ravel())
    assert not kept_ids & held_ids and len(kept_ids | held_ids) == 50
    np.testing.assert_array_equal(split_holdout(data)[1].x, held_out.x)  # same every run
    with pytest.raises(InputError, match="too few to hold out"):
        split_holdout(data.head(1))
