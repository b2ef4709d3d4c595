"""Histogram calibration batch by batch: the ranges of one pass over everything, with memory
bounded by one batch (all batches at once took 12.9 GB calibrating a 1 MB audio model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.calibration_models import cached_ranges, conv_net, one_shot_ranges, spread_feed
from trtconv.core.memory import MIB, PeakRss, rss_bytes
from trtconv.quantize.qdq import calibrate
from trtconv.quantize.streaming import Span, new_span


@pytest.mark.parametrize("method", ["entropy", "percentile"])
def test_streaming_ranges_match_one_pass_over_everything(tmp_path: Path, method: str) -> None:
    model = tmp_path / "conv.onnx"
    conv_net(model, 16)
    feed = spread_feed(96, 16, 16)
    want = one_shot_ranges(model, feed, method, tmp_path)
    got = cached_ranges(calibrate(model, feed, method, tmp_path, "conv").cache)
    assert got.keys() == want.keys()
    assert got == want  # the same histograms, bin for bin: the same thresholds


def test_span_ignores_empty_and_nan() -> None:
    span = new_span(np.array([1.0, -2.0], dtype=np.float32), absolute=True)
    span.widen(np.array([], dtype=np.float32))
    span.widen(np.array([np.nan, 3.0, -0.5], dtype=np.float32))
    assert (span.low, span.high, span.abs_low, span.abs_high) == (-2.0, 3.0, 0.5, 3.0)
    assert isinstance(span, Span) and span.dtype == np.float32


@pytest.mark.skipif(rss_bytes() is None, reason="needs /proc/self/statm (Linux)")
def test_calibration_memory_is_bounded_by_one_batch_not_the_data_set(tmp_path: Path) -> None:
    """8 batches of ~20 MiB of activations: held at once they cost 160 MiB and more (ONNX
    Runtime's collect_data grew 132 MiB on 16 batches of 5 MiB); one at a time, a batch or two."""
    model = tmp_path / "conv.onnx"
    conv_net(model, 96)
    batch, batches = 32, 8
    feed = spread_feed(batch * batches, 96, batch)
    per_sample = 96 * 96 * (3 + 3 + 4 + 4 + 4) * 4  # x, its transpose, c1, r1, c2 (float32)
    batch_mb = batch * per_sample / MIB
    with PeakRss() as outer:
        calibration = calibrate(model, feed, "entropy", tmp_path, "conv")
    assert calibration.samples == batch * batches
    assert calibration.peak_rss_mb is not None and calibration.rss_growth_mb is not None
    assert outer.peak_mb is not None and calibration.peak_rss_mb <= outer.peak_mb + 1
    assert calibration.rss_growth_mb < 3 * batch_mb, (calibration.rss_growth_mb, batch_mb)
