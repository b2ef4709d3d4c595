"""TensorFlow's build and its TensorRT linkage, found without importing TensorFlow here.

TensorFlow 2.17.1's `get_loaded_tensorrt_version()` aborts the interpreter when libnvinfer is
absent, and TF-TRT's own error ("not built with TensorRT support") hides the real cause. So the
build info is read from TensorFlow's source file, the TensorRT libraries are opened with `ctypes`
(the sonames TensorFlow dlopens), and TensorFlow itself is asked only in a subprocess.
"""

from __future__ import annotations

import ast
import ctypes
import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtconv.core.lazy import TENSORFLOW_INSTALL
from trtconv.core.results import JsonResult

# The TensorRT TensorFlow 2.17 was linked against; TF dlopens exactly these sonames (seen with
# TF_CPP_MIN_LOG_LEVEL=0). The subprocess probe reads the real value from
# get_linked_tensorrt_version().
TFTRT_LINKED_TENSORRT = "8.6.1"
TFTRT_LIBRARIES = (
    f"libnvinfer.so.{TFTRT_LINKED_TENSORRT}",
    f"libnvinfer_plugin.so.{TFTRT_LINKED_TENSORRT}",
)


@dataclass(frozen=True)
class TfTrtReport:
    """What TensorFlow said about TF-TRT in a subprocess (`error` set when it could not say)."""

    enabled: bool = False
    linked: str | None = None
    loaded: str | None = None
    gpu_count: int | None = None
    load_causes: tuple[str, ...] = ()  # the dynamic loader's messages about libnvinfer
    gpu_causes: tuple[str, ...] = ()  # ... and about the CUDA libraries
    error: str = ""


@dataclass(frozen=True)
class TfBuildInfo(JsonResult):
    """What of `tf.sysconfig.get_build_info()` trtconv reads (its other keys are ignored)."""

    is_cuda_build: bool = False
    is_tensorrt_build: bool = False
    cuda_version: str | None = None
    cudnn_version: str | None = None


@dataclass(frozen=True)
class _ProbeReport(JsonResult):
    """The subprocess probe's JSON line (_TF_PROBE): versions as lists of numbers."""

    enabled: bool = False
    linked: list[int] = field(default_factory=list)
    loaded: list[int] = field(default_factory=list)
    gpus: int | None = None
    error: str = ""


@dataclass(frozen=True)
class TensorFlowFacts:
    """TensorFlow's build info and the TensorRT libraries TF-TRT would load.

    `reason` says why TensorFlow or its build info is unavailable ("" when read). `asked` is what
    TensorFlow reported in a subprocess, None when it was not asked.
    """

    version: str | None
    reason: str = ""
    is_cuda_build: bool = False
    is_tensorrt_build: bool = False
    cuda_version: str | None = None
    cudnn_version: str | None = None
    libnvinfer_version: str | None = None
    libnvinfer_reason: str = ""
    asked: TfTrtReport | None = None


def probe_tensorflow(version: str | None, ask: bool) -> TensorFlowFacts:
    """TensorFlow `version`'s build facts; with `ask`, also what TensorFlow says in a subprocess.

    Never imports TensorFlow into this process and never raises.
    """
    nvinfer_version, nvinfer_reason = libnvinfer()
    if version is None:
        return TensorFlowFacts(
            None,
            f"TensorFlow is not installed ({TENSORFLOW_INSTALL})",
            libnvinfer_version=nvinfer_version,
            libnvinfer_reason=nvinfer_reason,
        )
    try:
        build = read_tf_build_info()
    except (OSError, ValueError, SyntaxError) as exc:
        return TensorFlowFacts(
            version,
            f"TensorFlow's build info could not be read ({exc})",
            libnvinfer_version=nvinfer_version,
            libnvinfer_reason=nvinfer_reason,
        )
    return TensorFlowFacts(
        version,
        is_cuda_build=bool(build.is_cuda_build),
        is_tensorrt_build=bool(build.is_tensorrt_build),
        cuda_version=build.cuda_version,
        cudnn_version=build.cudnn_version,
        libnvinfer_version=nvinfer_version,
        libnvinfer_reason=nvinfer_reason,
        asked=tf_trt_subprocess_probe() if ask else None,
    )


def read_tf_build_info() -> TfBuildInfo:
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
            return TfBuildInfo.from_json(dict(ast.literal_eval(node.value.args[0])))
    raise ValueError(f"no build_info literal in {path}")


def decode_tensorrt_version(number: int) -> str:
    """`getInferLibVersion()` as text: 8601 -> 8.6.1 (TensorRT 8), 100300 -> 10.3.0 (10+)."""
    if number >= 100000:
        return f"{number // 10000}.{number // 100 % 100}.{number % 100}"
    return f"{number // 1000}.{number // 100 % 10}.{number % 100}"


def libnvinfer() -> tuple[str | None, str]:
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


# Runs in a fresh interpreter: get_loaded_tensorrt_version() may abort it, and that is fine there.
# It plots nothing and fits nothing: TensorFlow starts without Keras' optional imports, and with
# the garbage collector paused as `require` starts it (trtconv.core.lazy.collector_paused).
_TF_PROBE = """
import json
from trtconv.core.lazy import collector_paused, without_keras_optional_imports
without_keras_optional_imports()
report = {}
try:
    with collector_paused():
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


def tf_trt_subprocess_probe(timeout: float = 120.0) -> TfTrtReport:
    """Ask TensorFlow, in a subprocess, whether TF-TRT loads; keeps the real cause from stderr.

    Never raises and never aborts this process: a failure is the report's `error`.
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
        return TfTrtReport(error=f"could not run the probe ({exc})")
    lines = [line for line in done.stdout.splitlines() if line.startswith("TRTCONV_PROBE ")]
    if not lines:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return TfTrtReport(error=f"TensorFlow exited with code {done.returncode} ({tail[0][:300]})")
    report = _ProbeReport.from_json(json.loads(lines[-1].removeprefix("TRTCONV_PROBE ")))
    return TfTrtReport(
        enabled=bool(report.enabled),
        linked=_version_text(report.linked),
        loaded=_version_text(report.loaded),
        gpu_count=report.gpus,
        load_causes=_stderr_causes(done.stderr, ("nvinfer",)),
        gpu_causes=_stderr_causes(done.stderr, ("libcud", "cuInit", "GPU libraries")),
        error=str(report.error),
    )


def _version_text(value: Any) -> str | None:
    if not value:
        return None
    return ".".join(str(part) for part in value)


def _stderr_causes(stderr: str, needles: tuple[str, ...]) -> tuple[str, ...]:
    """The distinct 'Could not load dynamic library ...' style messages mentioning a needle."""
    causes: list[str] = []
    for line in stderr.splitlines():
        if not any(needle in line for needle in needles):
            continue
        message = line.split("] ", 1)[-1].strip()
        failed = any(word in message for word in ("Could not", "Cannot", "failed call"))
        if failed and message not in causes:
            causes.append(message)
    return tuple(causes[:4])
