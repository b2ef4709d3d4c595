"""What this machine can convert and run: a fast probe that never aborts the process.

The probe avoids importing TensorFlow in this process. TensorFlow 2.17.1's
`get_loaded_tensorrt_version()` aborts the interpreter when libnvinfer is absent, and TF-TRT's own
error ("not built with TensorRT support") hides the real cause. So we read TensorFlow's build info
from its source file, test the TensorRT libraries with `ctypes` (the same sonames TensorFlow
dlopens), and only ask TensorFlow itself, in a subprocess, when everything else says TF-TRT could
work (or when `doctor` asks for the deep report).
"""

from __future__ import annotations

import ast
import ctypes
import functools
import importlib
import importlib.util
import json
import logging
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from trtconv.environment import cpu_info, nvidia_gpus
from trtconv.errors import MissingDependencyError, UsageError

log = logging.getLogger(__name__)

BACKENDS = ("tftrt", "trt", "ort")
PRECISIONS = ("fp32", "tf32", "fp16", "int8")

# The TensorRT TensorFlow 2.17 was linked against; TF dlopens exactly these sonames (seen with
# TF_CPP_MIN_LOG_LEVEL=0). The deep probe reads the real value from get_linked_tensorrt_version().
TFTRT_LINKED_TENSORRT = "8.6.1"
TFTRT_LIBRARIES = (
    f"libnvinfer.so.{TFTRT_LINKED_TENSORRT}",
    f"libnvinfer_plugin.so.{TFTRT_LINKED_TENSORRT}",
)
TRT_MIN_MAJOR = 10
# Calibrator ("implicit") INT8, which TF-TRT uses, exists from TensorRT 8.6 up to 10.x only.
CALIBRATOR_INT8_RANGE = ((8, 6), (11, 0))

# Lowest compute capability per precision on TensorRT (tf32: Ampere tensor cores; fp16: fast
# half-precision arithmetic; int8: DP4A). None: any supported GPU.
MIN_COMPUTE_CAPABILITY: dict[str, tuple[int, int] | None] = {
    "fp32": None,
    "tf32": (8, 0),
    "fp16": (5, 3),
    "int8": (6, 1),
}
GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")
ORT_PROVIDER_LIBRARIES = {
    "CUDAExecutionProvider": "libonnxruntime_providers_cuda.so",
    "TensorrtExecutionProvider": "libonnxruntime_providers_tensorrt.so",
}

TFTRT_FIX = (
    "use the TensorFlow 2.17 CUDA build (pip install 'tensorflow[and-cuda]==2.17.*') with the "
    "TensorRT 8.6 libraries (libnvinfer.so.8.6.1, libnvinfer_plugin.so.8.6.1) on "
    "LD_LIBRARY_PATH on a machine with an NVIDIA GPU, or run in an NGC TensorFlow container "
    "(nvcr.io/nvidia/tensorflow)"
)
TRT_FIX = (
    "pip install 'trtconv[trt]' (TensorRT >= 10 from NVIDIA's package index) on a machine with "
    "an NVIDIA GPU and driver"
)
GPU_FIX = "run on a machine with an NVIDIA GPU and driver (nvidia-smi must list it)"
AMPERE_FIX = (
    "run on an Ampere-or-newer GPU (compute capability >= 8.0: A100, A10, L4, H100, RTX 30xx+) "
    "or choose --precision fp32 or fp16"
)
ORT_GPU_FIX = (
    "pip install 'trtconv[gpu]' (onnxruntime-gpu) with CUDA 12 and cuDNN 9 libraries on a "
    "machine with an NVIDIA GPU, choose --backend tftrt or trt on a GPU, or use --precision fp32 "
    "or int8 on the CPU"
)
EXPORT_FIX = "pip install onnx==1.18.0 tf2onnx==1.17.0"


@dataclass(frozen=True)
class Gpu:
    """One NVIDIA GPU as nvidia-smi reports it."""

    name: str
    compute_capability: tuple[int, int]
    memory_mb: float = 0.0
    driver: str = ""

    @property
    def capability(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"

    def supports(self, precision: str) -> bool:
        """True when this GPU's compute capability is high enough for `precision`."""
        need = MIN_COMPUTE_CAPABILITY[precision]
        return need is None or self.compute_capability >= need

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "compute_capability": self.capability,
            "memory_mb": self.memory_mb,
            "driver": self.driver,
            "tf32": self.supports("tf32"),
            "fp16": self.supports("fp16"),
            "int8": self.supports("int8"),
        }


