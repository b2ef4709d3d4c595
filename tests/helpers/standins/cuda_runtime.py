"""A strict stand-in for cuda-python's `cuda.bindings.runtime`, backed by a fake GPU in host memory.

Only the functions trtconv calls are defined, with the parameter names of the real binding
(`names/cuda-bindings-*.json`, read from the installed package); a test checks both. Every call
returns a tuple whose first item is a `cudaError_t`, as the real functions do. Device memory is a
set of bytearrays at fake addresses: copies check that the addresses lie inside an allocation and
that the copy kind matches where each side lives, so a wrong pointer or size fails loudly here
where a real GPU would corrupt memory. Work enqueued on a stream runs at once, and events record
the host clock, so elapsed times are real (small) numbers.
"""

from __future__ import annotations

import ctypes
import enum
import itertools
import json
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMES = Path(__file__).parent / "names"
BASE_ADDRESS = 0x7F00_0000_0000


def cuda_names(version: str) -> dict[str, Any]:
    return json.loads((NAMES / f"cuda-bindings-{version}.json").read_text())


@dataclass
class FakeGpu:
    """The device behind the stand-ins: name, compute capability, memory and what ran."""

    name: str = "NVIDIA H100 80GB HBM3"
    compute_capability: tuple[int, int] = (9, 0)
    total_bytes: int = 80 << 30
    # False: a driver older than R580. cuda-python 13 fails every call there
    # (cudaErrorInsufficientDriver), cuda-python 12 works, TensorRT for CUDA 13 builds nothing.
    driver_ok: bool = True
    allocations: dict[int, bytearray] = field(default_factory=dict)
    next_address: int = BASE_ADDRESS
    launches: int = 0

    @property
    def used_bytes(self) -> int:
        return sum(len(buffer) for buffer in self.allocations.values())

    def allocate(self, size: int) -> int | None:
        if self.used_bytes + size > self.total_bytes:
            return None
        address = self.next_address
        self.allocations[address] = bytearray(max(size, 1))
        self.next_address += (max(size, 1) + 255) // 256 * 256 + 256
        return address

    def locate(self, address: int, count: int) -> tuple[bytearray, int] | None:
        """(buffer, offset) when [address, address+count) lies inside one allocation."""
        for base, buffer in self.allocations.items():
            if base <= address and address + count <= base + len(buffer):
                return buffer, address - base
        return None

    def is_device(self, address: int) -> bool:
        return any(base <= address < base + len(b) for base, b in self.allocations.items())

    def read(self, address: int, count: int) -> bytes:
        found = self.locate(address, count)
        if found is None:
            raise ValueError(f"device read of {count} bytes at {address:#x} outside allocations")
        buffer, offset = found
        return bytes(buffer[offset : offset + count])

    def write(self, address: int, data: bytes) -> None:
        found = self.locate(address, len(data))
        if found is None:
            raise ValueError(
                f"device write of {len(data)} bytes at {address:#x} outside allocations"
            )
        buffer, offset = found
        buffer[offset : offset + len(data)] = data


_HANDLES = itertools.count(0x5000, 16)


class _Handle:
    """cudaStream_t / cudaEvent_t: opaque handles that `int()` turns into an address (unique
    across both kinds, as real handles are)."""

    def __init__(self) -> None:
        self._address = next(_HANDLES)
        self._time: float | None = None

    def __int__(self) -> int:
        return self._address

    def getPtr(self) -> int:
        return self._address


