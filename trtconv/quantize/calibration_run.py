"""How ONNX Runtime's calibrator runs the model: one batch at a time, in memory bounded by a
batch, not by the data.

- **Min-max**: the calibrator inserts a ReduceMin and a ReduceMax after every float tensor.
  Its session runs nodes in ONNX Runtime's default topological order, which put them late:
  every activation of a batch stayed alive until its reductions ran (a 4-layer BERT at batch
  32: 2.7 GB against 0.3 GB for the plain model; BERT-base: 12 GB). Run in ONNX Runtime's
  priority-based order, each reduction follows the tensor it reads and the activations go as
  they would in plain inference. Each batch's ranges are merged into the running ones before
  the next batch runs (ONNX Runtime's own `max_intermediate_outputs` drops the batches it
  clears without merging their ranges, in 1.32).
- **Histograms** (entropy, percentile): the calibrator makes every float tensor a model output,
  so one run holds every activation of its batch. One sample is run first to measure them; a
  batch whose activations would exceed `HISTOGRAM_BATCH_BYTES` is calibrated in smaller
  slices (same histograms: trtconv.quantize.streaming bins every slice over fixed ranges), and
  one line says so with the figures. A model with a fixed batch takes its batch whole.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

from trtconv.core.lazy import require
from trtconv.core.memory import MIB
from trtconv.core.model_io import CalibrationFeed, Feeds, samples_in

log = logging.getLogger(__name__)

# The activations one histogram-calibration run may hold (the outputs ONNX Runtime returns).
HISTOGRAM_BATCH_BYTES = 512 * MIB


def run_in_priority_order(calibrator: Any) -> None:
    """Give `calibrator` (graph augmented) a session that runs its model in ONNX Runtime's
    priority-based order, with the options and providers of its own (no graph optimisation);
    the session it had is let go first, so the model's weights are held once."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.execution_order = ort.ExecutionOrder.PRIORITY_BASED
    calibrator.infer_session = None
    calibrator.infer_session = ort.InferenceSession(
        str(calibrator.augmented_model_path),
        sess_options=options,
        providers=calibrator.execution_providers,
    )


def collect_min_max(calibrator: Any, reader: Any) -> None:
    """Feed `calibrator` (ONNX Runtime's MinMaxCalibrater) every batch of `reader`, one at a
    time: its `collect_data` over a one-batch reader merges that batch's ranges into the
    running ones and lets the batch's outputs go."""
    quantization = require("onnxruntime.quantization")
    base: Any = quantization.CalibrationDataReader

    class OneBatch(base):
        def __init__(self, batch: Feeds) -> None:
            self.batch: Feeds | None = batch

        def get_next(self) -> Feeds | None:
            batch, self.batch = self.batch, None
            return batch

    while (batch := reader.get_next()) is not None:
        calibrator.collect_data(OneBatch(batch))


def histogram_slice(calibrator: Any, feed: CalibrationFeed, method: str) -> int | None:
    """The number of samples a histogram calibration run takes at a time so that it holds at
    most HISTOGRAM_BATCH_BYTES of activations; None to keep the feed's batches (they fit, or
    the model's batch is fixed). Runs one sample to measure; logs the line that says what
    a run holds."""
    first = next(feed(), None)
    if first is None or _fixed_batch(calibrator):
        return None
    batch = samples_in(first)
    per_sample = _activation_bytes(calibrator, rows(first, 0, 1))
    size = max(1, min(batch, HISTOGRAM_BATCH_BYTES // max(per_sample, 1)))
    words = f"{method} calibration holds every activation of the samples it runs at once "
    words += f"({per_sample / MIB:.2f} MB a sample)"
    whole = f"{batch * per_sample / MIB:.0f} MB for a batch of {batch}"
    if size >= batch:
        log.info("%s: %s", words, whole)
        return None
    held = size * per_sample / MIB
    log.info("%s: %d samples at a time (%.0f MB), not %s", words, size, held, whole)
    return size


def _fixed_batch(calibrator: Any) -> bool:
    """True when an input of the calibrator's model has a fixed first dimension above 1."""
    return any(
        len(node.shape) and isinstance(node.shape[0], int) and node.shape[0] > 1
        for node in calibrator.infer_session.get_inputs()
    )


def _activation_bytes(calibrator: Any, batch: Feeds) -> int:
    """The bytes of every tensor `calibrator` calibrates for `batch`."""
    names = [output.name for output in calibrator.infer_session.get_outputs()]
    outputs = calibrator.infer_session.run(None, batch)
    wanted = calibrator.tensors_to_calibrate
    pairs = zip(names, outputs, strict=True)
    return sum(np.asarray(value).nbytes for name, value in pairs if name in wanted)


def sliced(feed: CalibrationFeed, size: int) -> CalibrationFeed:
    """`feed` with each batch cut into slices of `size` samples (a rank-0 input's one value
    goes with every slice)."""

    def slices() -> Iterator[Feeds]:
        for batch in feed():
            for start in range(0, samples_in(batch), size):
                yield rows(batch, start, start + size)

    return slices


def rows(batch: Feeds, start: int, stop: int) -> Feeds:
    """Samples `start` to `stop` of `batch`; 0-d arrays (a rank-0 input's value) whole."""
    return {name: array[start:stop] if array.ndim else array for name, array in batch.items()}