@dataclass(frozen=True)
class Capabilities:
    """Facts about this machine's libraries and devices that decide what can be converted."""

    python: str
    cpu: dict[str, Any]
    gpus: list[Gpu]
    tf_version: str | None
    tf_reason: str
    tf_is_cuda_build: bool
    tf_is_tensorrt_build: bool
    tf_cuda_version: str | None
    tf_cudnn_version: str | None
    libnvinfer_version: str | None  # the TensorRT library TF-TRT would load, via ctypes
    libnvinfer_reason: str
    tftrt_usable: bool
    tftrt_reason: str
    tensorrt_version: str | None  # the `tensorrt` Python module
    tensorrt_reason: str
    onnx_version: str | None
    tf2onnx_version: str | None
    ort_version: str | None
    ort_providers: list[str]  # providers that can really run here (honest)
    ort_available_providers: list[str] = field(default_factory=list)  # compiled into the wheel
    ort_reason: str = ""
    # Filled by the deep probe (TensorFlow asked in a subprocess); None when not asked.
    tftrt_linked_version: str | None = None
    tftrt_loaded_version: str | None = None
    tf_gpu_count: int | None = None
    deep: bool = False

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def best_gpu(self) -> Gpu | None:
        """The GPU with the highest compute capability (the one precision checks use)."""
        return max(self.gpus, key=lambda gpu: gpu.compute_capability, default=None)

    @property
    def trt_usable(self) -> bool:
        return (
            self.tensorrt_version is not None
            and _major(self.tensorrt_version) >= TRT_MIN_MAJOR
            and self.has_gpu
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = [gpu.to_dict() for gpu in self.gpus]
        data["trt_usable"] = self.trt_usable
        return data


@dataclass(frozen=True)
class Support:
    """Whether one backend can convert at one precision here, and if not, why and the fix."""

    backend: str
    precision: str
    ok: bool
    reason: str
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------------
# Probing


@functools.cache
def probe(deep: bool = False) -> Capabilities:
    """Probe this machine once (cached). Fast; never imports TensorFlow into this process.

    `deep=True` (used by `doctor`) also asks TensorFlow in a subprocess for its linked and loaded
    TensorRT versions; the plain probe does so only when the cheap checks say TF-TRT could run.
    """
    gpus = _gpus()
    tf = _tensorflow_build()
    nvinfer_version, nvinfer_reason = _libnvinfer()
    tensorrt_version, tensorrt_reason = _tensorrt_module()
    ort_version, available, usable, ort_reason = _onnxruntime(bool(gpus))
    problems = _tftrt_problems(tf, nvinfer_reason, gpus)
    ask_tf = tf["version"] is not None and (deep or not problems)
    report = tf_trt_subprocess_probe() if ask_tf else {}
    if report:
        # Keep only what TensorFlow adds to the cheap checks' reasons (no repeats).
        problems += [
            p
            for p in _tftrt_runtime_problems(report)
            if not (p.startswith("TF-TRT cannot load") and nvinfer_reason)
            and not (p.startswith("TensorFlow sees no GPU") and not gpus)
        ]
    if problems:
        tftrt_reason = "; ".join(problems)
    else:
        loaded = _version_text(report.get("loaded")) or nvinfer_version
        tftrt_reason = (
            f"TensorFlow {tf['version']} loads TensorRT {loaded} and sees "
            f"{report.get('gpus', len(gpus))} GPU(s)"
        )
    return Capabilities(
        python=platform.python_version(),
        cpu=cpu_info(),
        gpus=gpus,
        tf_version=tf["version"],
        tf_reason=tf["reason"],
        tf_is_cuda_build=bool(tf["is_cuda_build"]),
        tf_is_tensorrt_build=bool(tf["is_tensorrt_build"]),
        tf_cuda_version=tf["cuda_version"],
        tf_cudnn_version=tf["cudnn_version"],
        libnvinfer_version=nvinfer_version,
        libnvinfer_reason=nvinfer_reason,
        tftrt_usable=not problems,
        tftrt_reason=tftrt_reason,
        tensorrt_version=tensorrt_version,
        tensorrt_reason=tensorrt_reason,
        onnx_version=_dist_version("onnx"),
        tf2onnx_version=_dist_version("tf2onnx"),
        ort_version=ort_version,
        ort_providers=usable,
        ort_available_providers=available,
        ort_reason=ort_reason,
        tftrt_linked_version=_version_text(report.get("linked")),
        tftrt_loaded_version=_version_text(report.get("loaded")),
        tf_gpu_count=report.get("gpus"),
        deep=bool(report),
    )


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _major(version: str) -> int:
    try:
        return int(version.split(".")[0])
    except ValueError:
        return 0


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for part in version.split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _version_text(value: Any) -> str | None:
    if not value:
        return None
    return ".".join(str(part) for part in value)


def _gpus() -> list[Gpu]:
    gpus = []
    for row in nvidia_gpus():
        major, _, minor = str(row.get("compute_capability", "0.0")).partition(".")
        try:
            capability = (int(major), int(minor or 0))
        except ValueError:
            capability = (0, 0)
        gpus.append(Gpu(row["name"], capability, row.get("memory_mb", 0.0), row.get("driver", "")))
    return gpus


def _tensorflow_build() -> dict[str, Any]:
    """TensorFlow's version and build info read from its files, without importing it."""
    info: dict[str, Any] = {
        "version": _dist_version("tensorflow"),
        "reason": "",
        "is_cuda_build": False,
        "is_tensorrt_build": False,
        "cuda_version": None,
        "cudnn_version": None,
    }
    if info["version"] is None:
        info["reason"] = "TensorFlow is not installed (pip install 'tensorflow==2.17.*')"
        return info
    try:
        build = read_tf_build_info()
    except (OSError, ValueError, SyntaxError) as exc:
        info["reason"] = f"TensorFlow's build info could not be read ({exc})"
        return info
    info.update(
        is_cuda_build=bool(build.get("is_cuda_build")),
        is_tensorrt_build=bool(build.get("is_tensorrt_build")),
        cuda_version=build.get("cuda_version"),
        cudnn_version=build.get("cudnn_version"),
    )
    return info


def read_tf_build_info() -> dict[str, Any]:
    """`tf.sysconfig.get_build_info()` without importing TensorFlow (it is a literal in a file).

    Raises OSError when TensorFlow's files are not found and ValueError when the file changed.
    """
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        raise OSError("tensorflow package not found")
    path = Path(next(iter(spec.submodule_search_locations))) / "python/platform/build_info.py"
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "build_info" for t in node.targets)
            and isinstance(node.value, ast.Call)
            and node.value.args
        ):
            return dict(ast.literal_eval(node.value.args[0]))
    raise ValueError(f"no build_info literal in {path}")


