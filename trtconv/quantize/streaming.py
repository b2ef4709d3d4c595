"""Histogram calibration (entropy, percentile) batch by batch: memory bounded by one batch.

ONNX Runtime's `HistogramCalibrater.collect_data` keeps every calibrated tensor of every batch
until its reader runs dry, then stacks them (one more copy of a tensor's whole data set, and one
more to flatten it) before building its histograms: its memory grows with the data set (a 1 MB
audio model with 43,844-sample windows peaked at ~12.9 GB). Its collector can merge batch by
batch, but each histogram then spans the first batch's range, widened as later batches exceed
it: the bins and the ranges differ from one pass over everything.

Here a first pass finds each tensor's range over every batch, the collector is primed with empty
histograms over those ranges, and a second pass adds each batch's histogram, tensor by tensor,
letting each go once counted. Histograms over a fixed range add up, so entropy and percentile
get the histograms one pass over everything gives, bin for bin; the model runs twice. MinMax
needs none of this: its calibrator keeps a min and a max per tensor and batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from trtconv.core.lazy import require
from trtconv.core.model_io import CalibrationFeed, Feeds
from trtconv.options.convert import CalibMethod


@dataclass
class Span:
    """A tensor's values over every batch: its extremes (and, for symmetric percentile, those
    of its magnitude; else None), and its dtype."""

    low: Any
    high: Any
    abs_low: Any
    abs_high: Any
    dtype: np.dtype

    def widen(self, array: np.ndarray) -> None:
        """Take `array`'s values in (NaN ignored, as ONNX Runtime's collector ignores them)."""
        if array.size == 0:
            return
        other = new_span(array, self.abs_low is not None)
        self.low, self.high = np.fmin(self.low, other.low), np.fmax(self.high, other.high)
        if self.abs_low is not None:
            self.abs_low = np.fmin(self.abs_low, other.abs_low)
            self.abs_high = np.fmax(self.abs_high, other.abs_high)


def new_span(array: np.ndarray, absolute: bool) -> Span:
    """The span of one array (zeros for an empty one, as ONNX Runtime's collector takes it);
    `absolute`: with its magnitude's extremes (which cost a copy of the array)."""
    if array.size == 0:
        zero = np.array(0, dtype=array.dtype)[()]
        magnitude = zero if absolute else None
        return Span(zero, zero, magnitude, magnitude, array.dtype)
    low, high = np.nanmin(array), np.nanmax(array)
    if not absolute:
        return Span(low, high, None, None, array.dtype)
    values = np.abs(array)
    return Span(low, high, np.nanmin(values), np.nanmax(values), array.dtype)


def calibrated_outputs(calibrator: Any, batch: Feeds) -> Iterator[tuple[str, np.ndarray]]:
    """(name, values) of each tensor `calibrator` calibrates, for one batch. The run's list lets
    go of each array as it is handed out, so one batch's tensors are held at most."""
    names = [output.name for output in calibrator.infer_session.get_outputs()]
    outputs: list[Any] = list(calibrator.infer_session.run(None, batch))
    for index, name in enumerate(names):
        value, outputs[index] = outputs[index], None
        if name in calibrator.tensors_to_calibrate:
            yield name, value
        del value


def spans(calibrator: Any, feed: CalibrationFeed, absolute: bool) -> dict[str, Span]:
    """Each calibrated tensor's span over every batch of `feed` (the first pass)."""
    found: dict[str, Span] = {}
    for batch in feed():
        for name, value in calibrated_outputs(calibrator, batch):
            if name in found:
                found[name].widen(value)
            else:
                found[name] = new_span(value, absolute)
    return found


def primed_entry(span: Span, bins: int, absolute: bool) -> tuple[Any, ...]:
    """An empty histogram over `span`, in the form ONNX Runtime's collector keeps one: over
    [-t, t] (t the larger magnitude) for entropy, over [min |x|, max |x|] for symmetric
    percentile."""
    empty = np.zeros(0, dtype=span.dtype)
    if absolute:
        hist, edges = np.histogram(empty, bins=bins, range=(span.abs_low, span.abs_high))
        return hist, edges.astype(span.dtype), span.low, span.high
    threshold = np.array(max(abs(span.low), abs(span.high)), dtype=span.dtype)
    hist, edges = np.histogram(empty, bins, range=(-threshold, threshold))  # type: ignore[arg-type]
    return hist, edges, span.low, span.high, threshold


def collect_histograms(calibrator: Any, feed: CalibrationFeed, reader: Any) -> None:
    """Fill `calibrator`'s (an ONNX Runtime HistogramCalibrater, graph augmented) histograms,
    holding one batch at a time: the spans from `feed`, then the histograms from `reader` (a
    calibration data reader over the same batches)."""
    calibrate = require("onnxruntime.quantization.calibrate")
    collector = calibrate.HistogramCollector(
        method=calibrator.method,
        symmetric=calibrator.symmetric,
        num_bins=calibrator.num_bins,
        num_quantized_bins=calibrator.num_quantized_bins,
        percentile=calibrator.percentile,
        scenario=calibrator.scenario,
    )
    absolute = collector.method == CalibMethod.PERCENTILE and collector.symmetric
    found = spans(calibrator, feed, absolute)
    histograms = {
        name: primed_entry(span, calibrator.num_bins, absolute) for name, span in found.items()
    }
    collector.histogram_dict = histograms
    calibrator.collector = collector
    while (batch := reader.get_next()) is not None:
        for name, value in calibrated_outputs(calibrator, batch):
            if absolute:
                add_magnitudes(histograms, name, value, found[name])
            else:  # a flat view: the collector's np.asarray copies nothing (its flatten does)
                collector.collect({name: value.reshape(-1)})


def add_magnitudes(
    histograms: dict[str, tuple[Any, ...]], name: str, value: np.ndarray, span: Span
) -> None:
    """Add one batch's |x| to its symmetric-percentile histogram, binned as ONNX Runtime's one
    pass bins everything: equal bins over [min |x|, max |x|] (numpy's fast path; the collector's
    own merge passes the edges, which bins by search, several times slower)."""
    hist, edges, low, high = histograms[name]
    counts, _ = np.histogram(
        np.abs(value.reshape(-1)), bins=len(hist), range=(span.abs_low, span.abs_high)
    )
    histograms[name] = (hist + counts, edges, low, high)