def cuda_runtime_module(gpu: FakeGpu, version: str = "13.4.4") -> types.ModuleType:
    """A `cuda.bindings.runtime` stand-in for `gpu`, holding only names cuda-bindings `version`
    defines. Raises KeyError when a function below is absent from that version (checked by a
    test against the recorded names)."""
    names = cuda_names(version)
    error = enum.IntEnum("cudaError_t", {n: i for i, n in enumerate(names["enums"]["cudaError_t"])})
    kinds = ["cudaMemcpyHostToHost", "cudaMemcpyHostToDevice", "cudaMemcpyDeviceToHost"]
    kinds += ["cudaMemcpyDeviceToDevice", "cudaMemcpyDefault"]
    kind = enum.IntEnum("cudaMemcpyKind", {n: i for i, n in enumerate(kinds)})
    ok, invalid = error.cudaSuccess, error.cudaErrorInvalidValue
    stream_type = type("cudaStream_t", (_Handle,), {})
    event_type = type("cudaEvent_t", (_Handle,), {})
    live: set[int] = set()
    needs_r580 = int(version.split(".")[0]) >= 13

    def guard(*results: Any) -> tuple[Any, ...]:
        if needs_r580 and not gpu.driver_ok:
            return (error.cudaErrorInsufficientDriver, *[None] * (len(results) - 1))
        return results

    def cudaMalloc(size):
        address = gpu.allocate(int(size))
        return guard(ok, address) if address is not None else (error.cudaErrorMemoryAllocation, 0)

    def cudaFree(devPtr):
        if int(devPtr) not in gpu.allocations:
            return guard(invalid)
        del gpu.allocations[int(devPtr)]
        return guard(ok)

    def cudaMemcpyAsync(dst, src, count, kind, stream):
        if int(stream) not in live:
            return guard(error.cudaErrorInvalidResourceHandle)
        return cudaMemcpy(dst, src, count, kind)

    def cudaMemcpy(dst, src, count, kind):
        dst, src, count = int(dst), int(src), int(count)
        if kind == kind_enum.cudaMemcpyHostToDevice and not gpu.is_device(src):
            if gpu.locate(dst, count) is None:
                return guard(invalid)
            gpu.write(dst, ctypes.string_at(src, count))
        elif kind == kind_enum.cudaMemcpyDeviceToHost and not gpu.is_device(dst):
            if gpu.locate(src, count) is None:
                return guard(invalid)
            data = gpu.read(src, count)
            ctypes.memmove(dst, data, count)
        elif kind == kind_enum.cudaMemcpyDeviceToDevice:
            if gpu.locate(src, count) is None or gpu.locate(dst, count) is None:
                return guard(invalid)
            gpu.write(dst, gpu.read(src, count))
        else:  # host<->host, or a side that does not live where `kind` says
            return guard(invalid)
        return guard(ok)

    kind_enum = kind

    def cudaStreamCreate():
        stream = stream_type()
        live.add(int(stream))
        return guard(ok, stream)

    def cudaStreamDestroy(stream):
        if int(stream) not in live:
            return guard(error.cudaErrorInvalidResourceHandle)
        live.discard(int(stream))
        return guard(ok)

    def cudaStreamSynchronize(stream):
        return guard(ok if int(stream) in live else error.cudaErrorInvalidResourceHandle)

    def cudaEventCreate():
        event = event_type()
        live.add(int(event))
        return guard(ok, event)

    def cudaEventDestroy(event):
        live.discard(int(event))
        return guard(ok)

    def cudaEventRecord(event, stream):
        if int(event) not in live or int(stream) not in live:
            return guard(error.cudaErrorInvalidResourceHandle)
        event._time = time.perf_counter()
        return guard(ok)

    def cudaEventSynchronize(event):
        return guard(ok)

    def cudaEventElapsedTime(start, end):
        if start._time is None or end._time is None:
            return guard(error.cudaErrorInvalidResourceHandle, 0.0)
        return guard(ok, (end._time - start._time) * 1000.0)

    def cudaMemGetInfo():
        return guard(ok, gpu.total_bytes - gpu.used_bytes, gpu.total_bytes)

    def cudaGetDeviceCount():
        return guard(ok, 1)

    def cudaGetErrorString(error):
        return (ok, f"{error.name}".encode())

    def cudaDeviceSynchronize():
        return guard(ok)

    functions = {
        name: value
        for name, value in locals().items()
        if name.startswith("cuda") and callable(value)
    }
    module = types.ModuleType("cuda.bindings.runtime")
    for name, function in functions.items():
        if name not in names["functions"]:
            raise KeyError(f"cuda-bindings {version} has no {name}")
        function.__name__ = name
        setattr(module, name, function)
    module.cudaError_t = error
    module.cudaMemcpyKind = kind
    module.cudaStream_t = stream_type
    module.cudaEvent_t = event_type
    module.__standin_gpu__ = gpu
    return module