def decode_tensorrt_version(number: int) -> str:
    """`getInferLibVersion()` as text: 8601 -> 8.6.1 (TensorRT 8), 100300 -> 10.3.0 (10+)."""
    if number >= 100000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def _libnvinfer() -> tuple[str | None, str]:
    """Load the TensorRT libraries TF-TRT needs with ctypes; (version, "") or (None, dlerror)."""
    library = None
    for name in TFTRT_LIBRARIES:
        try:
            loaded = ctypes.CDLL(name)
        except OSError as exc:
            # dlerror repeats the name: "libnvinfer.so.8.6.1: cannot open shared object file..."
            detail = str(exc).removeprefix(f"{name}: ")
            return None, f"{name} cannot be loaded ({detail})"
        library = library or loaded
    try:
        library.getInferLibVersion.restype = ctypes.c_int  # type: ignore[union-attr]
        return decode_tensorrt_version(int(library.getInferLibVersion())), ""  # type: ignore[union-attr]
    except AttributeError:
        return TFTRT_LINKED_TENSORRT, ""


def _tensorrt_module() -> tuple[str | None, str]:
    """The `tensorrt` Python module's version, or None and why it is unusable."""
    if importlib.util.find_spec("tensorrt") is None:
        return None, "the tensorrt Python module is not installed"
    try:
        module = importlib.import_module("tensorrt")
    except Exception as exc:  # the PyPI stubs and broken installs fail in many ways
        return None, f"import tensorrt failed ({type(exc).__name__}: {exc})"
    version = str(getattr(module, "__version__", "0"))
    if _major(version) < TRT_MIN_MAJOR:
        return version, f"TensorRT {version} is older than {TRT_MIN_MAJOR}"
    return version, ""


