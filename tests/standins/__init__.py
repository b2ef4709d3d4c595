"""Strict stand-ins for what cannot exist on the development machines: TensorRT and a GPU.

`gpu_standins(trt_version, cuda_version)` gives a fake GPU, a `tensorrt` module and a
`cuda.bindings.runtime` module that share it; `install(monkeypatch)` puts both where
`import tensorrt` and `from cuda.bindings import runtime` find them.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from dataclasses import dataclass
from typing import Any

from .cuda_runtime import FakeGpu, cuda_runtime_module
from .tensorrt_api import tensorrt_module

TRT_VERSIONS = ("10.16", "11.1")
CUDA_VERSIONS = ("12.9.10", "13.4.4")


@dataclass
class GpuStandins:
    gpu: FakeGpu
    tensorrt: types.ModuleType
    cudart: types.ModuleType

    def install(self, monkeypatch: Any) -> None:
        """Make `import tensorrt` and `cuda.bindings.runtime` resolve to the stand-ins."""
        cuda = types.ModuleType("cuda")
        bindings = types.ModuleType("cuda.bindings")
        for module in (cuda, bindings, self.cudart):
            module.__spec__ = importlib.machinery.ModuleSpec(module.__name__, None)
        cuda.bindings = bindings  # type: ignore[attr-defined]
        bindings.runtime = self.cudart  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "tensorrt", self.tensorrt)
        monkeypatch.setitem(sys.modules, "cuda", cuda)
        monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
        monkeypatch.setitem(sys.modules, "cuda.bindings.runtime", self.cudart)

    @property
    def messages(self) -> list[tuple[int, str]]:
        """What the stand-in TensorRT logged: (severity, message)."""
        return self.tensorrt.__standin__.messages


def gpu_standins(
    trt_version: str = "11.1", cuda_version: str = "13.4.4", **gpu: Any
) -> GpuStandins:
    fake = FakeGpu(**gpu)
    return GpuStandins(
        fake, tensorrt_module(trt_version, fake), cuda_runtime_module(fake, cuda_version)
    )
