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

The classes live by idea: trt_objects (strictness, the shared Context, Dims, host memory, the
loggers), trt_network (the network and the ONNX parser), trt_builder (profiles, timing cache,
config, build), trt_runtime (engine and execution). This module cuts them to a version's names
and assembles the `tensorrt` module.
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
from .trt_builder import Builder, IBuilderConfig, IOptimizationProfile, ITimingCache
from .trt_network import ILayer, INetworkDefinition, ITensor, OnnxParser, ParserError
from .trt_objects import CONTEXT, Context, Dims, IHostMemory, ILogger, Logger
from .trt_runtime import ICudaEngine, IExecutionContext, Runtime

NAMES = Path(__file__).parent / "names"


def trt_names(version: str) -> dict[str, Any]:
    """The generated name table of TensorRT `version` ("MAJOR.MINOR")."""
    return json.loads((NAMES / f"tensorrt-{version}.json").read_text())


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
    CONTEXT[strict] = ctx
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
