"""The stand-in runtime: a plan deserializes into an engine (not one from another TensorRT
version: None), an engine makes execution contexts (None when the device memory cannot be
allocated), and a context executes the engine's ONNX model with ONNX Runtime on the CPU, reading
and writing the stand-in GPU's memory at the addresses trtconv set (`set_input_shape` returns
False outside the profile)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .trt_builder import PLAN_MAGIC
from .trt_network import ITensor, tensor_of
from .trt_objects import CONTEXT, Context, Dims, ILogger, Strict


class Runtime(Strict):
    def __init__(self, logger: ILogger) -> None:
        self._ctx: Context = CONTEXT[type(self)]

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
        inputs = [tensor_of(ctx, v) for v in proto.graph.input if v.name not in initializers]
        outputs = [tensor_of(ctx, v) for v in proto.graph.output]
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
