"""The `ort` backend's runner factory: an ONNX Runtime session (trtconv.onnxlib.session) on the
execution providers the artifact was built for, or those `--device` asks for; an fp16 artifact on
the CPU runs by float16 emulation (trtconv.onnxlib.fp16), never by the CPU provider's casts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trtconv.backends import registry
from trtconv.backends.runner import Runner, RunOptions, check_device
from trtconv.onnxlib.fp16 import EMULATION_WARNING, Float16EmulationRunner
from trtconv.onnxlib.session import CPU, CUDA, TENSORRT, OrtRunner

if TYPE_CHECKING:
    from trtconv.manifest import Manifest

# --device -> the execution providers asked for, in order (ONNX Runtime falls through the list
# per node; the runner refuses a session that silently dropped one).
DEVICE_PROVIDERS = {"cpu": [CPU], "cuda": [CUDA, CPU], "tensorrt": [TENSORRT, CUDA, CPU]}
INT8_ON_CUDA = (
    "int8 Q/DQ on ONNX Runtime's CUDA provider runs dequantised float kernels, not int8 ones: "
    "measured slower than fp16 on an H100 (MobileNetV2: 0.57x at batch 1, 0.91x at 64); "
    "--device tensorrt or --backend trt run int8 kernels"
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
        recorded = [provider_options(provider, precision) for provider in providers]
    if precision == "fp16" and emulates_fp16(device, providers):
        return fp16_emulation(payload, device, options)
    runner = OrtRunner(payload, providers, threads=options.threads, options=list(recorded))
    runner.device = {CUDA: "cuda", TENSORRT: "tensorrt"}.get(providers[0], "cpu")
    if precision == "int8" and runner.device == "cuda":
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


def provider_options(provider: str, precision: str) -> dict[str, str]:
    """One provider's options: CUDA computes float32 in TF32 unless told not to, so only tf32
    allows it (an fp32 artifact must match an fp32 reference)."""
    if provider == CUDA:
        return {"use_tf32": "1" if precision == "tf32" else "0"}
    return {}
