"""ONNX Runtime: the validated ONNX export, fp32 optimised offline, int8 as explicit U8S8 Q/DQ,
fp16 on GPU execution providers."""

from __future__ import annotations

from trtconv.backends.ort import rules
from trtconv.backends.ort.converter import QDQ_SCHEME, convert
from trtconv.backends.ort.runner import ort_runner
from trtconv.backends.registry import Backend, register
from trtconv.onnxlib.session import OrtRunner
from trtconv.protocol.serving import TritonServing

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
        qdq_scheme=QDQ_SCHEME,
        auto_rank=2,
        triton=TritonServing(
            "onnxruntime", None, "model.onnx", "intra_op_thread_count", gpu_accelerator="tensorrt"
        ),
        doctor=rules.doctor_section,
    )
)

__all__ = ["BACKEND", "OrtRunner", "convert"]
