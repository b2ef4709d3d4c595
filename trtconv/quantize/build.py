"""The one entry point of the ONNX int8 library for backends that build from a Q/DQ model (`ort`,
`trt`): the request's validated ONNX export quantised in the backend's scheme, climbing the int8
precision ladder (trtconv.quantize.ladder) when the request carries a search slice.

Conversions of one SavedModel (`convert --backend best`) share the request's `shared` dict: a
Q/DQ model with the same options is made once.
"""

from __future__ import annotations

from pathlib import Path

from trtconv.core.errors import ConversionError
from trtconv.protocol.request import ConversionRequest
from trtconv.quantize.isa import CPU_SCHEME, WeightChoice, cpu_weight_range
from trtconv.quantize.ladder import LadderSettings, quantize_int8
from trtconv.quantize.qdq import QdqOptions, QdqSummary

SHARED_KEY = "qdq models"


def qdq_model(request: ConversionRequest, scheme: str, timed: bool) -> tuple[Path, QdqSummary]:
    """(path of the Q/DQ model, the `quantization` summary block) for `request` in `scheme`.

    The CPU scheme (U8S8) gets the weight range its target's kernels need; other schemes (S8S8
    for TensorRT, which has no int16 saturation) keep the full range. `timed`: the ladder times
    int8 against fp32 with ONNX Runtime on this CPU (meaningful only for the CPU scheme: other
    schemes' speed is their runtime's). Raises ConversionError without the export or
    calibration data.
    """
    if request.onnx_path is None or request.calibration is None or request.work_dir is None:
        raise ConversionError(
            "int8 needs the ONNX export, calibration data and a work directory in the request."
        )
    choice: WeightChoice | None = None
    options = QdqOptions(scheme, request.calib_method)
    if scheme == CPU_SCHEME:
        choice = cpu_weight_range(request.int8_target)
        options = QdqOptions(scheme, request.calib_method, choice.reduce_range)
    made = request.shared.setdefault(SHARED_KEY, {})
    if options not in made:
        made[options] = _quantized(request, options, timed)
    path, summary = made[options]
    return path, summary if choice is None else summary.with_weights(choice)


def _quantized(
    request: ConversionRequest, options: QdqOptions, timed: bool
) -> tuple[Path, QdqSummary]:
    """The Q/DQ model for `options` in the request's scratch directory."""
    assert request.onnx_path and request.calibration and request.work_dir  # checked by qdq_model
    index = len(request.shared[SHARED_KEY])
    path = request.work_dir / f"model.qdq.{index}.onnx"
    work = request.work_dir / f"ladder.{index}"
    work.mkdir()
    summary = quantize_int8(
        request.onnx_path,
        path,
        request.calibration,
        options,
        work,
        _ladder_settings(request, timed),
        str(request.saved_model),
    )
    return path, summary


def _ladder_settings(request: ConversionRequest, timed: bool) -> LadderSettings | None:
    """The ladder's settings from the request's search slice; None with --no-fallback."""
    search = request.search
    if search is None:
        return None
    return LadderSettings(
        search=search.data,
        search_drawn_from=search.drawn_from,
        tolerance=search.tolerance,
        time_limit_s=search.time_limit_s,
        started=search.started,
        batch_sizes=request.batch_sizes,
        timed=timed,
        progress=request.progress,
        roles=search.roles,
    )
