"""Histogram calibration batch by batch: the ranges of one pass over everything, with memory
bounded by one batch (all batches at once took 12.9 GB calibrating a 1 MB audio model)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from trtconv.calib.readers import calibration_feed
from trtconv.calib.sources import ArraySet
from trtconv.core.memory import MIB, PeakRss, rss_bytes
from trtconv.quantize.qdq import ENTROPY_BINS, ENTROPY_QUANTIZED_BINS, calibrate
from trtconv.quantize.streaming import Span, new_span


def conv_net(path: Path, size: int, channels: int = 4) -> None:
    """NHWC [N, size, size, 3] -> Transpose -> Conv -> Relu -> Conv -> pooled -> 5 classes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w3", "b3"], ["logits"]),
    ]
    inits = [weight("w1", channels, 3, 3, 3), weight("b1", channels),
             weight("w2", channels, channels, 3, 3), weight("b2", channels),
             weight("w3", channels, 5), weight("b3", 5)]  # a layer a line # fmt: skip
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", size, size, 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(onnx.shape_inference.infer_shapes(model), str(path))


def _feed(samples: int, size: int, batch: int) -> Callable[[], Iterator[dict[str, np.ndarray]]]:
    rng = np.random.default_rng(1)
    # Batches of growing spread: a later batch exceeds the first one's range.
    inputs = rng.normal(0, 1, (samples, size, size, 3)).astype(np.float32)
    inputs *= np.linspace(0.5, 3.0, samples, dtype=np.float32)[:, None, None, None]
    return calibration_feed(ArraySet({"x": inputs}, None, "test"), batch)


def _one_shot_ranges(model: Path, feed: Callable[[], Iterator], method: str, work: Path) -> dict:
    """ONNX Runtime's own collect_data over every batch at once (what calibrate() did before)."""
    from onnxruntime import quantization

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = feed()

        def get_next(self) -> dict | None:
            return next(self.batches, None)

    extra = {"num_bins": ENTROPY_BINS, "num_quantized_bins": ENTROPY_QUANTIZED_BINS}
    calibrator = quantization.create_calibrator(
        model,
        [],
        augmented_model_path=str(work / "one-shot.onnx"),
        calibrate_method=getattr(quantization.CalibrationMethod, method.capitalize()),
        extra_options=extra if method == "entropy" else {},
    )
    calibrator.collect_data(Reader())
    ranges = calibrator.compute_data()
    return {name: [float(v) for v in data.range_value] for name, data in ranges.items()}


def _cached_ranges(cache: Path) -> dict:
    from onnxruntime.quantization.calibrate import load_tensors_data

    ranges = load_tensors_data(cache)
    return {name: [float(v) for v in data.range_value] for name, data in ranges.items()}


@pytest.mark.parametrize("method", ["entropy", "percentile"])
def test_streaming_ranges_match_one_pass_over_everything(tmp_path: Path, method: str) -> None:
    model = tmp_path / "conv.onnx"
    conv_net(model, 16)
    feed = _feed(96, 16, 16)
    want = _one_shot_ranges(model, feed, method, tmp_path)
    got = _cached_ranges(calibrate(model, feed, method, tmp_path, "conv").cache)
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
    feed = _feed(batch * batches, 96, batch)
    per_sample = 96 * 96 * (3 + 3 + 4 + 4 + 4) * 4  # x, its transpose, c1, r1, c2 (float32)
    batch_mb = batch * per_sample / MIB
    with PeakRss() as outer:
        calibration = calibrate(model, feed, "entropy", tmp_path, "conv")
    assert calibration.samples == batch * batches
    assert calibration.peak_rss_mb is not None and calibration.rss_growth_mb is not None
    assert outer.peak_mb is not None and calibration.peak_rss_mb <= outer.peak_mb + 1
    assert calibration.rss_growth_mb < 3 * batch_mb, (calibration.rss_growth_mb, batch_mb)
