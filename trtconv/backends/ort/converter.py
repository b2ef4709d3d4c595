"""ONNX Runtime: fp32 with graph optimisations saved, int8 as explicit Q/DQ, mixed fp16 for GPU
providers.

Optimisation level of the saved fp32 model: ORT_ENABLE_BASIC, whose rewrites (constant folding,
Conv+BatchNorm, redundant nodes) keep standard ONNX operators that every execution provider runs.
EXTENDED saved contrib operators of the CPU provider (`com.microsoft:FusedConv`, 35 of them in a
MobileNetV2) that the CUDA provider refused on an H100 ("unsupported activation"). The runner
asks for ORT_ENABLE_ALL at load, so the machine that runs the model adds the rest for its own
provider: from a basic- and an extended-saved MobileNetV2 and ResNet-50 the CPU session ends at
the same graph, operator for operator, with bit-identical outputs (BENCHMARKS.md).

INT8 is the static Q/DQ model built by `trtconv.quantize` (shared with the `trt` backend), stored
as it is so that any execution provider can run it.

FP16 is the mixed float16 model (trtconv.onnxlib.fp16_model, shared with `trt`) for the CUDA or
TensorRT provider. It converts on any machine: ONNX Runtime's CPU provider would compute its
float16 nodes in float32 and hide float16 overflow, so where no GPU provider runs the artifact is
validated, and run, by float16 emulation (trtconv.onnxlib.fp16).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import Any

from trtconv.backends.ort.runner import emulates_fp16, provider_options
from trtconv.core.errors import ConversionError, MissingDependencyError, UsageError
from trtconv.core.lazy import require
from trtconv.core.precision import Precision
from trtconv.facts import probe_cpu, probe_gpus
from trtconv.onnxlib.export import op_counts
from trtconv.onnxlib.fp16_model import fp16_model
from trtconv.onnxlib.session import CPU, CUDA
from trtconv.protocol.request import ConversionOutcome, ConversionRequest
from trtconv.quantize.build import qdq_model
from trtconv.quantize.isa import CPU_SCHEME

log = logging.getLogger(__name__)

PAYLOAD = "model.onnx"
# uint8 activations, int8 weights: the fast x86 path (S8S8 runs partly as float).
QDQ_SCHEME = CPU_SCHEME
SAVED_OPTIMIZATION = "basic"
VALIDATED_BY_EMULATION = "float16 emulation on CPU"


def providers_for(precision: str) -> list[str]:
    """Execution providers for a precision: fp16 is made for CUDA (on any machine: it is
    validated by float16 emulation where CUDA cannot run), tf32 needs CUDA here, fp32 and int8
    run on the CPU."""
    ort = require("onnxruntime")
    available = ort.get_available_providers()
    if precision == Precision.FP16:
        return [CUDA, CPU]
    if precision == Precision.TF32:
        if CUDA not in available:
            raise MissingDependencyError(
                f"ONNX Runtime {precision} needs the CUDA execution provider; available: "
                f"{', '.join(available)} (install trtconv[gpu] on a GPU machine)."
            )
        return [CUDA, CPU]
    return [CPU]


def convert(request: ConversionRequest) -> ConversionOutcome:
    """Write `model.onnx` for the request's precision into `request.output_dir`.

    fp32/tf32: the validated export, optimised offline; int8: the export quantised to U8S8 Q/DQ
    with the weight range the int8 target needs, through the int8 ladder when the request
    carries a search slice (trtconv.quantize.build); fp16: float16 weights and compute with
    float32 inputs/outputs, the nodes float16 breaks kept float32 (trtconv.onnxlib.fp16_model),
    for the CUDA provider and validated by float16 emulation where it cannot run. Raises
    MissingDependencyError for a precision no available provider runs, ConversionError when
    ONNX Runtime fails.
    """
    if request.onnx_path is None:
        raise ConversionError("The ort backend needs the ONNX export (request.onnx_path unset).")
    providers = providers_for(request.precision)
    output = Path(request.output_dir) / PAYLOAD
    summary: dict[str, Any] = {
        "providers": providers,
        "provider_options": [provider_options(p, request.precision) for p in providers],
    }
    if request.precision in (Precision.FP32, Precision.TF32):
        seconds = optimize_offline(request.onnx_path, output, providers)
        summary.update(optimization_level=SAVED_OPTIMIZATION, optimize_seconds=seconds)
    elif request.precision == Precision.INT8:
        # ONNX Runtime on this CPU runs the CPU scheme itself: the ladder's timing says what
        # int8 buys. Kept as pure Q/DQ (no offline fusion into QLinearConv): the same file runs
        # on any EP and is what TensorRT builds explicit-precision engines from.
        qdq, quantization = qdq_model(request, QDQ_SCHEME, timed=True)
        summary["quantization"] = quantization.to_json()
        shutil.copyfile(qdq, output)
    elif request.precision == Precision.FP16:
        fp16 = fp16_model(request, output)
        emulated = emulates_fp16("auto", providers)
        fp16.validated_by = VALIDATED_BY_EMULATION if emulated else providers[0]
        summary["fp16"] = fp16.to_json()
    else:
        raise UsageError(f"The ort backend does not support precision '{request.precision}'.")
    summary["op_counts"] = op_counts(output)
    device: dict[str, str | None] = {"provider": providers[0], "cpu": probe_cpu().model}
    if providers[0] != CPU:
        gpus = probe_gpus()
        device["gpu"] = gpus[0].name if gpus else None
    return ConversionOutcome(payload=PAYLOAD, summary=summary, device=device)


def optimize_offline(source: Path, output: Path, providers: list[str]) -> float:
    """Apply ORT_ENABLE_BASIC graph optimisations to `source` and save them as `output`;
    returns the seconds it took."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(output)
    started = time.perf_counter()
    try:
        ort.InferenceSession(str(source), sess_options=options, providers=providers)
    except Exception as exc:
        raise ConversionError(f"ONNX Runtime could not optimise {source}: {exc}") from exc
    if not output.is_file():
        raise ConversionError(f"ONNX Runtime wrote no optimised model to {output}.")
    return round(time.perf_counter() - started, 3)
