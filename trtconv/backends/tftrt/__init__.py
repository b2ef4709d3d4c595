"""TF-TRT: TensorFlow's TrtGraphConverterV2 (TensorFlow 2.17 CUDA build, TensorRT 8, a GPU)."""

from __future__ import annotations

from trtconv.backends.registry import Backend, register
from trtconv.backends.tftrt import rules
from trtconv.backends.tftrt.converter import convert
from trtconv.backends.tftrt.runner import TfTrtRunner, tftrt_runner
from trtconv.protocol.serving import TritonServing

BACKEND = register(
    Backend(
        name=rules.NAME,
        library="tensorflow",
        precisions=("fp32", "tf32", "fp16", "int8"),
        support=rules.support,
        runner=tftrt_runner,
        module=__name__,
        convert=convert,
        string_inputs=True,
        on_gpu=True,
        triton=TritonServing(None, "tensorflow_savedmodel", "model.savedmodel"),
        auto_rank=0,
        doctor=rules.doctor_section,
    )
)

__all__ = ["BACKEND", "TfTrtRunner", "convert"]
