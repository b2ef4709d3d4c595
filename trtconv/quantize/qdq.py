"""Static Q/DQ INT8 with ONNX Runtime's quantiser: one calibrated model for ORT and TensorRT.

Explicit QuantizeLinear/DequantizeLinear pairs around float ops, per-channel symmetric weights.
For ORT CPU: uint8 activations and int8 weights (U8S8): on an x86 CPU S8S8 ran 3.6x slower
(docs/int8.md). TensorRT only reads signed, symmetric int8 Q/DQ, so the `trt` backend gets its own
S8S8 symmetric model (`quantize_qdq(..., scheme="s8s8")`).
"""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.core.errors import ConversionError, UsageError, first_line
from trtconv.core.lazy import require
from trtconv.core.memory import PeakRss
from trtconv.core.model_io import CalibrationFeed, samples_in
from trtconv.core.results import JsonResult, optional_key
from trtconv.onnxlib.export import op_counts
from trtconv.options.convert import CALIB_METHODS, DEFAULT_CALIB_METHOD, CalibMethod
from trtconv.quantize.calibration_run import (
    collect_min_max,
    histogram_slice,
    run_in_priority_order,
    sliced,
)
from trtconv.quantize.checks import require_tensorrt_qdq
from trtconv.quantize.isa import QdqScheme, WeightChoice
from trtconv.quantize.kept_float import softmax_nodes
from trtconv.quantize.ladder_result import LadderRecord
from trtconv.quantize.ort_chatter import onnxruntime_chatter
from trtconv.quantize.preprocess import prepare_for_quantization
from trtconv.quantize.streaming import collect_histograms

log = logging.getLogger(__name__)

QDQ_SCHEMES = tuple(scheme.value for scheme in QdqScheme)
# Entropy calibration searches (bins/2 - quantised bins/2 + 1) thresholds per tensor. 512 bins
# give 193 candidates at about 70 ms per tensor in ORT's Python search (2048, TensorRT's choice,
# took 380 ms per tensor: 45 s for a ResNet-50); ORT's default of 128 gives one: the full range.
ENTROPY_BINS = 512
ENTROPY_QUANTIZED_BINS = 128


@dataclass(frozen=True)
class QdqOptions:
    """How to quantise: the Q/DQ scheme, the calibration method, the weights, the float nodes.

    `scheme` "u8s8" (uint8 activations, int8 weights: fast on ORT CPU) or "s8s8" (int8,
    symmetric activations: what TensorRT accepts). `reduce_range` quantises weights to 7 bits,
    which x86 CPUs without VNNI need (see trtconv.quantize.isa); `per_channel` gives each output
    channel its own weight scale. `keep_float` names nodes (of the pre-processed model) left
    unquantised besides Softmax; `quantize_only`, when set, quantises those nodes and no others
    (a sensitivity probe).
    """

    scheme: str = QdqScheme.U8S8
    method: str = DEFAULT_CALIB_METHOD
    reduce_range: bool = False
    per_channel: bool = True
    keep_float: tuple[str, ...] = ()
    quantize_only: tuple[str, ...] = ()

    def check(self) -> None:
        """Raise UsageError for an unknown method or scheme."""
        if self.method not in CALIB_METHODS:
            raise UsageError(
                f"Unknown calibration method '{self.method}'; expected {CALIB_METHODS}."
            )
        if self.scheme not in QDQ_SCHEMES:
            raise UsageError(f"Unknown Q/DQ scheme '{self.scheme}'; expected {QDQ_SCHEMES}.")

    @property
    def weights(self) -> str:
        """The weight quantisation in words."""
        granularity = "per-channel" if self.per_channel else "per-tensor"
        return f"int8 {granularity} symmetric" + (", 7-bit range" if self.reduce_range else "")


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
                self.count += samples_in(batch)
            return batch

        def rewind(self) -> None:
            self.batches = feed()

    return FeedReader()


@dataclass(frozen=True, kw_only=True)
class QdqSummary(JsonResult):
    """A Q/DQ int8 model's `quantization` block (the manifest's, in `conversion_summary`): how
    it was quantised and calibrated, the ladder's record (None: the ladder was off) and, for the
    CPU scheme, the weight range chosen for where it will run (`int8_target` None otherwise)."""

    format: str = "qdq"
    scheme: str
    activations: str
    weights: str
    reduce_range: bool
    per_channel: bool
    calib_method: str
    calibration: str  # the method in words
    shape_inference: str
    kept_float: list[str] = field(default_factory=list)
    calibration_samples_seen: int
    # The process's peak RSS while calibrating, and its growth over the RSS before.
    calibration_peak_rss_mb: float | None
    calibration_rss_growth_mb: float | None
    quantize_seconds: float
    ladder: LadderRecord | None = None
    int8_target: str | None = None
    weight_range_reason: str | None = optional_key()
    converted_on_cpu_class: str | None = optional_key()

    def with_weights(self, choice: WeightChoice) -> QdqSummary:
        """This block with the weight range chosen for the CPU scheme."""
        return replace(
            self,
            int8_target=choice.int8_target,
            weight_range_reason=choice.weight_range_reason,
            converted_on_cpu_class=choice.converted_on_cpu_class,
        )