def _onnxruntime(has_gpu: bool) -> tuple[str | None, list[str], list[str], str]:
    """ORT version, compiled-in providers, providers that can really run, and notes.

    onnxruntime-gpu lists CUDA/TensorRT providers even when their libraries cannot load and then
    silently runs on the CPU, so a GPU provider counts only with a GPU and a loadable library.
    """
    try:
        ort = importlib.import_module("onnxruntime")
        available = list(ort.get_available_providers())
    except Exception as exc:
        return None, [], [], f"onnxruntime is not importable ({type(exc).__name__}: {exc})"
    usable, notes = [], []
    capi = Path(str(ort.__file__)).parent / "capi"
    for provider in available:
        if provider not in GPU_PROVIDERS:
            usable.append(provider)
            continue
        problem = "no NVIDIA GPU is visible" if not has_gpu else ""
        if not problem:
            problem = _provider_library_problem(capi, ORT_PROVIDER_LIBRARIES[provider])
        if problem:
            notes.append(f"{provider} is listed but cannot run: {problem}")
        else:
            usable.append(provider)
    return str(ort.__version__), available, usable, "; ".join(notes)


def _provider_library_problem(capi: Path, library: str) -> str:
    try:
        ctypes.CDLL(str(capi / "libonnxruntime_providers_shared.so"), mode=ctypes.RTLD_GLOBAL)
        ctypes.CDLL(str(capi / library))
    except OSError as exc:
        return f"{library} cannot be loaded ({str(exc).split(': ', 1)[-1]})"
    return ""


def _tftrt_problems(tf: dict[str, Any], nvinfer_reason: str, gpus: list[Gpu]) -> list[str]:
    """Why TF-TRT cannot run, from the cheap checks alone ([] when it might)."""
    if tf["version"] is None:
        return [tf["reason"]]
    problems = []
    if tf["reason"]:
        problems.append(tf["reason"])
    elif not tf["is_tensorrt_build"]:
        problems.append(
            f"TensorFlow {tf['version']} was built without TensorRT (is_tensorrt_build=False)"
        )
    elif _version_tuple(tf["version"]) >= (2, 18):
        problems.append(f"TensorFlow {tf['version']} no longer ships TF-TRT (2.17 is the last)")
    if nvinfer_reason:
        problems.append(f"TensorFlow's TensorRT libraries are missing: {nvinfer_reason}")
    if not gpus:
        problems.append("no NVIDIA GPU is visible (nvidia-smi lists none)")
    return problems


def _tftrt_runtime_problems(report: dict[str, Any]) -> list[str]:
    """Why TF-TRT cannot run, from what TensorFlow itself said in the subprocess probe."""
    if "error" in report:
        return [f"TensorFlow's TF-TRT probe failed: {report['error']}"]
    problems = []
    if not report.get("enabled"):
        cause = "; ".join(report.get("cause", [])) or "TensorFlow could not load TensorRT"
        problems.append(f"TF-TRT cannot load TensorRT: {cause}")
    if report.get("gpus") == 0:
        cause = "; ".join(report.get("gpu_cause", []))
        problems.append("TensorFlow sees no GPU" + (f" ({cause})" if cause else ""))
    return problems


# Runs in a fresh interpreter: get_loaded_tensorrt_version() may abort it, and that is fine there.
_TF_PROBE = """
import json
report = {}
try:
    import tensorflow as tf
    from tensorflow.compiler.tf2tensorrt import _pywrap_py_utils as utils
    report["enabled"] = bool(utils.is_tensorrt_enabled())
    report["linked"] = list(utils.get_linked_tensorrt_version())
    if report["enabled"]:
        report["loaded"] = list(utils.get_loaded_tensorrt_version())
    report["gpus"] = len(tf.config.list_physical_devices("GPU"))
except Exception as exc:
    report["error"] = f"{type(exc).__name__}: {exc}"
print("TRTCONV_PROBE " + json.dumps(report), flush=True)
"""


