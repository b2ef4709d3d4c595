"""Installed libraries: versions from package metadata, and what ONNX Runtime and TensorRT offer."""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import importlib.util
import io
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

# Distributions whose versions every result and manifest records.
LIBRARIES = (
    "trtconv",
    "tensorflow",
    "keras",
    "numpy",
    "onnx",
    "tf2onnx",
    "onnxruntime",
    "onnxruntime-gpu",
    "tensorrt",
)
GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")
ORT_PROVIDER_LIBRARIES = {
    "CUDAExecutionProvider": "libonnxruntime_providers_cuda.so",
    "TensorrtExecutionProvider": "libonnxruntime_providers_tensorrt.so",
}


def dist_version(name: str) -> str | None:
    """The installed version of distribution `name` (no import), or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def package_version(package: str) -> str | None:
    """The version of whichever distribution installed the import package `package` (no
    import), or None: `tensorflow` comes as tensorflow, tensorflow-cpu, tf-nightly or a vendor's
    build, and the one installed is the one that runs."""
    found = dist_version(package)
    if found is not None:
        return found
    for name in metadata.packages_distributions().get(package, ()):
        found = dist_version(name)
        if found is not None:
            return found
    return None


def tf_keras_install() -> str:
    """How to install the tf_keras that goes with this TensorFlow: tf-keras X.Y requires
    `tensorflow` X.Y by that name, so beside tensorflow-cpu (or another build) without its
    dependencies."""
    version = package_version("tensorflow")
    if version is None:
        return "pip install tf-keras (with the TensorFlow of the same minor version)"
    major, minor = version_tuple(version)[:2]
    beside = "" if dist_version("tensorflow") else " --no-deps"
    return f"pip install 'tf-keras=={major}.{minor}.*'{beside}"


def library_versions(packages: Iterable[str] = ()) -> dict[str, str | None]:
    """Installed versions, read from package metadata without importing: LIBRARIES (TensorFlow's
    under whichever distribution installed it) and `packages` (the distributions the registered
    backends declare, given by the caller)."""
    names = dict.fromkeys((*LIBRARIES, *packages))
    return {
        name: (package_version if name == "tensorflow" else dist_version)(name) for name in names
    }


def version_tuple(version: str) -> tuple[int, ...]:
    """'10.3.0.post1' -> (10, 3, 0): the first three numeric parts."""
    parts = []
    for part in version.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


@dataclass(frozen=True)
class ModuleFacts:
    """An importable Python module: its version, or None and why it cannot be used."""

    version: str | None
    reason: str = ""


@dataclass(frozen=True)
class OnnxRuntimeFacts:
    """ONNX Runtime: version, providers compiled in, and those that can really run here."""

    version: str | None
    available_providers: tuple[str, ...] = ()
    providers: tuple[str, ...] = ()
    reason: str = ""

    @property
    def gpu_providers(self) -> tuple[str, ...]:
        """The usable providers that run on a GPU (CUDA, TensorRT)."""
        return tuple(p for p in self.providers if p in GPU_PROVIDERS)


def probe_tensorrt_module() -> ModuleFacts:
    """The `tensorrt` Python module's version, or None and why it cannot be imported."""
    if importlib.util.find_spec("tensorrt") is None:
        return ModuleFacts(None, "the tensorrt Python module is not installed")
    try:
        module = importlib.import_module("tensorrt")
    except Exception as exc:  # the PyPI stubs and broken installs fail in many ways
        return ModuleFacts(None, f"import tensorrt failed ({type(exc).__name__}: {exc})")
    return ModuleFacts(str(getattr(module, "__version__", "0")))


def probe_onnxruntime(has_gpu: bool) -> OnnxRuntimeFacts:
    """ORT version, compiled-in providers, providers that can really run, and notes.

    onnxruntime-gpu lists CUDA/TensorRT providers even when their libraries cannot load and then
    silently runs on the CPU, so a GPU provider counts only with a GPU and a loadable library.
    """
    try:
        ort = importlib.import_module("onnxruntime")
        available = tuple(ort.get_available_providers())
    except Exception as exc:
        return OnnxRuntimeFacts(
            None, reason=f"onnxruntime is not importable ({type(exc).__name__}: {exc})"
        )
    usable, notes = [], []
    if has_gpu and any(p in GPU_PROVIDERS for p in available):
        preload_cuda_libraries(ort)
    capi = Path(str(ort.__file__)).parent / "capi"
    for provider in available:
        problem = _provider_problem(provider, has_gpu, capi)
        if problem:
            notes.append(f"{provider} is listed but cannot run: {problem}")
        else:
            usable.append(provider)
    return OnnxRuntimeFacts(str(ort.__version__), available, tuple(usable), "; ".join(notes))


def preload_cuda_libraries(ort: ModuleType) -> None:
    """Load CUDA and cuDNN from NVIDIA's wheels (onnxruntime-gpu's `cuda`/`cudnn` extras), which
    ONNX Runtime 1.21+ finds only when asked: `preload_dlls()`. Its notes go to the debug log,
    not stdout (a --json command's)."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said):
            preload()
    except Exception as exc:  # missing libraries show when the provider is loaded
        log.debug("onnxruntime.preload_dlls failed: %s", exc)
    if said.getvalue().strip():
        log.debug("onnxruntime.preload_dlls: %s", said.getvalue().strip())


def _provider_problem(provider: str, has_gpu: bool, capi: Path) -> str:
    """Why a listed provider cannot run here ("" when it can)."""
    if provider not in GPU_PROVIDERS:
        return ""
    if not has_gpu:
        return "no NVIDIA GPU is visible"
    library = ORT_PROVIDER_LIBRARIES[provider]
    try:
        ctypes.CDLL(str(capi / "libonnxruntime_providers_shared.so"), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(capi / library))
    except OSError as exc:
        return f"{library} cannot be loaded ({str(exc).split(': ', 1)[-1]})"
    return ""
