"""ONNX Runtime's calibrator run a batch at a time in memory bounded by a batch: min-max in
priority order (before, a 4-layer BERT's batch of 32 held 2.7 GB, BERT-base's 12 GB), its
ranges merged batch by batch; histograms in slices of a batch when its activations are large."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.calibration_models import (
    cached_ranges,
    conv_net,
    matmul_chain,
    one_shot_ranges,
    spread_feed,
)
from trtconv.calib.readers import calibration_feed
from trtconv.calib.sources import ArraySet
from trtconv.core.memory import MIB, rss_bytes
from trtconv.quantize import calibration_run
from trtconv.quantize.qdq import calibrate


def test_min_max_ranges_merged_batch_by_batch_are_one_pass_over_everything(
    tmp_path: Path,
) -> None:
    model = tmp_path / "conv.onnx"
    conv_net(model, 16)
    feed = spread_feed(96, 16, 16)  # six batches, each wider than the one before
    want = one_shot_ranges(model, feed, "minmax", tmp_path)
    calibration = calibrate(model, feed, "minmax", tmp_path, "conv")
    assert calibration.samples == 96
    assert cached_ranges(calibration.cache) == want


@pytest.mark.skipif(rss_bytes() is None, reason="needs /proc/self/statm (Linux)")
def test_min_max_calibration_holds_a_batch_at_work_not_its_every_activation(
    tmp_path: Path,
) -> None:
    """40 layers, 80 activations of 4 MiB a batch (320 MiB): run in ONNX Runtime's default
    order, the calibrator's reductions ran late and RSS grew 840 MiB (its arena doubles); in
    priority order the activations go as in plain inference (about 55 MiB here)."""
    model = tmp_path / "chain.onnx"
    layers, rows, width, batch = 40, 256, 256, 16
    matmul_chain(model, layers, rows, width)
    inputs = np.random.default_rng(0).normal(0, 1, (4 * batch, rows, width)).astype(np.float32)
    feed = calibration_feed(ArraySet({"x": inputs}, None, "chain"), batch)
    every_activation_mb = 2 * layers * batch * rows * width * 4 / MIB
    calibration = calibrate(model, feed, "minmax", tmp_path, "chain")
    assert calibration.samples == 4 * batch and calibration.rss_growth_mb is not None
    assert calibration.rss_growth_mb < every_activation_mb / 4, calibration.rss_growth_mb


@pytest.mark.parametrize("method", ["entropy", "percentile"])
def test_histograms_of_large_batches_are_made_in_slices_with_the_same_ranges(
    tmp_path: Path, method: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    model = tmp_path / "conv.onnx"
    conv_net(model, 16)
    feed = spread_feed(96, 16, 32)
    want = one_shot_ranges(model, feed, method, tmp_path)
    # x, its transpose, c1, r1, c2, then pooled, flat (4 each) and logits (5), in float32
    per_sample = (16 * 16 * (3 + 3 + 4 + 4 + 4) + 4 + 4 + 5) * 4
    monkeypatch.setattr(calibration_run, "HISTOGRAM_BATCH_BYTES", 5 * per_sample)
    with caplog.at_level(logging.INFO, logger="trtconv.quantize.calibration_run"):
        calibration = calibrate(model, feed, method, tmp_path, "conv")
    assert calibration.samples == 96
    assert cached_ranges(calibration.cache) == want
    assert (
        f"{method} calibration holds every activation of the samples it runs at once "
        f"({per_sample / MIB:.2f} MB a sample): 5 samples at a time"
    ) in caplog.text


def test_histogram_batches_that_fit_are_run_whole(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = tmp_path / "conv.onnx"
    conv_net(model, 16)
    with caplog.at_level(logging.INFO, logger="trtconv.quantize.calibration_run"):
        calibrate(model, spread_feed(64, 16, 32), "percentile", tmp_path, "conv")
    assert "at a time" not in caplog.text
    assert "MB for a batch of 32" in caplog.text
