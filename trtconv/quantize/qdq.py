"""Static Q/DQ INT8 with ONNX Runtime's quantiser: one calibrated model for ORT and TensorRT.

Explicit QuantizeLinear/DequantizeLinear pairs around float ops, per-channel symmetric weights.
For ORT CPU: uint8 activations and int8 weights (U8S8): on an x86 CPU S8S8 ran 3.6x slower
(DESIGN.md). TensorRT only reads signed, symmetric int8 Q/DQ, so the `trt` backend gets its own
S8S8 symmetric model (`quantize_qdq(..., scheme="s8s8")`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.backends.base import CalibrationFeed
from trtconv.backends.onnx_export import op_counts
from trtconv.errors import ConversionError, UsageError
from trtconv.lazy import require
from trtconv.quantize import CALIB_METHODS

log = logging.getLogger(__name__)

QDQ_SCHEMES = ("u8s8", "s8s8")


@dataclass(frozen=True)
class QdqOptions:
    """How to quantise: the Q/DQ scheme, the calibration method and the int8 weight range.

    `scheme` "u8s8" (uint8 activations, int8 weights: fast on ORT CPU) or "s8s8" (int8,
    symmetric activations: what TensorRT accepts). `reduce_range` quantises weights to 7 bits,
    which x86 CPUs without VNNI need (see trtconv.quantize.isa).
    """

    scheme: str = "u8s8"
    method: str = "entropy"
    reduce_range: bool = False

    def check(self) -> None:
        """Raise UsageError for an unknown method or scheme."""
        if self.method not in CALIB_METHODS:
            raise UsageError(
                f"Unknown calibration method '{self.method}'; expected {CALIB_METHODS}."
            )
        if self.scheme not in QDQ_SCHEMES:
            raise UsageError(f"Unknown Q/DQ scheme '{self.scheme}'; expected {QDQ_SCHEMES}.")


def _calibration_reader(feed: CalibrationFeed) -> Any:
    """An onnxruntime CalibrationDataReader over `feed` (class built here: import stays lazy)."""
    quantization = require("onnxruntime.quantization")

    base: Any = quantization.CalibrationDataReader

    class FeedReader(base):
        def __init__(self) -> None:
            self.batches = feed()
            self.count = 0

        def get_next(self) -> dict[str, np.ndarray] | None:
            batch = next(self.batches, None)
            if batch is not None:
                self.count += len(next(iter(batch.values())))
            return batch

        def rewind(self) -> None:
            self.batches = feed()

    return FeedReader()


def quantize_qdq(
    source: Path, output: Path, feed: CalibrationFeed, options: QdqOptions | None = None
) -> dict[str, Any]:
    """Calibrate on `feed` and write an explicit Q/DQ int8 model of `source` to `output`.

    Weights are per-channel and symmetric; `options` (default QdqOptions()) chooses the rest.
    Returns a summary for the manifest; raises UsageError for an unknown method or scheme and
    ConversionError when calibration or quantisation fails.
    """
    quantization = require("onnxruntime.quantization")
    from onnxruntime.quantization.shape_inference import quant_pre_process

    options = options or QdqOptions()
    options.check()
    scheme, method = options.scheme, options.method
    methods = {
        "entropy": quantization.CalibrationMethod.Entropy,
        "minmax": quantization.CalibrationMethod.MinMax,
        "percentile": quantization.CalibrationMethod.Percentile,
    }
    activation = quantization.QuantType.QUInt8 if scheme == "u8s8" else quantization.QuantType.QInt8
    prepared = output.with_name(output.stem + ".pre.onnx")
    reader = _calibration_reader(feed)
    started = time.perf_counter()
    chatter = io.StringIO()
    try:
        # Shape inference and ORT's basic fusions first (Conv+BN, ...): fewer, better-placed Q/DQ.
        quant_pre_process(str(source), str(prepared))
        float_nodes = softmax_nodes(prepared)
        # The calibrators print progress to stdout, which belongs to the result (--json).
        with contextlib.redirect_stdout(chatter):
            quantization.quantize_static(
                str(prepared),
                str(output),
                reader,
                quant_format=quantization.QuantFormat.QDQ,
                per_channel=True,
                activation_type=activation,
                weight_type=quantization.QuantType.QInt8,
                reduce_range=options.reduce_range,
                calibrate_method=methods[method],
                extra_options={"ActivationSymmetric": scheme == "s8s8", "WeightSymmetric": True},
                nodes_to_exclude=float_nodes,
            )
    except Exception as exc:
        raise ConversionError(f"INT8 quantisation of {source} failed: {exc}") from exc
    finally:
        log.debug("quantize_static: %s", chatter.getvalue().strip())
        prepared.unlink(missing_ok=True)
        # quantize_static leaves its augmented calibration model beside the output.
        for leftover in output.parent.glob("augmented_model*.onnx"):
            leftover.unlink(missing_ok=True)
    if reader.count == 0:
        raise ConversionError(f"INT8 quantisation of {source} saw no calibration samples.")
    counts = op_counts(output)
    if not counts.get("QuantizeLinear") or not counts.get("DequantizeLinear"):
        raise ConversionError(f"Quantised model {output} holds no QuantizeLinear/Dequantize nodes.")
    return {
        "format": "qdq",
        "scheme": scheme,
        "activations": "uint8" if scheme == "u8s8" else "int8 (symmetric)",
        "weights": "int8 per-channel symmetric" + (", 7-bit range" if options.reduce_range else ""),
        "reduce_range": options.reduce_range,
        "calib_method": method,
        "kept_float": float_nodes,
        "calibration_samples_seen": reader.count,
        "quantize_seconds": round(time.perf_counter() - started, 3),
    }


def softmax_nodes(path: Path) -> list[str]:
    """Names of the Softmax nodes, which quantisation must leave in float.

    A quantised Softmax maps every probability of a low-confidence output (a random-weight
    ResNet-50: ~0.001 each) to the same uint8 step, so the top-1 class degenerates to index 0
    (top-1 agreement 0.0 measured); in float it costs nothing measurable on ORT CPU and the
    class ranking survives.
    """
    onnx = require("onnx")
    model = onnx.load(str(path), load_external_data=False)
    return [node.name for node in model.graph.node if node.op_type == "Softmax"]
