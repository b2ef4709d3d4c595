"""The CPU check of what TensorRT dequantises, on small hand-made Q/DQ graphs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trtconv.core.errors import ConversionError
from trtconv.quantize.checks import require_tensorrt_qdq, tensorrt_qdq_problems

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def save(path: Path, nodes: list, initializers: dict[str, np.ndarray]) -> Path:
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()],
    )
    onnx.save(helper.make_model(graph), str(path))
    return path


SCALE = {"s": np.array(0.1, np.float32)}


def qdq_pair(zero: np.ndarray) -> tuple[list, dict[str, np.ndarray]]:
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="q"),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dq"),
    ]
    return nodes, {**SCALE, "z": zero}


def test_symmetric_int8_pairs_and_int8_weights_pass(tmp_path: Path) -> None:
    nodes, inits = qdq_pair(np.array(0, np.int8))
    nodes.append(helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], name="dq_w"))
    inits["w"] = np.ones((4, 4), np.int8)
    path = save(tmp_path / "ok.onnx", nodes, inits)
    assert tensorrt_qdq_problems(path) == []
    require_tensorrt_qdq(path, "ok")


def test_int32_bias_uint8_and_asymmetric_dequantize_are_refused(tmp_path: Path) -> None:
    nodes, inits = qdq_pair(np.array(3, np.int8))  # asymmetric
    nodes += [
        helper.make_node("DequantizeLinear", ["b", "s"], ["bf"], name="dq_bias"),
        helper.make_node("QuantizeLinear", ["x", "s"], ["u"], name="q_u8"),  # default uint8
        helper.make_node("DequantizeLinear", ["u", "s"], ["uf"], name="dq_u8"),
        helper.make_node("DequantizeLinear", ["x", "s"], ["xf"], name="dq_float"),
    ]
    inits["b"] = np.zeros(4, np.int32)
    path = save(tmp_path / "bad.onnx", nodes, inits)
    assert tensorrt_qdq_problems(path) == [
        "DequantizeLinear dq has a non-zero zero point",
        "DequantizeLinear dq_bias takes int32, not int8",
        "DequantizeLinear dq_u8 takes uint8, not int8",
        "DequantizeLinear dq_float does not follow a QuantizeLinear",
    ]
    with pytest.raises(ConversionError, match=r"of models/m has 4 DequantizeLinear .*and 1 more"):
        require_tensorrt_qdq(path, "models/m")
