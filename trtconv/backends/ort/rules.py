"""When ONNX Runtime can run a precision: fp32 and int8 on any provider, tf32 only on a GPU
provider that really runs (onnxruntime-gpu falls back to the CPU silently otherwise); fp16 runs on
a GPU provider and converts anywhere (validated by float16 emulation where none runs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trtconv.core.precision import Precision
from trtconv.facts import Facts
from trtconv.protocol.doctor_section import DoctorSection, LibraryRow
from trtconv.protocol.support import EXPORT_FIX, Support, gpu_too_old, onnx_export_missing, verdict

NAME = "ort"
ORT_GPU_FIX = (
    "pip install 'trtconv[gpu]' (onnxruntime-gpu for CUDA 13, driver R580+, with its CUDA and "
    "cuDNN wheels; 'trtconv[gpu-cu12]' for CUDA 12) on a machine with an NVIDIA GPU, choose "
    "--backend tftrt or trt on a GPU, or use --precision fp32 or int8 on the CPU"
)
FP16_ELSEWHERE = (
    "converts for ONNX Runtime's CUDA or TensorRT execution provider, validated here by "
    "float16 emulation on the CPU"
)
GPU_PRECISIONS = ("fp16", "tf32")
TF32_NEEDS = "tf32 is a GPU tensor-core mode the CPU provider cannot run; it needs"


def providers_text(providers: tuple[str, ...]) -> str:
    """Execution providers that run models, short names: "CUDA, CPU" (Azure is remote: left out)."""
    names = [p.removesuffix("ExecutionProvider") for p in providers if not p.startswith("Azure")]
    return ", ".join(names) or "no provider"


def support(facts: Facts, precision: str) -> Support:
    """Whether ONNX Runtime converts and runs `precision` on the machine `facts` describe."""
    ort = facts.onnxruntime
    if ort.version is None:
        reason = ort.reason or "onnxruntime is not importable"
        return verdict(NAME, precision, reason, "pip install onnxruntime")
    if onnx_export_missing(facts):
        return verdict(NAME, precision, "the ONNX export needs onnx and tf2onnx", EXPORT_FIX)
    runs = providers_text(ort.providers)
    if precision not in GPU_PRECISIONS:
        how = " (static Q/DQ)" if precision == Precision.INT8 else ""
        return verdict(NAME, precision, f"ONNX Runtime {ort.version}{how} on {runs}")
    if not ort.gpu_providers and precision == Precision.FP16:
        return verdict(NAME, precision, f"{FP16_ELSEWHERE} (only {runs} can run here)", "", False)
    if not ort.gpu_providers:
        return verdict(
            NAME,
            precision,
            f"{TF32_NEEDS} ONNX Runtime's CUDA or TensorRT execution provider, "
            f"and only {runs} can run here",
            ORT_GPU_FIX,
        )
    too_old = gpu_too_old(precision, facts)
    if too_old:
        return verdict(NAME, precision, *too_old)
    gpu_runs = providers_text(ort.gpu_providers)
    return verdict(NAME, precision, f"ONNX Runtime {ort.version} on {gpu_runs}")


PACKAGES = ("onnxruntime", "onnxruntime-gpu")


def both_packages_note(facts: Facts) -> str:
    """A sentence when onnxruntime and onnxruntime-gpu are both installed ("" otherwise)."""
    cpu, gpu = (facts.version(name) for name in PACKAGES)
    if cpu is None or gpu is None:
        return ""
    running = facts.onnxruntime.version
    return (
        f"onnxruntime {cpu} and onnxruntime-gpu {gpu} are both installed: they write the same "
        f"`onnxruntime` package, so the one installed last wins (this is {running}) and removing "
        "either breaks both; fix: pip uninstall -y onnxruntime onnxruntime-gpu, then pip install "
        "'trtconv[gpu]' (or 'trtconv[cpu]')"
    )


@dataclass(frozen=True)
class OnnxRuntimeSection(DoctorSection):
    """The doctor's `onnxruntime` block: version, the installed ONNX Runtime packages (both when
    both are), the providers that really run and those the build lists."""

    KEY: ClassVar[str] = "onnxruntime"
    version: str | None
    packages: dict[str, str | None]
    providers: list[str]
    available_providers: list[str]
    notes: str

    def library_rows(self) -> list[LibraryRow]:
        providers = ", ".join(self.providers) or "none"
        packages = ", ".join(f"{name} {version}" for name, version in self.packages.items())
        notes = f"; {self.notes}" if self.notes else ""
        details = f"{packages or 'not installed'}; providers: {providers}{notes}"
        return [LibraryRow(component="ONNX Runtime", version=self.version, details=details)]


def doctor_section(facts: Facts) -> OnnxRuntimeSection:
    """The doctor's `onnxruntime` section for the machine `facts` describe."""
    ort = facts.onnxruntime
    notes = [note for note in (both_packages_note(facts), ort.reason) if note]
    return OnnxRuntimeSection(
        version=ort.version,
        packages={name: facts.version(name) for name in PACKAGES if facts.version(name)},
        providers=list(ort.providers),
        available_providers=list(ort.available_providers),
        notes="; ".join(notes),
    )
