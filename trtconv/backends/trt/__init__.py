"""TensorRT >= 10: engines built from the validated ONNX export, int8 from explicit S8S8 Q/DQ."""

from __future__ import annotations

from trtconv.backends.registry import Backend, register
from trtconv.backends.trt import rules
from trtconv.backends.trt.converter import QDQ_SCHEME, convert
from trtconv.backends.trt.runner import TrtRunner, trt_runner
from trtconv.protocol.serving import TritonServing

BACKEND = register(
    Backend(
        name=rules.NAME,
        library="tensorrt",
        precisions=("fp32", "tf32", "fp16", "int8"),
        support=rules.support,
        runner=trt_runner,
        module=__name__,
        convert=convert,
        needs_onnx=True,
        qdq_scheme=QDQ_SCHEME,
        on_gpu=True,
        triton=TritonServing(None, "tensorrt_plan", "model.plan"),
        auto_rank=1,
        doctor=rules.doctor_section,
    )
)

__all__ = ["BACKEND", "TrtRunner", "convert"]
