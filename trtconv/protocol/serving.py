"""How Triton Inference Server serves a backend's payload natively (`trtconv deploy`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TritonServing:
    """A backend's Triton counterpart: a `backend` (onnxruntime, openvino) or a `platform`
    (tensorrt_plan, tensorflow_savedmodel), the file or folder name Triton loads from a version
    folder, the model parameter that sets intra-op threads (None: none known), and the GPU
    execution accelerator that takes the artifact's precision (ONNX Runtime's TensorRT)."""

    backend: str | None
    platform: str | None
    model_filename: str
    threads_parameter: str | None = None
    gpu_accelerator: str | None = None