def tf_trt_subprocess_probe(timeout: float = 120.0) -> dict[str, Any]:
    """Ask TensorFlow, in a subprocess, whether TF-TRT loads; keeps the real cause from stderr.

    Returns {"enabled", "linked", "loaded", "gpus", "cause", "gpu_cause"} or {"error": ...};
    never raises and never aborts this process.
    """
    # The dso_loader's dlerror lines are VLOG(1) messages: visible only with both settings.
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_MAX_VLOG_LEVEL="1")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _TF_PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": f"could not run the probe ({exc})"}
    report: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        if line.startswith("TRTCONV_PROBE "):
            report = json.loads(line.removeprefix("TRTCONV_PROBE "))
    if not report:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return {"error": f"TensorFlow exited with code {done.returncode} ({tail[0][:300]})"}
    report["cause"] = _stderr_causes(done.stderr, ("nvinfer",))
    report["gpu_cause"] = _stderr_causes(done.stderr, ("libcud", "cuInit", "GPU libraries"))
    return report


def _stderr_causes(stderr: str, needles: tuple[str, ...]) -> list[str]:
    """The distinct 'Could not load dynamic library ...' style messages mentioning a needle."""
    causes: list[str] = []
    for line in stderr.splitlines():
        if not any(needle in line for needle in needles):
            continue
        message = line.split("] ", 1)[-1].strip()
        failed = any(word in message for word in ("Could not", "Cannot", "failed call"))
        if failed and message not in causes:
            causes.append(message)
    return causes[:4]


# --------------------------------------------------------------------------------------------
# Decisions


def support(backend: str, precision: str, caps: Capabilities | None = None) -> Support:
    """Whether `backend` can convert and run at `precision` on this machine, with reason and fix.

    Raises UsageError for an unknown backend or precision.
    """
    if backend not in BACKENDS:
        raise UsageError(f"Unknown backend '{backend}'; choose one of {', '.join(BACKENDS)}.")
    if precision not in PRECISIONS:
        raise UsageError(f"Unknown precision '{precision}'; choose one of {', '.join(PRECISIONS)}.")
    caps = caps or probe()
    check = {"tftrt": _tftrt_support, "trt": _trt_support, "ort": _ort_support}[backend]
    reason, fix = check(precision, caps)
    if fix:
        return Support(backend, precision, False, reason, fix)
    return Support(backend, precision, True, reason)


def check_supported(backend: str, precision: str, caps: Capabilities | None = None) -> None:
    """Raise MissingDependencyError (exit 3) naming the reason and the fix when `backend` cannot
    convert at `precision` here. Never downgrades silently."""
    verdict = support(backend, precision, caps)
    if not verdict.ok:
        raise MissingDependencyError(
            f"--backend {backend} --precision {precision} cannot run on this machine: "
            f"{verdict.reason}; fix: {verdict.fix}."
        )


def choose_backend(precision: str, caps: Capabilities | None = None) -> tuple[str, str]:
    """(backend, reason) for `--backend auto`: tftrt, then trt, then ort, the first that can
    convert at `precision` here.

    When none can, returns the first backend whose libraries are present so that
    check_supported() then reports the precision problem (exit 3) instead of a silent downgrade.
    """
    caps = caps or probe()
    refusals: list[str] = []
    for backend in BACKENDS:
        verdict = support(backend, precision, caps)
        if verdict.ok:
            why = f"{verdict.reason}"
            if refusals:
                why += f"; not {', '.join(refusals)}"
            return backend, why
        refusals.append(f"{backend} ({verdict.reason})")
    fallback = "tftrt" if caps.tftrt_usable else "trt" if caps.trt_usable else "ort"
    return fallback, f"no backend can run {precision} here: {', '.join(refusals)}"


