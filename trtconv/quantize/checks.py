"""What TensorRT accepts in a Q/DQ model, checked on the CPU before any TensorRT is involved.

TensorRT's IDequantizeLayer takes INT8, FP8, INT4 or FP4 input only (NvInfer.h), and
onnx-tensorrt's QuantizeLinear/DequantizeLinear importer refuses UINT8 data and non-zero zero
points (symmetric quantisation only). ONNX Runtime's quantiser, left to its defaults, also writes
int32 bias `DequantizeLinear` nodes (`QuantizeBias`), which TensorRT cannot build; the `trt`
scheme keeps biases in float, and this check proves it on every model before it is shipped.
"""

from __future__ import annotations

from pathlib import Path

from trtconv.core.errors import ConversionError
from trtconv.core.lazy import require

# ONNX TensorProto element types TensorRT dequantises: INT8, FLOAT8E4M3FN, INT4, FLOAT4E2M1.
TENSORRT_DQ_INPUTS = {3: "int8", 17: "float8e4m3fn", 22: "int4", 23: "float4e2m1"}


def tensorrt_qdq_problems(path: Path) -> list[str]:
    """One sentence per DequantizeLinear that TensorRT would refuse, [] when it takes them all.

    A DequantizeLinear is fine when its input is an int8 (or fp8/int4/fp4) initializer or the
    output of a QuantizeLinear whose zero point is one of those types; its zero point, when
    given as an initializer, must be all zeros.
    """
    onnx = require("onnx")
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    initializers = {init.name: init for init in model.graph.initializer}
    quantized = {
        node.output[0]: node for node in model.graph.node if node.op_type == "QuantizeLinear"
    }
    problems = []
    for node in model.graph.node:
        if node.op_type != "DequantizeLinear":
            continue
        name = node.name or node.output[0]
        source = node.input[0]
        if source in initializers:
            kind = initializers[source].data_type
        elif source in quantized:
            kind = _zero_point_type(quantized[source], initializers)
        else:
            problems.append(f"DequantizeLinear {name} does not follow a QuantizeLinear")
            continue
        if kind not in TENSORRT_DQ_INPUTS:
            found = onnx.TensorProto.DataType.Name(kind).lower()
            problems.append(f"DequantizeLinear {name} takes {found}, not int8")
            continue
        zero = initializers.get(node.input[2]) if len(node.input) > 2 else None
        if zero is not None and numpy_helper.to_array(zero).any():
            problems.append(f"DequantizeLinear {name} has a non-zero zero point")
    return problems


def _zero_point_type(node: object, initializers: dict[str, object]) -> int:
    """The element type a QuantizeLinear produces: its zero point's (uint8 when it has none)."""
    inputs = list(node.input)  # type: ignore[attr-defined]
    if len(inputs) > 2 and inputs[2] in initializers:
        return int(initializers[inputs[2]].data_type)  # type: ignore[attr-defined]
    return 2  # ONNX's default zero point is uint8


def require_tensorrt_qdq(path: Path, model_name: str) -> None:
    """Raise ConversionError naming the first few nodes TensorRT would refuse in `path`."""
    problems = tensorrt_qdq_problems(path)
    if problems:
        shown = "; ".join(problems[:3]) + (
            f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        )
        raise ConversionError(
            f"The TensorRT Q/DQ model of {model_name} has {len(problems)} DequantizeLinear "
            f"node(s) TensorRT cannot build (it dequantises int8/fp8/int4 only): {shown}."
        )
