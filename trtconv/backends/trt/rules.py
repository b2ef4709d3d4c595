"""When TensorRT (>= 10, built from ONNX) can run a precision: the `tensorrt` module, a GPU of
high enough compute capability, and the ONNX export's libraries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trtconv.core.precision import Precision
from trtconv.facts import Facts, version_tuple
from trtconv.protocol.doctor_section import DoctorSection, LibraryRow
from trtconv.protocol.support import (
    EXPORT_FIX,
    GPU_FIX,
    NO_GPU,
    Support,
    gpu_text,
    gpu_too_old,
    onnx_export_missing,
    verdict,
)

NAME = "trt"
TRT_MIN_MAJOR = 10
TRT_FIX = (
    "pip install 'trtconv[trt]' (TensorRT for CUDA 13, driver R580+) or 'trtconv[trt-cu12]' "
    "(CUDA 12) on a machine with an NVIDIA GPU and driver"
)


def module_problem(facts: Facts) -> str:
    """Why the `tensorrt` module cannot be used ("" when it is TensorRT >= 10)."""
    version = facts.tensorrt.version
    if version is None:
        return facts.tensorrt.reason or "TensorRT >= 10 is not importable"
    if version_tuple(version)[0] < TRT_MIN_MAJOR:
        return f"TensorRT {version} is older than {TRT_MIN_MAJOR}"
    return ""


def runtime_support(facts: Facts, precision: str) -> Support:
    """Whether a TensorRT engine of `precision` can run on the machine `facts` describe: the
    `tensorrt` module and a GPU, nothing of the conversion (a runtime-only host has no tf2onnx)."""
    problem = module_problem(facts)
    if problem:
        reason = problem if facts.has_gpu else f"{problem}, and {NO_GPU}"
        return verdict(NAME, precision, reason, TRT_FIX)
    if not facts.has_gpu:
        return verdict(NAME, precision, f"{NO_GPU}; TensorRT needs one", GPU_FIX)
    too_old = gpu_too_old(precision, facts)
    if too_old:
        return verdict(NAME, precision, *too_old)
    how = " (explicit Q/DQ)" if precision == Precision.INT8 else ""
    return verdict(NAME, precision, f"TensorRT {facts.tensorrt.version}{how} on {gpu_text(facts)}")


def support(facts: Facts, precision: str) -> Support:
    """Whether TensorRT builds and runs `precision` on the machine `facts` describe: what running
    needs, plus the ONNX export's libraries."""
    runs = runtime_support(facts, precision)
    if runs.ok and onnx_export_missing(facts):
        return verdict(
            NAME,
            precision,
            "the ONNX export TensorRT builds from needs onnx and tf2onnx",
            EXPORT_FIX,
        )
    return runs


@dataclass(frozen=True)
class TensorRtSection(DoctorSection):
    """The doctor's `tensorrt` block: the Python module's version and whether it is usable."""

    KEY: ClassVar[str] = "tensorrt"
    version: str | None
    usable: bool
    reason: str

    def library_rows(self) -> list[LibraryRow]:
        details = self.reason or "usable"
        return [LibraryRow(component="TensorRT (python)", version=self.version, details=details)]


def doctor_section(facts: Facts) -> TensorRtSection:
    """The doctor's `tensorrt` section for the machine `facts` describe."""
    problem = module_problem(facts)
    return TensorRtSection(
        version=facts.tensorrt.version,
        usable=not problem and facts.has_gpu,
        reason=problem if facts.tensorrt.version is None or problem else "",
    )
