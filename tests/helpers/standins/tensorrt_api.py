"""Strict stand-ins for the TensorRT 10 and 11 Python bindings (`tensorrt_module(version, gpu)`).

Strict means: the module, each class and each enum hold only names the real binding of that
version defines (`names/tensorrt-*.json`, dumped from the real bindings wheel by
`generate_names.py`), so `trt.BuilderFlag.FP16` raises AttributeError on 11 as it does for real,
and an instance refuses an attribute the real class lacks. Enum values are the real ones
(STRONGLY_TYPED is 1 on 10, 0 on 11) and `__version__` is the wheel's.

Behaviour follows the real API where trtconv depends on it, each rule with its source:
- the ONNX parser refuses what onnx-tensorrt refuses for Q/DQ (`QuantDequantLinearHelper`):
  a UINT8 input, non-zero zero points, and a DequantizeLinear whose input is not INT8/FP8/INT4
  (NvInfer.h, IDequantizeLayer);
- TensorRT 11 networks are always strongly typed (NetworkDefinitionCreationFlag docs);
- `set_input_shape` returns False outside the profile; `set_timing_cache` returns False for a
  cache from another device and a cache from another version is not loaded (NvInfer.h
  IBuilderConfig::setTimingCache; the builder logs "The timing cache will not be used!");
- `create_execution_context` returns None when the device memory cannot be allocated;
- `Builder(logger)` raises pybind11's "factory function returned nullptr" TypeError when a
  TensorRT for CUDA 13 meets a driver older than R580 (`FakeGpu(driver_ok=False)`): the real
  bindings do exactly this when `createInferBuilder` returns nullptr (seen by importing them
  against stub libraries, `generate_names.py`);
- a plan from another TensorRT version does not deserialize (None).

An "engine" is the ONNX model it was built from plus what the builder recorded; executing it runs
that model with ONNX Runtime on the CPU, reading and writing the stand-in GPU's memory at the
addresses trtconv set. It proves our side of the boundary (shapes, addresses, copies, flags), not
TensorRT's numerics or speed.
"""

from __future__ import annotations

import enum
import importlib.machinery
import json
import types
from pathlib import Path
from typing import Any

import numpy as np

from .cuda_runtime import FakeGpu

NAMES = Path(__file__).parent / "names"
PLAN_MAGIC = b"TRTCONV-STANDIN-PLAN\n"
CACHE_MAGIC = b"TRTCONV-STANDIN-TIMING-CACHE\n"
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


def trt_names(version: str) -> dict[str, Any]:
    """The generated name table of TensorRT `version` ("MAJOR.MINOR")."""
    return json.loads((NAMES / f"tensorrt-{version}.json").read_text())


class Strict:
    """Refuses to set a public attribute the class does not define (pybind11 objects have no
    __dict__); private state lives in `_` names."""

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_") and not isinstance(getattr(type(self), name, None), property):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        object.__setattr__(self, name, value)


class Context:
    """What every stand-in object of one module shares: version, enums, GPU, log."""

    def __init__(self, names: dict[str, Any], gpu: FakeGpu, module: types.ModuleType) -> None:
        self.version, self.gpu, self.module = names["source"]["version"], gpu, module
        self.major = int(self.version.split(".")[0])
        # The bindings wheel's CUDA major: tensorrt-cu12-bindings or tensorrt-cu13-bindings.
        self.cuda_major = int(names["source"]["package"].split("-cu")[1].split("-")[0])
        self.messages: list[tuple[int, str]] = []

    def log(self, severity: str, message: str) -> None:
        self.messages.append((int(getattr(self.module.ILogger.Severity, severity)), message))

    def make(self, name: str, *args: Any) -> Any:
        """A new object of this version's (strict) class `name`."""
        return getattr(self.module, name)(*args)

    def device_key(self) -> str:
        major, minor = self.gpu.compute_capability
        return f"{self.gpu.name}|sm_{major}{minor}"


# --- foundational types ---------------------------------------------------------------------


class Dims(Strict):
    MAX_DIMS = 8

    def __init__(self, shape: Any = ()) -> None:
        self._dims = tuple(int(d) for d in shape)

    def __len__(self) -> int:
        return len(self._dims)

    def __getitem__(self, index: int) -> int:
        return self._dims[index]

    def __setitem__(self, index: int, value: int) -> None:
        dims = list(self._dims)
        dims[index] = int(value)
        self._dims = tuple(dims)

    def __eq__(self, other: object) -> bool:
        return self._dims == tuple(other) if isinstance(other, (Dims, tuple, list)) else False

    def __repr__(self) -> str:
        return f"({', '.join(str(d) for d in self._dims)})"

    __str__ = __repr__
    __hash__ = None  # type: ignore[assignment]


