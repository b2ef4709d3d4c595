"""SavedModel -> OpenVINO IR artifact: fp32, bf16 and fp16 share the float32 IR (the precision is
how the CPU plugin computes it, set when the runner compiles it); int8 is the NNCF-quantised IR."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import trtconv.backends.openvino.ir as ir
from trtconv.backends.openvino.ladder import quantize_int8
from trtconv.backends.openvino.runner import INFERENCE_PRECISION
from trtconv.core.errors import ConversionError, UsageError
from trtconv.core.lazy import require
from trtconv.core.precision import Precision
from trtconv.facts import probe_cpu
from trtconv.protocol.request import ConversionOutcome, ConversionRequest

SHARED_KEY = "openvino float IR"


def convert(request: ConversionRequest) -> ConversionOutcome:
    """Write `model.xml` + `model.bin` for the request's precision into `request.output_dir`.

    int8: NNCF calibrated on `request.calibration`, with the weight range its int8 target needs,
    and with `request.search` the int8 ladder's fallback when it misses
    the budget (trtconv.backends.openvino.ladder). Raises UsageError for a precision OpenVINO
    has no mode for, ConversionError when OpenVINO or NNCF fails or int8 has no calibration
    feed.
    """
    if request.precision not in INFERENCE_PRECISION:
        raise UsageError(f"The openvino backend does not support precision '{request.precision}'.")
    ov = require("openvino")
    started = time.perf_counter()
    # fp32, bf16, fp16 and int8 start from the same float IR: made once per SavedModel.
    if SHARED_KEY not in request.shared:
        request.shared[SHARED_KEY] = ir.model_from_saved_model(
            request.saved_model, request.signature
        )
    model = request.shared[SHARED_KEY]
    summary: dict[str, Any] = {
        "openvino_version": ov.get_version(),
        "source": "serving_default concrete function (ov.convert_model)",
        "convert_seconds": round(time.perf_counter() - started, 3),
        "inference_precision": INFERENCE_PRECISION[request.precision] or "plugin default",
    }
    if request.precision == Precision.INT8:
        if request.calibration is None:
            raise ConversionError("openvino int8 needs calibration data (request.calibration).")
        model, quantization = quantize_int8(model.clone(), request)  # the shared IR stays float
        # Ops the int8 ladder kept in float pin the precision the runner computes them in.
        pinned = quantization.inference_precision
        summary["inference_precision"] = pinned or summary["inference_precision"]
        summary["quantization"] = replace(quantization, inference_precision=None).to_json()
    ir.save_ir(model, Path(request.output_dir))
    summary["op_counts"] = ir.op_counts(model)
    device = {"device": "CPU", "cpu": probe_cpu().model}
    return ConversionOutcome(payload=ir.PAYLOAD, summary=summary, device=device)