def quantize_qdq(
    source: Path,
    output: Path,
    feed: CalibrationFeed,
    options: QdqOptions | None = None,
    model_name: str | None = None,
) -> QdqSummary:
    """Calibrate on `feed` and write an explicit Q/DQ int8 model of `source` to `output`.

    Weights are symmetric; `options` (default QdqOptions()) chooses the rest. Intermediate files
    live in a temporary directory, never beside `output` or in the working directory.
    `model_name` (default `source`) names the model in errors. Returns a summary for the
    manifest; raises UsageError for an unknown method or scheme and ConversionError when
    calibration or quantisation fails.
    """
    with tempfile.TemporaryDirectory(prefix="trtconv-qdq-") as work:
        quantizer = QdqQuantizer(source, Path(work), feed, model_name)
        return quantizer.quantize(output, options or QdqOptions())


class QdqQuantizer:
    """Quantises one ONNX model many ways: pre-processed once, calibrated once per method.

    `work` holds the pre-processed model (whose node names `keep_float` and `quantize_only`
    refer to) and one calibration cache per method, so a variant that changes only the weights
    or the float nodes costs no new calibration (the int8 ladder, trtconv.quantize.ladder).
    """

    def __init__(
        self, source: Path, work: Path, feed: CalibrationFeed, model_name: str | None = None
    ) -> None:
        self.source = Path(source)
        self.work = Path(work)
        self.feed = feed
        self.name = model_name or str(source)
        self.prepared: Path | None = None
        self.shape_inference = ""
        self.caches: dict[str, Calibration] = {}

    def prepare(self) -> Path:
        """The pre-processed model (built on first use); raises ConversionError."""
        if self.prepared is None:
            self.work.mkdir(parents=True, exist_ok=True)
            target = self.work / "prep.onnx"
            self.prepared, self.shape_inference = prepare_for_quantization(
                self.source, target, self.name
            )
        return self.prepared

    def calibration(self, method: str) -> Calibration:
        """The calibration for `method` (cache, samples seen, memory), made on first use."""
        if method not in self.caches:
            directory = self.work / f"calibration-{method}"
            directory.mkdir(parents=True, exist_ok=True)
            self.caches[method] = calibrate(self.prepare(), self.feed, method, directory, self.name)
        return self.caches[method]

    def quantize(self, output: Path, options: QdqOptions) -> QdqSummary:
        """Write the Q/DQ model `options` describe to `output`; its summary for the manifest.

        Raises UsageError for unknown options and ConversionError when calibration or
        quantisation fails.
        """
        options.check()
        started = time.perf_counter()
        with onnxruntime_chatter():
            prepared = self.prepare()
            float_nodes = [*softmax_nodes(prepared), *options.keep_float]
            calibration = self.calibration(options.method)
            _quantize_static(prepared, output, calibration.cache, options, float_nodes, self.name)
        counts = op_counts(output)
        if not counts.get("QuantizeLinear") or not counts.get("DequantizeLinear"):
            raise ConversionError(f"The quantised model of {self.name} holds no Q/DQ nodes.")
        if options.scheme == QdqScheme.S8S8:
            require_tensorrt_qdq(output, self.name)
        return QdqSummary(
            scheme=options.scheme,
            activations="uint8" if options.scheme == QdqScheme.U8S8 else "int8 (symmetric)",
            weights=options.weights,
            reduce_range=options.reduce_range,
            per_channel=options.per_channel,
            calib_method=options.method,
            calibration=_method_detail(options.method),
            shape_inference=self.shape_inference,
            kept_float=float_nodes,
            calibration_samples_seen=calibration.samples,
            calibration_peak_rss_mb=calibration.peak_rss_mb,
            calibration_rss_growth_mb=calibration.rss_growth_mb,
            quantize_seconds=round(time.perf_counter() - started, 3),
        )


