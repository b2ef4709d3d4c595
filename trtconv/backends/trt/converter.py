"""Build a TensorRT engine from the validated ONNX export (the Q/DQ model for int8)."""

from __future__ import annotations

import logging
from pathlib import Path

from trtconv.backends.request import ConversionOutcome, ConversionRequest
from trtconv.backends.trt import rules
from trtconv.backends.trt.builder import (
    PAYLOAD,
    TIMING_CACHE,
    configure_builder,
    has_qdq,
    network_inputs,
    parse_onnx,
    precision_flags,
    profile_shapes,
    shared_timing_cache,
)
from trtconv.errors import ConversionError, UsageError
from trtconv.facts import probe
from trtconv.fsutil import write_atomic
from trtconv.lazy import require

log = logging.getLogger(__name__)


def source_onnx(request: ConversionRequest) -> Path:
    """The ONNX TensorRT builds from: the Q/DQ model for int8, the fp32 export otherwise."""
    source = request.qdq_onnx_path if request.precision == "int8" else request.onnx_path
    if source is None:
        what = "Q/DQ int8 ONNX model" if request.precision == "int8" else "ONNX export"
        raise UsageError(f"The trt backend needs the {what}; the conversion request has none.")
    return Path(source)


def convert(request: ConversionRequest) -> ConversionOutcome:
    """Build a TensorRT engine from the request's ONNX into output_dir/model.plan.

    Raises MissingDependencyError (exit 3) without TensorRT >= 10 or a GPU, ConversionError when
    parsing or building fails.
    """
    rules.support(probe(), request.precision).require()
    source = source_onnx(request)
    trt = require("tensorrt")
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network, _parser = parse_onnx(trt, builder, logger, source)
    if request.precision == "int8" and not has_qdq(trt, network):
        raise ConversionError(
            f"{source} has no QuantizeLinear/DequantizeLinear nodes; TensorRT int8 here is "
            "explicit quantisation only."
        )
    shapes = profile_shapes(network_inputs(network), request.batch_sizes)
    shared = shared_timing_cache()
    cached = shared.read_bytes() if shared.is_file() else b""
    config, cache = configure_builder(trt, builder, request.precision, shapes, cached)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ConversionError(f"TensorRT failed to build an engine from {source} (see its log).")
    (request.output_dir / PAYLOAD).write_bytes(bytes(plan))
    timing = bytes(cache.serialize())
    (request.output_dir / TIMING_CACHE).write_bytes(timing)
    _update_shared_cache(shared, timing)
    to_set, to_clear = precision_flags(request.precision)
    gpu = probe().best_gpu
    summary = {
        "tensorrt_version": str(trt.__version__),
        "layers": int(network.num_layers),
        "builder_flags_set": list(to_set),
        "builder_flags_cleared": list(to_clear),
        "explicit_quantization": request.precision == "int8",
        "profile": {name: [list(s) for s in shape] for name, shape in shapes.items()},
        "timing_cache_reused": bool(cached),
        "source_onnx": source.name,
    }
    return ConversionOutcome(PAYLOAD, summary, gpu.to_dict() if gpu else {})


def _update_shared_cache(path: Path, data: bytes) -> None:
    """Best effort: a cache we cannot write only makes the next build slower."""
    try:
        write_atomic(path, data)  # concurrent builds each rename a whole cache into place
    except OSError as exc:
        log.info("could not update the shared TensorRT timing cache %s (%s)", path, exc)