def _precision_on_gpu(precision: str, caps: Capabilities) -> tuple[str, str] | None:
    """(reason, fix) when the best GPU's compute capability is too low for `precision`."""
    gpu = caps.best_gpu
    need = MIN_COMPUTE_CAPABILITY[precision]
    if gpu is None or gpu.supports(precision) or need is None:
        return None
    fix = AMPERE_FIX if precision == "tf32" else "run on a newer GPU or choose --precision fp32"
    return (
        f"{precision} needs a GPU of compute capability >= {need[0]}.{need[1]}, "
        f"found {gpu.name} ({gpu.capability})",
        fix,
    )


def _tftrt_support(precision: str, caps: Capabilities) -> tuple[str, str]:
    if not caps.tftrt_usable:
        return caps.tftrt_reason, TFTRT_FIX
    too_old = _precision_on_gpu(precision, caps)
    if too_old:
        return too_old
    loaded = caps.tftrt_loaded_version or caps.libnvinfer_version or TFTRT_LINKED_TENSORRT
    if precision == "int8":
        low, high = CALIBRATOR_INT8_RANGE
        if not low <= _version_tuple(loaded)[:2] < high:
            return (
                f"TF-TRT INT8 uses calibration (implicit INT8), which needs TensorRT 8.6-10, "
                f"found {loaded}",
                "use TensorRT 8.6 libraries, or --backend trt / ort (explicit Q/DQ INT8)",
            )
    return f"TF-TRT with TensorRT {loaded} on {_gpu_text(caps)}", ""


def _trt_support(precision: str, caps: Capabilities) -> tuple[str, str]:
    no_gpu = "no NVIDIA GPU is visible (nvidia-smi lists none)"
    if caps.tensorrt_version is None or _major(caps.tensorrt_version) < TRT_MIN_MAJOR:
        reason = caps.tensorrt_reason or "TensorRT >= 10 is not importable"
        return (reason if caps.has_gpu else f"{reason}, and {no_gpu}"), TRT_FIX
    if not caps.has_gpu:
        return f"{no_gpu}; TensorRT needs one", GPU_FIX
    if caps.tf2onnx_version is None or caps.onnx_version is None:
        return "the ONNX export TensorRT builds from needs onnx and tf2onnx", EXPORT_FIX
    too_old = _precision_on_gpu(precision, caps)
    if too_old:
        return too_old
    how = " (explicit Q/DQ)" if precision == "int8" else ""
    return f"TensorRT {caps.tensorrt_version}{how} on {_gpu_text(caps)}", ""


def _ort_support(precision: str, caps: Capabilities) -> tuple[str, str]:
    if caps.ort_version is None:
        return caps.ort_reason or "onnxruntime is not importable", "pip install onnxruntime"
    if caps.tf2onnx_version is None or caps.onnx_version is None:
        return "the ONNX export needs onnx and tf2onnx", EXPORT_FIX
    gpu_providers = [p for p in caps.ort_providers if p in GPU_PROVIDERS]
    runs = _providers_text(caps.ort_providers)
    if precision in ("fp32", "int8"):
        how = " (static Q/DQ)" if precision == "int8" else ""
        return f"ONNX Runtime {caps.ort_version}{how} on {runs}", ""
    if not gpu_providers:
        what = {
            "fp16": "fp16 needs",
            "tf32": "tf32 is a GPU tensor-core mode the CPU provider cannot run; it needs",
        }[precision]
        return (
            f"{what} ONNX Runtime's CUDA or TensorRT execution provider, and only {runs} "
            f"can run here",
            ORT_GPU_FIX,
        )
    too_old = _precision_on_gpu(precision, caps)
    if too_old:
        return too_old
    return f"ONNX Runtime {caps.ort_version} on {_providers_text(gpu_providers)}", ""


def _providers_text(providers: list[str]) -> str:
    """Execution providers that run models, short names: "CUDA, CPU" (Azure is remote: left out)."""
    names = [p.removesuffix("ExecutionProvider") for p in providers if not p.startswith("Azure")]
    return ", ".join(names) or "no provider"


def _gpu_text(caps: Capabilities) -> str:
    gpu = caps.best_gpu
    return f"{gpu.name} (compute capability {gpu.capability})" if gpu else "no GPU"


def support_matrix(caps: Capabilities | None = None) -> list[Support]:
    """Every backend x precision with its verdict, for `doctor`."""
    caps = caps or probe()
    return [support(b, p, caps) for b in BACKENDS for p in PRECISIONS]
