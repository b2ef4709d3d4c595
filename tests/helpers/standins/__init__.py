"""Strict stand-ins for what cannot exist on the development machines: TensorRT and a GPU.

`gpu_standins(trt_version, cuda_version)` gives a fake GPU, a `tensorrt` module and a
`cuda.bindings.runtime` module that share it; `install(monkeypatch)` puts both where
`import tensorrt` and `from cuda.bindings import runtime` find them.

The TensorRT names come from the real bindings wheels (`generate_names.py`, README.md here).
`SUPPORTED_TRT` are the versions generated: the floors of trtconv's extras (10.0 for `trt-cu12`,
10.13 for `trt`), the last 10, the first and the newest 11; trtconv's use of TensorRT is checked
against each (`test_used_names.py`). `TRT_VERSIONS`, the newest 10 and 11, drive the behaviour
tests.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from dataclasses import dataclass
from typing import Any

from .cuda_runtime import FakeGpu, cuda_runtime_module
from .tensorrt_api import tensorrt_module

SUPPORTED_TRT = ("10.0", "10.13", "10.16", "11.0", "11.4")
TRT_VERSIONS = ("10.16", "11.4")
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
    trt_version: str = "11.4", cuda_version: str = "13.4.4", **gpu: Any
) -> GpuStandins:
    fake = FakeGpu(**gpu)
    return GpuStandins(
        fake, tensorrt_module(trt_version, fake), cuda_runtime_module(fake, cuda_version)
    )


def gpu_machine(
    monkeypatch: Any, tmp_path: Any, version: str, cuda: str = "13.4.4", **gpu: Any
) -> GpuStandins:
    """This process as a GPU machine with the stand-in TensorRT `version` and cuda-python
    `cuda` (its runtime bindings' names): trtconv's facts probe sees them as it would the real
    ones. TensorFlow is not asked in a subprocess (it would see no GPU here, and take seconds).
    Call `trtconv.facts.probe.cache_clear()` after the test."""
    from trtconv import facts as facts_module

    standins = gpu_standins(version, cuda, **gpu)
    standins.install(monkeypatch)
    fake = standins.gpu
    h100 = facts_module.Gpu(fake.name, fake.compute_capability, fake.total_bytes / 2**20, "580")
    real_tensorflow = facts_module.probe_tensorflow
    monkeypatch.setattr(facts_module, "probe_gpus", lambda: (h100,))
    monkeypatch.setattr(facts_module, "probe_tensorflow", lambda v, ask: real_tensorflow(v, False))
    monkeypatch.setenv("TRTCONV_TRT_TIMING_CACHE_DIR", str(tmp_path / "timing"))
    facts_module.probe.cache_clear()
    return standins
