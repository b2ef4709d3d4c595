"""OpenVINO: the SavedModel read by OpenVINO itself (no ONNX export), an IR (`model.xml` +
`model.bin`) run by its CPU plugin; fp32, bf16 and fp16 inference precision where the CPU has
them, int8 by NNCF post-training quantisation."""

from __future__ import annotations

from trtconv.backends.openvino import rules
from trtconv.backends.openvino.converter import convert
from trtconv.backends.openvino.runner import OpenVinoRunner, openvino_runner
from trtconv.backends.registry import Backend, register
from trtconv.protocol.serving import TritonServing
from trtconv.quantize.isa import QdqScheme

BACKEND = register(
    Backend(
        name=rules.NAME,
        library="openvino",
        precisions=("fp32", "bf16", "fp16", "int8"),
        support=rules.support,
        runner=openvino_runner,
        module=__name__,
        convert=convert,
        # NNCF's FakeQuantize is a quantise-dequantise pair: uint8 activations x int8 weights on
        # the CPU's int8 kernels, with the same saturation rules as ONNX Runtime's U8S8.
        qdq_scheme=QdqScheme.U8S8,
        throughput_mode=True,
        packages=("openvino", "nncf"),
        # After ONNX Runtime: `auto` keeps its choice for fp32 and int8 and finds OpenVINO for
        # bf16 and CPU fp16, which only it runs here.
        auto_rank=3,
        triton=TritonServing("openvino", None, "model.xml", "INFERENCE_NUM_THREADS"),
        doctor=rules.doctor_section,
    )
)

__all__ = ["BACKEND", "OpenVinoRunner", "convert"]