def _quantize_static(
    prepared: Path,
    output: Path,
    cache: Path,
    options: QdqOptions,
    float_nodes: list[str],
    model_name: str,
) -> None:
    """ONNX Runtime's quantize_static from the calibration cache; ConversionError on failure."""
    quantization = require("onnxruntime.quantization")
    try:
        quantization.quantize_static(
            str(prepared),
            str(output),
            None,  # ranges come from the calibration cache
            quant_format=quantization.QuantFormat.QDQ,
            per_channel=options.per_channel,
            activation_type=_activation_type(quantization, options.scheme),
            weight_type=quantization.QuantType.QInt8,
            reduce_range=options.reduce_range,
            calibrate_method=_calibration_method(quantization, options.method),
            calibration_cache_path=str(cache),
            extra_options={
                "ActivationSymmetric": options.scheme == QdqScheme.S8S8,
                "WeightSymmetric": True,
                # int32 bias Q/DQ: fine for ORT, refused by TensorRT's IDequantizeLayer.
                "QuantizeBias": options.scheme != QdqScheme.S8S8,
            },
            nodes_to_exclude=float_nodes,
            nodes_to_quantize=list(options.quantize_only) or None,
        )
    except Exception as exc:
        message = f"INT8 quantisation of {model_name} failed: {first_line(exc)}"
        raise ConversionError(message) from exc


def _activation_type(quantization: Any, scheme: str) -> Any:
    return (
        quantization.QuantType.QUInt8 if scheme == QdqScheme.U8S8 else quantization.QuantType.QInt8
    )


def _calibration_method(quantization: Any, method: str) -> Any:
    names = {"entropy": "Entropy", "minmax": "MinMax", "percentile": "Percentile"}
    return getattr(quantization.CalibrationMethod, names[method])


def _method_detail(method: str) -> str:
    if method == CalibMethod.ENTROPY:
        return (
            f"KL-divergence threshold search over {ENTROPY_BINS} histogram bins "
            f"({ENTROPY_BINS // 2 - ENTROPY_QUANTIZED_BINS // 2 + 1} candidate ranges)"
        )
    if method == CalibMethod.PERCENTILE:
        return "99.999th percentile of |x| over a 2048-bin histogram"
    return "minimum and maximum seen"


@dataclass(frozen=True)
class Calibration:
    """A calibration cache, the samples it saw, and the process's memory while calibrating:
    the peak RSS and its growth over the RSS before (MiB, None where /proc is absent)."""

    cache: Path
    samples: int
    peak_rss_mb: float | None = None
    rss_growth_mb: float | None = None


def calibrate(
    model: Path, feed: CalibrationFeed, method: str, work: Path, model_name: str
) -> Calibration:
    """Run the calibrator over `feed` once; save the tensor ranges as ONNX Runtime's calibration
    cache in `work`. Raises ConversionError.

    Calibrating here rather than inside `quantize_static` is what lets entropy use enough
    histogram bins: `quantize_static` passes none, and ORT's default of 128 bins with 128
    quantised bins leaves one candidate threshold, the full range: entropy gave bit-identical
    models to minmax. Every method runs batch by batch in memory bounded by a batch
    (trtconv.quantize.calibration_run; histograms: trtconv.quantize.streaming).
    """
    quantization = require("onnxruntime.quantization")
    from onnxruntime.quantization.calibrate import save_tensors_data

    extra = {}
    if method == CalibMethod.ENTROPY:
        extra = {"num_bins": ENTROPY_BINS, "num_quantized_bins": ENTROPY_QUANTIZED_BINS}
    reader = _calibration_reader(feed)
    with PeakRss() as memory:
        try:
            calibrator = quantization.create_calibrator(
                model,
                [],  # every float tensor: quantize_static picks the ones it quantises
                augmented_model_path=str(work / "augmented.onnx"),
                calibrate_method=_calibration_method(quantization, method),
                extra_options=extra,
            )
            if method == CalibMethod.MINMAX:
                run_in_priority_order(calibrator)
                collect_min_max(calibrator, reader)
            else:
                size = histogram_slice(calibrator, feed, method)
                feed = feed if size is None else sliced(feed, size)
                reader = _calibration_reader(feed)
                collect_histograms(calibrator, feed, reader)
            ranges = calibrator.compute_data()
        except Exception as exc:
            if reader.count == 0:
                raise ConversionError(f"INT8 calibration of {model_name} saw no samples.") from exc
            raise ConversionError(
                f"INT8 calibration of {model_name} failed: {first_line(exc)}"
            ) from exc
    if reader.count == 0:
        raise ConversionError(f"INT8 calibration of {model_name} saw no samples.")
    cache = work / "calibration.json"
    save_tensors_data(ranges, cache)
    return Calibration(cache, reader.count, memory.peak_mb, memory.growth_mb)
