"""The `ort` backend's runner factory: an ONNX Runtime session (trtconv.onnxlib.session) on the
execution providers the artifact was built for, or those `--device` asks for; an fp16 artifact on
the CPU runs by float16 emulation (trtconv.onnxlib.fp16), never by the CPU provider's casts."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from trtconv.backends import registry
from trtconv.core.precision import Precision
from trtconv.facts.libraries import dist_version
from trtconv.onnxlib.fp16 import EMULATION_WARNING, Float16EmulationRunner
from trtconv.onnxlib.session import CPU, CUDA, TENSORRT, OrtRunner
from trtconv.protocol.runner import Runner, RunOptions, check_device

if TYPE_CHECKING:
    from trtconv.artifact.manifest import Manifest

log = logging.getLogger(__name__)

# --device -> the execution providers asked for, in order (ONNX Runtime falls through the list
# per node; the runner refuses a session that silently dropped one).
DEVICE_PROVIDERS = {"cpu": [CPU], "cuda": [CUDA, CPU], "tensorrt": [TENSORRT, CUDA, CPU]}
INT8_ON_CUDA = (
    "int8 Q/DQ on ONNX Runtime's CUDA provider runs dequantised float kernels, not int8 ones: "
    "measured slower than fp16 on an H100 (MobileNetV2: 0.57x at batch 1, 0.91x at 64); "
    "--device tensorrt or --backend trt run int8 kernels"
)
# ONNX Runtime's TensorRT provider builds its engines with precision flags of its own: without
# them an fp16 or Q/DQ artifact runs fp32 kernels there. precision -> (trt_fp16_enable,
# trt_int8_enable); int8 allows fp16 too, as --backend trt does on TensorRT 10.
TENSORRT_PRECISION = {
    "fp32": (False, False),
    "tf32": (False, False),
    "fp16": (True, False),
    "int8": (True, True),
}
ENGINE_CACHE_ENV = "TRTCONV_ORT_TRT_ENGINE_CACHE_DIR"
# Whose versions an engine cache depends on (ONNX Runtime's docs: clear it when the model, ONNX
# Runtime or TensorRT changes; its engine names already hold the GPU's compute capability).
ENGINE_CACHE_LIBRARIES = (
    "onnxruntime-gpu",
    "onnxruntime",
    "tensorrt",
    "tensorrt-cu13-libs",
    "tensorrt-cu12-libs",
)


def ort_runner(payload: Path, manifest: Manifest | None, options: RunOptions) -> Runner:
    """The runner factory: providers for `options.device` ("auto": what the manifest recorded,
    else the CPU), with the CUDA provider's TF32 setting for the artifact's precision; the
    float16 emulation for an fp16 artifact that would run on the CPU (`emulates_fp16`)."""
    summary = manifest.conversion_summary if manifest is not None else {}
    precision = manifest.precision if manifest is not None else "fp32"
    device = check_device("ort", options.device, ("auto", "cpu", "cuda", "tensorrt"))
    if device == "auto":
        providers = list(summary.get("providers") or [CPU])
        recorded = summary.get("provider_options") or [{} for _ in providers]
    else:
        providers = DEVICE_PROVIDERS[device]
        recorded = [provider_options(provider, precision, payload) for provider in providers]
    if precision == Precision.FP16 and emulates_fp16(device, providers):
        return fp16_emulation(payload, device, options)
    runner = OrtRunner(
        payload, providers, threads=options.threads, options=list(recorded), spin=options.spin
    )
    runner.device = {CUDA: "cuda", TENSORRT: "tensorrt"}.get(providers[0], "cpu")
    if precision == Precision.INT8 and runner.device == "cuda":
        runner.warnings.append(f"{payload}: {INT8_ON_CUDA}.")
    return runner


def emulates_fp16(device: str, providers: list[str]) -> bool:
    """True when an fp16 artifact asked to run on `device` with `providers` (what "auto" found
    recorded) runs by float16 emulation: on "cpu", or "auto" where its GPU provider cannot run.
    ONNX Runtime's CPU provider would compute its float16 nodes in float32 and hide overflow."""
    if device == "auto":
        return providers[0] not in registry.facts_here().onnxruntime.gpu_providers
    return device == "cpu"


def fp16_emulation(payload: Path, device: str, options: RunOptions) -> Runner:
    """The float16 emulation runner for an fp16 artifact, with a warning that says so."""
    runner = Float16EmulationRunner(payload, threads=options.threads)
    where = "--device cpu" if device == "cpu" else "no ONNX Runtime GPU provider runs here"
    runner.warnings.append(f"{payload} {EMULATION_WARNING} ({where}).")
    return runner


def provider_options(provider: str, precision: str, model: Path | None = None) -> dict[str, str]:
    """One provider's options: CUDA computes float32 in TF32 unless told not to, so only tf32
    allows it (an fp32 artifact must match an fp32 reference); TensorRT gets the precision
    flags of the artifact and an engine cache for `model` (tensorrt_options)."""
    if provider == CUDA:
        return {"use_tf32": "1" if precision == Precision.TF32 else "0"}
    if provider == TENSORRT:
        return tensorrt_options(precision, model)
    return {}


def tensorrt_options(precision: str, model: Path | None) -> dict[str, str]:
    """The TensorRT provider's options: `trt_fp16_enable`/`trt_int8_enable` for `precision`, and
    its engine cache (built engines kept, so a second session does not rebuild them) in
    engine_cache_dir. Booleans are "True"/"False": ONNX Runtime's Python binding refuses "1"
    for these (onnxruntime_pybind_state.cc). No cache when its folder cannot be made."""
    fp16, int8 = TENSORRT_PRECISION.get(precision, (False, False))
    options = {"trt_fp16_enable": str(fp16), "trt_int8_enable": str(int8)}
    folder = engine_cache_dir(model, precision)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.info("no TensorRT engine cache for ONNX Runtime at %s (%s)", folder, exc)
        return options
    return {**options, "trt_engine_cache_enable": "True", "trt_engine_cache_path": str(folder)}


def engine_cache_dir(model: Path | None, precision: str) -> Path:
    """Where ONNX Runtime's TensorRT provider keeps the engines of `model` at `precision`.

    Under $TRTCONV_ORT_TRT_ENGINE_CACHE_DIR (default ~/.cache/trtconv/ort-trt-engines), one folder
    per model file (path, size, modification time), precision and ONNX Runtime and TensorRT
    versions: ONNX Runtime names an engine after the graph's structure, not its weights, so two
    models must never share a folder, and its docs ask for the cache to be cleared when the
    model, ONNX Runtime or TensorRT changes.
    """
    root = os.environ.get(ENGINE_CACHE_ENV)
    folder = Path(root) if root else Path.home() / ".cache" / "trtconv" / "ort-trt-engines"
    if model is None:
        return folder / precision
    stat = model.stat() if model.is_file() else None
    identity = [str(model.resolve()), precision]
    identity += [f"{stat.st_size}:{stat.st_mtime_ns}"] if stat else []
    identity += [f"{name}={dist_version(name)}" for name in ENGINE_CACHE_LIBRARIES]
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:16]
    return folder / f"{model.stem}-{precision}-{digest}"
