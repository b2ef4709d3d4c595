"""Build a TensorRT engine from the validated ONNX export: the fp32 export, an fp16 copy of it
(TensorRT 11), or the Q/DQ model (int8), as `builder.build_plan` says."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import trtconv.backends.trt.rules as rules
from trtconv.backends import registry
from trtconv.backends.trt.builder import (
    PAYLOAD,
    TIMING_CACHE,
    BuildPlan,
    EngineSummary,
    attach_timing_cache,
    build_plan,
    configure_builder,
    has_qdq,
    network_inputs,
    parse_onnx,
    profile_shapes,
    tensorrt_major,
    timing_cache_path,
)
from trtconv.backends.trt.runner import create_builder, cuda_ready
from trtconv.core.errors import ConversionError, UsageError
from trtconv.core.fsutil import write_atomic
from trtconv.core.lazy import require
from trtconv.core.precision import Precision
from trtconv.core.results import JsonResult
from trtconv.onnxlib.fp16_model import fp16_model
from trtconv.protocol.request import ConversionOutcome, ConversionRequest
from trtconv.quantize.build import qdq_model
from trtconv.quantize.checks import require_tensorrt_qdq
from trtconv.quantize.isa import QdqScheme

log = logging.getLogger(__name__)
# TensorRT reads only signed, symmetric int8 Q/DQ.
QDQ_SCHEME = QdqScheme.S8S8


def source_onnx(
    request: ConversionRequest, plan: BuildPlan, work: Path
) -> tuple[Path, JsonResult | None]:
    """(the ONNX the plan builds from, its `quantization` block for int8 or `fp16` block): the
    export quantised to S8S8 Q/DQ (trtconv.quantize.build; checked for what TensorRT
    dequantises), the mixed fp16 model of the export written into `work`
    (trtconv.onnxlib.fp16_model), or the export itself.

    Raises UsageError when the request lacks the export and ConversionError for a Q/DQ model
    TensorRT cannot build.
    """
    if request.onnx_path is None:
        raise UsageError("The trt backend needs the ONNX export; the conversion request has none.")
    if plan.source == "qdq":
        # TensorRT's speed is the engine's, timed by bench: the ladder does not time on the CPU.
        qdq, quantization = qdq_model(request, QDQ_SCHEME, timed=False)
        require_tensorrt_qdq(qdq, str(request.saved_model))
        return qdq, quantization
    if plan.source == "fp16":
        fp16 = work / "model.fp16.onnx"
        return fp16, fp16_model(request, fp16)  # float32 where float16 overflows
    return request.onnx_path, None


def convert(request: ConversionRequest) -> ConversionOutcome:
    """Build a TensorRT engine from the request's ONNX into output_dir/model.plan.

    Raises MissingDependencyError (exit 3) without TensorRT >= 10, cuda-python or a GPU, or with
    a driver too old for them; ConversionError when parsing or building fails.
    """
    rules.support(registry.facts_here(), request.precision).require()
    trt = require("tensorrt")
    cuda_ready()  # an old driver is one sentence here, not TensorRT's nullptr TypeError
    plan = build_plan(tensorrt_major(trt), request.precision)
    with tempfile.TemporaryDirectory(prefix="trtconv-trt-") as work:
        source, quantization = source_onnx(request, plan, Path(work))
        summary = build_engine(trt, source, plan, request).to_json()
    summary["source_onnx"] = source.name
    if quantization is not None:
        summary["fp16" if plan.source == "fp16" else "quantization"] = quantization.to_json()
    gpu = registry.facts_here().best_gpu
    return ConversionOutcome(PAYLOAD, summary, gpu.to_dict() if gpu else {})


def build_engine(
    trt: Any, source: Path, plan: BuildPlan, request: ConversionRequest
) -> EngineSummary:
    """Parse `source`, build by `plan` into request.output_dir (engine and timing cache), keep
    the timing cache for the next build; returns the conversion summary."""
    logger = trt.Logger(trt.Logger.WARNING)
    builder = create_builder(trt, logger)
    network, _parser = parse_onnx(trt, builder, logger, source)
    if plan.source == "qdq" and not has_qdq(trt, network):
        raise ConversionError(
            f"{source} has no QuantizeLinear/DequantizeLinear nodes; TensorRT int8 here is "
            "explicit quantisation only."
        )
    shapes = profile_shapes(network_inputs(network), request.batch_sizes)
    config = configure_builder(trt, builder, plan, shapes)
    stored = timing_cache_path(str(trt.__version__), registry.facts_here().best_gpu)
    cache, cache_use = attach_timing_cache(config, stored)
    if cache_use.status == "rejected":
        log.warning("TensorRT timing cache %s not used: %s", stored, cache_use.reason)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise ConversionError(f"TensorRT failed to build an engine from {source} (see its log).")
    (request.output_dir / PAYLOAD).write_bytes(bytes(serialized))
    timing = bytes(cache.serialize())
    (request.output_dir / TIMING_CACHE).write_bytes(timing)
    _keep_timing_cache(stored, timing)
    return EngineSummary(
        tensorrt_version=str(trt.__version__),
        layers=int(network.num_layers),
        builder_flags_set=list(plan.set_flags),
        builder_flags_cleared=list(plan.clear_flags),
        strongly_typed=plan.strongly_typed,
        built_from=plan.source,
        explicit_quantization=plan.precision == Precision.INT8,
        profile={name: [list(s) for s in shape] for name, shape in shapes.items()},
        batch_range=[min(request.batch_sizes), max(request.batch_sizes)],
        timing_cache=cache_use,
        timing_cache_reused=cache_use.status == "reused",
    )


def _keep_timing_cache(path: Path, data: bytes) -> None:
    """Best effort: a cache we cannot write only makes the next build slower."""
    try:
        write_atomic(path, data)  # concurrent builds each rename a whole cache into place
    except OSError as exc:
        log.info("could not keep the TensorRT timing cache %s (%s)", path, exc)
