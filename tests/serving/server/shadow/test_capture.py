"""The capture keeps the latest disagreeing samples within its bounds, in a file trtconv's data
reader takes as it takes any .npz (the outputs beside the inputs left out)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from trtconv.calib.readers import read_model_data
from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.serving.server.shadow.capture import Capture, capture_file

SIGNATURE = ModelSignature(
    inputs=(TensorSpec("image", (None, 4), "float32"),),
    outputs=(TensorSpec("probabilities", (None, 3), "float32"),),
)


def batch(first: int, rows: int) -> tuple[dict[str, np.ndarray], ...]:
    """Inputs numbered from `first` (each sample's values its number), and two outputs."""
    numbers = np.arange(first, first + rows, dtype=np.float32)
    feeds = {"image": np.repeat(numbers[:, None], 4, axis=1)}
    return (
        feeds,
        {"probabilities": np.zeros((rows, 3), np.float32)},
        {"probabilities": np.ones((rows, 3), np.float32)},
    )


def test_the_latest_samples_are_kept_and_the_oldest_dropped(tmp_path: Path) -> None:
    capture = Capture(tmp_path / "c.npz", max_samples=5)
    for first in (0, 10, 20):
        capture.add(*batch(first, 4), rows=[0, 2, 3])  # samples first, first+2, first+3
    capture.flush(force=True)
    with np.load(tmp_path / "c.npz") as kept:
        assert kept["image"][:, 0].tolist() == [12, 13, 20, 22, 23]  # the latest five
        assert kept["served/probabilities"].shape == (5, 3)
        assert np.all(kept["native/probabilities"] == 1)
    assert (capture.samples, capture.dropped) == (5, 4)


def test_a_size_bound_drops_by_bytes_and_other_shapes_are_not_mixed_in(tmp_path: Path) -> None:
    one_sample = 4 * 4 + 3 * 4 * 2  # bytes of a sample: its input and both outputs
    capture = Capture(tmp_path / "c.npz", max_bytes=3 * one_sample)
    capture.add(*batch(0, 5), rows=range(5))
    assert (capture.samples, capture.dropped) == (3, 2)
    _, served, native = batch(0, 1)
    wider = {"image": np.zeros((1, 8), np.float32)}  # a dynamic dimension that differs
    capture.add(wider, served, native, rows=[0])
    assert (capture.samples, capture.dropped) == (3, 3)


def test_validate_and_convert_read_the_capture_as_their_data(tmp_path: Path) -> None:
    path = capture_file(tmp_path / "captures", "digits")
    assert path.parent == tmp_path / "captures" and path.name.startswith("digits-shadow-")
    capture = Capture(path)
    capture.add(*batch(0, 8), rows=range(8))
    capture.flush(force=True)
    assert not list(path.parent.glob(".*"))  # the partial file was renamed into place
    data = read_model_data(str(path), SIGNATURE, role="all")
    assert list(data.inputs) == ["image"] and len(data) == 8 and data.labels is None
    calibration = read_model_data(str(path), SIGNATURE, role="calibration")
    assert 0 < len(calibration) < 8  # the .npz split any data file gets