class IHostMemory(Strict):
    """Serialized bytes with the buffer protocol (`bytes(memory)` works as on the real one)."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __buffer__(self, flags: int) -> memoryview:  # Python >= 3.12
        return memoryview(self._data)

    def __bytes__(self) -> bytes:  # Python 3.11 has no __buffer__: bytes() falls back to this
        return self._data

    @property
    def nbytes(self) -> int:
        return len(self._data)


# --- logging ---------------------------------------------------------------------------------


class ILogger(Strict):
    def log(self, severity: Any, msg: str) -> None:
        pass


class Logger(ILogger):
    def __init__(self, min_severity: Any = None) -> None:
        self._min = min_severity

    @property
    def min_severity(self) -> Any:
        return self._min

    @min_severity.setter
    def min_severity(self, value: Any) -> None:
        self._min = value


# --- network ---------------------------------------------------------------------------------


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
            tensor = _tensor(ctx, value)
            tensors[value.name] = tensor
            network._inputs.append(tensor)
        for value in proto.graph.output:
            network._outputs.append(_tensor(ctx, value))
        for node in proto.graph.node:
            kind = getattr(ctx.module.LayerType, LAYER_TYPES.get(node.op_type, "IDENTITY"))
            inputs = [tensors[name] for name in node.input if name in tensors]
            for name in node.output:
                elem = types_.get(name, 1)
                dtype = getattr(data_type, ONNX_TO_TRT.get(elem, "FLOAT"))
                tensors[name] = ctx.make("ITensor", name, (), dtype)
            network._layers.append(ctx.make("ILayer", node.name or node.op_type, kind, inputs))


def _tensor(ctx: Context, value: Any) -> ITensor:
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


# --- builder ---------------------------------------------------------------------------------


class IOptimizationProfile(Strict):
    def __init__(self) -> None:
        self._shapes: dict[str, list[Dims]] = {}
        self._valid = True

    def set_shape(self, input: str, min: Any, opt: Any, max: Any) -> None:
        low, best, high = Dims(min), Dims(opt), Dims(max)
        ordered = len(low) == len(best) == len(high) and all(
            a <= b <= c for a, b, c in zip(low, best, high, strict=True)
        )
        if not ordered:
            self._valid = False  # the real call logs an error and leaves the profile invalid
        self._shapes[input] = [low, best, high]

    def get_shape(self, input: str) -> list[Dims]:
        return self._shapes.get(input, [])

    def __bool__(self) -> bool:
        return self._valid


class ITimingCache(Strict):
    def __init__(self, ctx: Context, header: dict[str, Any]) -> None:
        self._ctx, self._header = ctx, header

    def serialize(self) -> IHostMemory:
        return self._ctx.make("IHostMemory", CACHE_MAGIC + json.dumps(self._header).encode())

    def combine(self, input_cache: ITimingCache, ignore_mismatch: bool) -> bool:
        if input_cache._header["device"] != self._header["device"] and not ignore_mismatch:
            return False
        self._header["entries"] += input_cache._header["entries"]
        return True

    def reset(self) -> bool:
        self._header["entries"] = 0
        return True


class IBuilderConfig(Strict):
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._flags = {int(ctx.module.BuilderFlag.TF32)}  # TF32 is on by default
        self._pools: dict[int, int] = {}
        self._profiles: list[IOptimizationProfile] = []
        self._cache: ITimingCache | None = None

    def set_memory_pool_limit(self, pool: Any, pool_size: int) -> None:
        self._pools[int(pool)] = int(pool_size)

    def get_memory_pool_limit(self, pool: Any) -> int:
        return self._pools.get(int(pool), self._ctx.gpu.total_bytes)

    def set_flag(self, flag: Any) -> None:
        self._flags.add(int(flag))

    def clear_flag(self, flag: Any) -> None:
        self._flags.discard(int(flag))

    def get_flag(self, flag: Any) -> bool:
        return int(flag) in self._flags

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        if not profile:
            return -1
        self._profiles.append(profile)
        return len(self._profiles) - 1

    num_optimization_profiles = property(lambda self: len(self._profiles))

    def create_timing_cache(self, serialized_timing_cache: Any) -> ITimingCache | None:
        data = bytes(serialized_timing_cache)
        fresh = {"tensorrt": self._ctx.version, "device": self._ctx.device_key(), "entries": 0}
        if not data:
            return self._ctx.make("ITimingCache", self._ctx, fresh)
        if not data.startswith(CACHE_MAGIC):
            self._ctx.log("ERROR", "Serialization assertion magicTagRead == kMAGIC_TAG failed")
            return None
        header = json.loads(data[len(CACHE_MAGIC) :])
        if header["tensorrt"] != self._ctx.version:
            self._ctx.log("ERROR", "The timing cache will not be used! (version mismatch)")
            return None
        return self._ctx.make("ITimingCache", self._ctx, header)

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
        if cache._header["device"] != self._ctx.device_key() and not ignore_mismatch:
            self._ctx.log("ERROR", "The timing cache was created on a different device")
            return False
        self._cache = cache
        return True

    def get_timing_cache(self) -> ITimingCache | None:
        return self._cache


class Builder(Strict):
    def __init__(self, logger: ILogger) -> None:
        self._ctx: Context = _CONTEXT[type(self)]
        if self._ctx.cuda_major >= 13 and not self._ctx.gpu.driver_ok:
            raise TypeError("pybind11::init(): factory function returned nullptr")

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        known = {int(v) for v in self._ctx.module.NetworkDefinitionCreationFlag}
        if any(flags & (1 << bit) for bit in range(32) if bit not in known):
            raise ValueError(f"create_network: unknown NetworkDefinitionCreationFlag bits {flags}")
        return self._ctx.make("INetworkDefinition", self._ctx, int(flags))

    def create_builder_config(self) -> IBuilderConfig:
        return self._ctx.make("IBuilderConfig", self._ctx)

    def create_optimization_profile(self) -> IOptimizationProfile:
        return self._ctx.make("IOptimizationProfile")

    def build_serialized_network(
        self, network: INetworkDefinition, config: IBuilderConfig
    ) -> IHostMemory | None:
        problem = _build_problem(self._ctx, network, config)
        if problem:
            self._ctx.log("ERROR", problem)
            return None
        if config._cache is not None:
            config._cache._header["entries"] += network.num_layers
        module = self._ctx.module
        header = {
            "tensorrt": self._ctx.version,
            "device": self._ctx.device_key(),
            "strongly_typed": network._strongly_typed,
            "flags": sorted(f.name for f in module.BuilderFlag if int(f) in config._flags),
            "profiles": [
                {name: [list(d) for d in shapes] for name, shapes in p._shapes.items()}
                for p in config._profiles
            ],
            "device_memory": sum(config._pools.values()) // 1024,
        }
        encoded = json.dumps(header).encode()
        plan = PLAN_MAGIC + len(encoded).to_bytes(8, "little") + encoded + network._model
        return self._ctx.make("IHostMemory", plan)


def _build_problem(ctx: Context, network: INetworkDefinition, config: IBuilderConfig) -> str:
    """Why the real builder would fail for this network and config ('' when it would build)."""
    flags = {f.name for f in ctx.module.BuilderFlag if int(f) in config._flags}
    if network._strongly_typed and flags & PRECISION_FLAGS:
        return f"precision flags {sorted(flags & PRECISION_FLAGS)} on a strongly typed network"
    for tensor in network._inputs:
        if all(dim >= 0 for dim in tensor.shape):
            continue
        if not config._profiles or any(tensor.name not in p._shapes for p in config._profiles):
            return f"network input {tensor.name} has dynamic dimensions and no profile shape"
        for profile in config._profiles:
            for dims in profile._shapes[tensor.name]:
                fixed = [(a, b) for a, b in zip(tensor.shape, dims, strict=True) if a >= 0]
                if len(dims) != len(tensor.shape) or any(a != b for a, b in fixed):
                    return f"profile {list(dims)} does not fit input {tensor.name}"
    return ""


# --- runtime ---------------------------------------------------------------------------------


class Runtime(Strict):
    def __init__(self, logger: ILogger) -> None:
        self._ctx: Context = _CONTEXT[type(self)]

    def deserialize_cuda_engine(self, serialized_engine: Any) -> ICudaEngine | None:
        data = bytes(serialized_engine)
        if not data.startswith(PLAN_MAGIC):
            self._ctx.log("ERROR", "Serialization assertion: magic tag does not match")
            return None
        offset = len(PLAN_MAGIC)
        size = int.from_bytes(data[offset : offset + 8], "little")
        header = json.loads(data[offset + 8 : offset + 8 + size])
        if header["tensorrt"] != self._ctx.version:
            self._ctx.log("ERROR", "The engine plan file is not compatible with this version")
            return None
        return self._ctx.make("ICudaEngine", self._ctx, header, data[offset + 8 + size :])


class ICudaEngine(Strict):
    def __init__(self, ctx: Context, header: dict[str, Any], model: bytes) -> None:
        import onnx

        self._ctx, self._header, self._model = ctx, header, model
        proto = onnx.load_from_string(model)
        initializers = {init.name for init in proto.graph.initializer}
        inputs = [_tensor(ctx, v) for v in proto.graph.input if v.name not in initializers]
        outputs = [_tensor(ctx, v) for v in proto.graph.output]
        self._io = [(t, True) for t in inputs] + [(t, False) for t in outputs]
        self._session: Any = None

    num_io_tensors = property(lambda self: len(self._io))
    num_optimization_profiles = property(lambda self: len(self._header["profiles"]))
    # TensorRT 10.1+ (10.0 has only device_memory_size, which 11 removed): each version keeps
    # the ones its binding has.
    device_memory_size_v2 = property(lambda self: self._header["device_memory"])
    device_memory_size = property(lambda self: self._header["device_memory"])

    def _find(self, name: str) -> tuple[ITensor, bool]:
        for tensor, is_input in self._io:
            if tensor.name == name:
                return tensor, is_input
        raise KeyError(name)  # the real binding logs an error and returns a default

    def get_tensor_name(self, index: int) -> str:
        return self._io[index][0].name

    def get_tensor_mode(self, name: str) -> Any:
        mode = self._ctx.module.TensorIOMode
        return mode.INPUT if self._find(name)[1] else mode.OUTPUT

    def get_tensor_dtype(self, name: str) -> Any:
        return self._find(name)[0].dtype

    def get_tensor_shape(self, name: str) -> Dims:
        return self._find(name)[0].shape

    def get_tensor_profile_shape(self, name: str, profile_index: int) -> list[Dims]:
        shapes = self._header["profiles"][profile_index].get(name)
        return [Dims(s) for s in shapes] if shapes else []

    def create_execution_context(self, strategy: Any = None) -> IExecutionContext | None:
        gpu = self._ctx.gpu
        if gpu.total_bytes - gpu.used_bytes < self._header["device_memory"]:
            self._ctx.log("ERROR", "Requested amount of GPU memory could not be allocated")
            return None
        return self._ctx.make("IExecutionContext", self)


class IExecutionContext(Strict):
    def __init__(self, engine: ICudaEngine) -> None:
        self._engine = engine
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._addresses: dict[str, int] = {}

    engine = property(lambda self: self._engine)

    def set_input_shape(self, name: str, shape: Any) -> bool:
        low, _, high = self._engine.get_tensor_profile_shape(name, 0)
        dims = tuple(int(d) for d in shape)
        inside = len(dims) == len(low) and all(
            a <= d <= b for a, d, b in zip(low, dims, high, strict=True)
        )
        if not inside:
            self._engine._ctx.log("ERROR", f"{name}: shape {dims} outside the profile")
            return False
        self._shapes[name] = dims
        return True

    @property
    def all_binding_shapes_specified(self) -> bool:
        inputs = [t.name for t, is_input in self._engine._io if is_input]
        return all(name in self._shapes for name in inputs)

    def get_tensor_shape(self, name: str) -> Dims:
        tensor, is_input = self._engine._find(name)
        if is_input:
            return Dims(self._shapes.get(name, tensor.shape))
        batch = next(iter(self._shapes.values()), (-1,))[0]
        return Dims(batch if d < 0 else d for d in tensor.shape)

    def set_tensor_address(self, name: str, memory: int) -> bool:
        self._engine._find(name)
        self._addresses[name] = int(memory)
        return True

    def get_tensor_address(self, name: str) -> int:
        return self._addresses.get(name, 0)

    def execute_async_v3(self, stream_handle: int) -> bool:
        if not isinstance(stream_handle, int):
            raise TypeError("execute_async_v3(): incompatible function arguments (stream_handle)")
        names = [t.name for t, _ in self._engine._io]
        if not self.all_binding_shapes_specified or any(n not in self._addresses for n in names):
            self._engine._ctx.log("ERROR", "execute: not all shapes or addresses are set")
            return False
        _run(self)
        return True


def _run(context: IExecutionContext) -> None:
    """Run the engine's model with ONNX Runtime on the stand-in GPU's memory."""
    import onnxruntime as ort

    engine, gpu = context._engine, context._engine._ctx.gpu
    if engine._session is None:
        engine._session = ort.InferenceSession(engine._model, providers=["CPUExecutionProvider"])
    nptype = engine._ctx.module.nptype
    feeds = {}
    for tensor, is_input in engine._io:
        if is_input:
            dtype = np.dtype(nptype(tensor.dtype))
            shape = context._shapes[tensor.name]
            raw = gpu.read(context._addresses[tensor.name], int(np.prod(shape)) * dtype.itemsize)
            feeds[tensor.name] = np.frombuffer(raw, dtype).reshape(shape)
    results = engine._session.run(None, feeds)
    outputs = [t for t, is_input in engine._io if not is_input]
    for tensor, value in zip(outputs, results, strict=True):
        value = np.ascontiguousarray(value, np.dtype(nptype(tensor.dtype)))
        gpu.write(context._addresses[tensor.name], value.tobytes())
    gpu.launches += 1


# --- the module ------------------------------------------------------------------------------

IMPLEMENTED = (
    Dims,
    IHostMemory,
    ILogger,
    Logger,
    ITensor,
    ILayer,
    INetworkDefinition,
    ParserError,
    OnnxParser,
    IOptimizationProfile,
    ITimingCache,
    IBuilderConfig,
    Builder,
    Runtime,
    ICudaEngine,
    IExecutionContext,
)
ALWAYS = {"__init__", "__module__", "__qualname__", "__doc__", "__setattr__", "__hash__"}
_CONTEXT: dict[type, Context] = {}


# What Python itself writes into a class: its instance dict, weak references, and from 3.13 the
# line it starts at and the attributes its methods assign.
PYTHON_CLASS_NAMES = frozenset(
    {"__dict__", "__weakref__", "__buffer__", "__bytes__"}
    | {"__firstlineno__", "__static_attributes__"}
)


def public_names(cls: type) -> set[str]:
    """The attribute names a stand-in class defines itself that trtconv could reach."""
    return {
        name
        for name in vars(cls)
        if not name.startswith("_") or (name.startswith("__") and name not in ALWAYS)
    } - PYTHON_CLASS_NAMES


def strict_class(cls: type, real: dict[str, list[str]], ctx: Context) -> type:
    """A subclass of `cls` that hides every name `cls` defines and the real class lacks."""
    hidden = {name: _absent(cls.__name__, name) for name in public_names(cls) if name not in real}
    strict = type(cls.__name__, (cls,), {**hidden, "__module__": "tensorrt"})
    _CONTEXT[strict] = ctx
    return strict


def _absent(owner: str, name: str) -> property:
    def fail(self: Any) -> Any:
        raise AttributeError(f"'{owner}' object has no attribute '{name}' in this TensorRT version")

    return property(fail)


def _enums(names: dict[str, Any]) -> dict[str, type[enum.IntEnum]]:
    """Every enum of the table as an IntEnum with the real members and values."""
    return {
        qualified: enum.IntEnum(qualified.split(".")[-1], members)
        for qualified, members in names["enums"].items()
    }


def tensorrt_module(version: str, gpu: FakeGpu) -> types.ModuleType:
    """A `tensorrt` stand-in: the names of TensorRT `version` (a generated "MAJOR.MINOR" list),
    the behaviour above, and `module.__standin__` (the shared Context: log, GPU) for tests."""
    names = trt_names(version)
    module = types.ModuleType("tensorrt")
    module.__spec__ = importlib.machinery.ModuleSpec("tensorrt", None)
    ctx = Context(names, gpu, module)
    for qualified, made in _enums(names).items():
        if "." not in qualified:
            setattr(module, qualified, made)
    for cls in IMPLEMENTED:
        setattr(module, cls.__name__, strict_class(cls, names["classes"][cls.__name__], ctx))
    severity = _enums(names)["ILogger.Severity"]
    module.ILogger.Severity = severity
    module.Logger.Severity = severity
    for member in severity:
        setattr(module.Logger, member.name, member)
    data_type = module.DataType
    aliases = {"float32": "FLOAT", "float16": "HALF", "int8": "INT8", "int32": "INT32"}
    aliases.update({"int64": "INT64", "bool": "BOOL", "uint8": "UINT8", "bfloat16": "BF16"})
    for alias, member in aliases.items():
        setattr(module, alias, getattr(data_type, member))
    module.nptype = _nptype(data_type)
    module.volume = lambda iterable: int(np.prod(list(iterable), dtype=np.int64))
    module.__version__ = ctx.version
    module.__standin__ = ctx
    return module


def _nptype(data_type: Any) -> Any:
    mapping = {"FLOAT": np.float32, "HALF": np.float16, "INT8": np.int8, "INT32": np.int32}
    mapping.update({"INT64": np.int64, "BOOL": np.bool_, "UINT8": np.uint8})

    def nptype(trt_type: Any) -> Any:
        if trt_type.name in mapping:
            return mapping[trt_type.name]
        raise TypeError("Could not resolve TensorRT datatype to an equivalent numpy datatype.")

    return nptype
