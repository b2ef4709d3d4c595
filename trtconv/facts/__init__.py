"""Facts about a machine, gathered once into a frozen value; the rules that read them live with
each backend (`trtconv.backends.<name>.rules`).

`probe()` describes this machine: CPU and GPUs, library versions, TensorFlow's build and TensorRT
linkage, ONNX Runtime's usable providers, the `tensorrt` module. It never imports TensorFlow into
this process (see `facts.tensorflow`). `described()` builds the same value for a machine that is
not this one (tests, or judging an artifact for another machine).
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from trtconv.facts.hardware import (
    CPU_FEATURES,
    Cpu,
    Gpu,
    cpu_from_flags,
    probe_cpu,
    probe_gpus,
)
from trtconv.facts.libraries import (
    ModuleFacts,
    OnnxRuntimeFacts,
    dist_version,
    library_versions,
    probe_onnxruntime,
    probe_tensorrt_module,
    version_tuple,
)
from trtconv.facts.tensorflow import (
    TFTRT_LINKED_TENSORRT,
    TensorFlowFacts,
    TfTrtReport,
    probe_tensorflow,
)

__all__ = [
    "CPU_FEATURES",
    "Cpu",
    "Facts",
    "Gpu",
    "ModuleFacts",
    "OnnxRuntimeFacts",
    "TensorFlowFacts",
    "TfTrtReport",
    "described",
    "dist_version",
    "library_versions",
    "probe",
    "probe_cpu",
    "probe_gpus",
    "version_tuple",
]


@dataclass(frozen=True)
class Facts:
    """One machine: its devices and what its libraries can do. Rules read it; nothing probes it
    twice."""

    python: str
    cpu: Cpu
    gpus: tuple[Gpu, ...]
    libraries: Mapping[str, str | None]  # distribution -> version (None: not installed)
    tensorflow: TensorFlowFacts
    onnxruntime: OnnxRuntimeFacts
    tensorrt: ModuleFacts  # the `tensorrt` Python module

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def best_gpu(self) -> Gpu | None:
        """The GPU with the highest compute capability (the one precision checks use)."""
        return max(self.gpus, key=lambda gpu: gpu.compute_capability, default=None)

    def version(self, distribution: str) -> str | None:
        """The installed version of `distribution`, or None."""
        return self.libraries.get(distribution)


@functools.cache
def probe(deep: bool = False, packages: tuple[str, ...] = ()) -> Facts:
    """This machine's facts, gathered once per process (cached). Fast; never imports TensorFlow.

    `packages`: distributions whose versions to record beyond facts.libraries.LIBRARIES (the
    registry passes those its backends declare).

    TensorFlow is asked about TF-TRT in a subprocess (seconds) with `deep=True` (doctor), or when
    a GPU is visible and TensorFlow could load TensorRT (then the answer matters).
    """
    gpus = probe_gpus()
    versions = library_versions(packages)
    tensorflow = probe_tensorflow(versions["tensorflow"], ask=False)
    # With a GPU and a TensorRT build of TensorFlow, TensorFlow is asked even when our check of
    # the exact libnvinfer sonames failed: what TF-TRT really loads is TensorFlow's answer.
    could_load = tensorflow.libnvinfer_version or tensorflow.is_tensorrt_build
    if tensorflow.version is not None and (deep or (could_load and gpus)):
        tensorflow = probe_tensorflow(versions["tensorflow"], ask=True)
    return Facts(
        python=platform.python_version(),
        cpu=probe_cpu(),
        gpus=gpus,
        libraries=versions,
        tensorflow=tensorflow,
        onnxruntime=probe_onnxruntime(bool(gpus)),
        tensorrt=probe_tensorrt_module(),
    )


# What `described()` assumes unless told otherwise: this project's pinned libraries.
DESCRIBED_LIBRARIES: Mapping[str, str | None] = {
    "tensorflow": "2.17.1",
    "keras": "3.6.0",
    "numpy": "1.26.4",
    "onnx": "1.18.0",
    "tf2onnx": "1.17.0",
    "onnxruntime": "1.20.1",
    "tensorrt": None,
}


def described(
    *,
    cpu: str = "a described x86-64 CPU",
    arch: str = "x86_64",
    cpu_features: Iterable[str] = ("avx2", "fma", "f16c"),
    cores: int = 2,
    gpus: Iterable[Gpu] = (),
    tftrt_tensorrt: str | None = None,
    tensorrt: str | None = None,
    ort_providers: Iterable[str] = ("CPUExecutionProvider",),
    libraries: Mapping[str, str | None] | None = None,
) -> Facts:
    """The facts of a machine described, not probed (nothing on this machine is asked).

    By default: an AVX2 CPU without VNNI or BF16, no GPU, the pinned TensorFlow CUDA build without
    the TensorRT libraries it loads, ONNX Runtime on the CPU, no `tensorrt`. `tftrt_tensorrt`
    is the TensorRT version TF-TRT loads (its libraries present), `tensorrt` the `tensorrt`
    module's version, `ort_providers` the ONNX Runtime providers that run.
    """
    gpu_list = tuple(gpus)
    versions = {**DESCRIBED_LIBRARIES, "tensorrt": tensorrt, **(libraries or {})}
    providers = tuple(ort_providers)
    return Facts(
        python=platform.python_version(),
        cpu=cpu_from_flags(cpu, arch, cores, cpu_features),
        gpus=gpu_list,
        libraries=versions,
        tensorflow=_described_tensorflow(versions["tensorflow"], tftrt_tensorrt, len(gpu_list)),
        onnxruntime=OnnxRuntimeFacts(versions.get("onnxruntime"), providers, providers),
        tensorrt=ModuleFacts(tensorrt, "" if tensorrt else "not installed (described machine)"),
    )


def _described_tensorflow(
    version: str | None, loads: str | None, gpu_count: int
) -> TensorFlowFacts:
    if version is None:
        return TensorFlowFacts(None, "TensorFlow is not installed (described machine)")
    missing = f"libnvinfer.so.{TFTRT_LINKED_TENSORRT} cannot be loaded (described machine)"
    report = TfTrtReport(loads is not None, TFTRT_LINKED_TENSORRT, loads, gpu_count)
    return TensorFlowFacts(
        version,
        is_cuda_build=True,
        is_tensorrt_build=True,
        cuda_version="12.3",
        cudnn_version="8",
        libnvinfer_version=loads,
        libnvinfer_reason="" if loads else missing,
        asked=report,
    )
