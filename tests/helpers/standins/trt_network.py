"""The stand-in network definition and the ONNX parser that fills it (with the `onnx` package):
inputs, outputs, one layer per node, and what onnx-tensorrt refuses for Q/DQ
(`QuantDequantLinearHelper`): a UINT8 input, non-zero zero points, and a DequantizeLinear whose
input is not INT8/FP8/INT4 (NvInfer.h, IDequantizeLayer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .trt_objects import Context, Dims, ILogger, Strict

# ONNX TensorProto element type -> TensorRT DataType member name.
ONNX_TO_TRT = {1: "FLOAT", 10: "HALF", 3: "INT8", 2: "UINT8", 6: "INT32", 7: "INT64", 9: "BOOL"}
ONNX_TO_TRT.update({16: "BF16", 17: "FP8", 22: "INT4"})
DQ_INPUT_TYPES = {"INT8", "FP8", "INT4", "FP4"}
PRECISION_FLAGS = {"FP16", "INT8", "BF16", "FP8", "INT4", "FP4"}
LAYER_TYPES = {
    "Conv": "CONVOLUTION",
    "ConvTranspose": "DECONVOLUTION",
    "MatMul": "MATRIX_MULTIPLY",
    "Gemm": "MATRIX_MULTIPLY",
    "Relu": "ACTIVATION",
    "Clip": "ACTIVATION",
    "Sigmoid": "ACTIVATION",
    "Add": "ELEMENTWISE",
    "Mul": "ELEMENTWISE",
    "Sub": "ELEMENTWISE",
    "Div": "ELEMENTWISE",
    "MaxPool": "POOLING",
    "AveragePool": "POOLING",
    "GlobalAveragePool": "REDUCE",
    "ReduceMean": "REDUCE",
    "Softmax": "SOFTMAX",
    "Reshape": "SHUFFLE",
    "Transpose": "SHUFFLE",
    "Flatten": "SHUFFLE",
    "Squeeze": "SHUFFLE",
    "Unsqueeze": "SHUFFLE",
    "Constant": "CONSTANT",
    "Cast": "CAST",
    "Concat": "CONCATENATION",
    "QuantizeLinear": "QUANTIZE",
    "DequantizeLinear": "DEQUANTIZE",
    "BatchNormalization": "SCALE",
}


class ITensor(Strict):
    def __init__(self, name: str, shape: tuple[int, ...], dtype: Any) -> None:
        self._name, self._shape, self._dtype = name, Dims(shape), dtype

    name = property(lambda self: self._name)
    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)


class ILayer(Strict):
    def __init__(self, name: str, kind: Any, inputs: list[ITensor]) -> None:
        self._name, self._type, self._inputs = name, kind, inputs

    name = property(lambda self: self._name)
    type = property(lambda self: self._type)
    num_inputs = property(lambda self: len(self._inputs))
    precision = property(lambda self: self._inputs[0].dtype if self._inputs else None)

    def get_input(self, index: int) -> ITensor:
        return self._inputs[index]


class INetworkDefinition(Strict):
    def __init__(self, ctx: Context, flags: int) -> None:
        self._ctx, self._flags = ctx, flags
        self._inputs: list[ITensor] = []
        self._outputs: list[ITensor] = []
        self._layers: list[ILayer] = []
        self._model: bytes = b""

    @property
    def _strongly_typed(self) -> bool:
        flag = self._ctx.module.NetworkDefinitionCreationFlag.STRONGLY_TYPED
        return self._ctx.major >= 11 or bool(self._flags & (1 << int(flag)))

    num_inputs = property(lambda self: len(self._inputs))
    num_outputs = property(lambda self: len(self._outputs))
    num_layers = property(lambda self: len(self._layers))

    def get_input(self, index: int) -> ITensor:
        return self._inputs[index]

    def get_output(self, index: int) -> ITensor:
        return self._outputs[index]

    def get_layer(self, index: int) -> ILayer:
        return self._layers[index]

    def get_flag(self, flag: Any) -> bool:
        if int(flag) == int(self._ctx.module.NetworkDefinitionCreationFlag.STRONGLY_TYPED):
            return self._strongly_typed
        return bool(self._flags & (1 << int(flag)))

    def __len__(self) -> int:
        return len(self._layers)

    def __getitem__(self, index: int) -> ILayer:
        return self._layers[index]


class ParserError(Strict):
    def __init__(self, code: Any, desc: str, node_name: str) -> None:
        self._code, self._desc, self._node_name = code, desc, node_name

    def code(self) -> Any:
        return self._code

    def desc(self) -> str:
        return self._desc

    def node_name(self) -> str:
        return self._node_name

    def __str__(self) -> str:
        return f"In node ({self._node_name}): {self._code.name}: {self._desc}"

    __repr__ = __str__


class OnnxParser(Strict):
    """Parses with the `onnx` package: inputs, outputs, one layer per node, Q/DQ rules."""

    def __init__(self, network: INetworkDefinition, logger: ILogger) -> None:
        self._network, self._errors = network, []

    num_errors = property(lambda self: len(self._errors))

    def get_error(self, index: int) -> ParserError:
        return self._errors[index]

    def clear_errors(self) -> None:
        self._errors = []

    def parse_from_file(self, model: str) -> bool:
        return self.parse(Path(model).read_bytes(), str(Path(model).parent))

    def parse(self, model: bytes, path: str | None = None) -> bool:
        import onnx

        ctx = self._network._ctx
        codes = ctx.module.ErrorCode
        try:
            proto = onnx.shape_inference.infer_shapes(onnx.load_from_string(bytes(model)))
        except Exception as exc:
            self._errors.append(
                ctx.make("ParserError", codes.MODEL_DESERIALIZE_FAILED, str(exc), "")
            )
            return False
        types_ = _value_types(proto)
        for node in proto.graph.node:
            problem = _qdq_problem(node, proto, types_)
            if problem:
                error = ctx.make("ParserError", codes.UNSUPPORTED_NODE_DATATYPE, problem, node.name)
                self._errors.append(error)
        if self._errors:
            return False
        self._fill_network(proto, types_)
        self._network._model = proto.SerializeToString()
        return True

    def _fill_network(self, proto: Any, types_: dict[str, int]) -> None:
        ctx, network = self._network._ctx, self._network
        data_type = ctx.module.DataType
        initializers = {init.name for init in proto.graph.initializer}
        tensors: dict[str, ITensor] = {}
        for value in proto.graph.input:
            if value.name in initializers:
                continue
            tensor = tensor_of(ctx, value)
            tensors[value.name] = tensor
            network._inputs.append(tensor)
        for value in proto.graph.output:
            network._outputs.append(tensor_of(ctx, value))
        for node in proto.graph.node:
            kind = getattr(ctx.module.LayerType, LAYER_TYPES.get(node.op_type, "IDENTITY"))
            inputs = [tensors[name] for name in node.input if name in tensors]
            for name in node.output:
                elem = types_.get(name, 1)
                dtype = getattr(data_type, ONNX_TO_TRT.get(elem, "FLOAT"))
                tensors[name] = ctx.make("ITensor", name, (), dtype)
            network._layers.append(ctx.make("ILayer", node.name or node.op_type, kind, inputs))


def tensor_of(ctx: Context, value: Any) -> ITensor:
    """The stand-in tensor of an ONNX graph input or output (-1 for a dynamic dimension)."""
    shape = tuple(
        d.dim_value if d.HasField("dim_value") else -1 for d in value.type.tensor_type.shape.dim
    )
    elem = value.type.tensor_type.elem_type
    dtype = getattr(ctx.module.DataType, ONNX_TO_TRT.get(elem, "FLOAT"))
    return ctx.make("ITensor", value.name, shape, dtype)


def _value_types(proto: Any) -> dict[str, int]:
    """ONNX element type of every named value (inputs, initializers, inferred intermediates)."""
    found = {init.name: init.data_type for init in proto.graph.initializer}
    for value in [*proto.graph.input, *proto.graph.value_info, *proto.graph.output]:
        found[value.name] = value.type.tensor_type.elem_type
    return found


def _qdq_problem(node: Any, proto: Any, types_: dict[str, int]) -> str:
    """What onnx-tensorrt refuses in a QuantizeLinear/DequantizeLinear node ('' when fine)."""
    if node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
        return ""
    from onnx import numpy_helper

    data = ONNX_TO_TRT.get(types_.get(node.input[0], 0), "?")
    if data == "UINT8":
        return "UINT8 is not a valid input type for QuantizeLinear/DequantizeLinear"
    if node.op_type == "DequantizeLinear" and data not in DQ_INPUT_TYPES:
        return f"IDequantizeLayer input must be INT8, FP8, INT4 or FP4, found {data}"
    if len(node.input) > 2 and node.input[2]:
        zero = {i.name: i for i in proto.graph.initializer}.get(node.input[2])
        if zero is not None and np.any(numpy_helper.to_array(zero) != 0):
            return "TensorRT only supports symmetric quantization: zero points must be 0"
    return ""
