"""ONNX Runtime: the validated ONNX export, fp32 optimised offline, int8 as explicit U8S8 Q/DQ,
fp16 on GPU execution providers."""

from __future__ import annotations

from trtconv.backends.ort import rules
from trtconv.backends.ort.converter import convert
from trtconv.backends.ort.runner import OrtRunner, ort_runner
from trtconv.backends.registry import Backend, register

BACKEND = register(
    Backend(
        name=rules.NAME,
        library="onnxruntime",
        precisions=("fp32", "tf32", "fp16", "int8"),
        support=rules.support,
        runner=ort_runner,
        module=__name__,
        convert=convert,
        needs_onnx=True,
        # uint8 activations, int8 weights: the fast x86 path (S8S8 runs partly as float).
        qdq_scheme="u8s8",
        auto_rank=2,
        doctor=rules.doctor_section,
    )
)

__all__ = ["BACKEND", "OrtRunner", "convert"]
