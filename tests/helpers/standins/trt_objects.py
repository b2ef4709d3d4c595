"""What every stand-in TensorRT object stands on: strictness (an instance refuses an attribute
the real class lacks), the Context the objects of one stand-in module share (version, enums, GPU,
log), the registry that hands each strict class its Context, and the small value types: Dims,
IHostMemory and the loggers."""

from __future__ import annotations

import types
from typing import Any

from .cuda_runtime import FakeGpu


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


# The Context of each strict class tensorrt_api made (classes the real API constructs with only a
# logger, Builder and Runtime, find theirs here).
CONTEXT: dict[type, Context] = {}


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
