"""`doctor`: what this machine has and which conversions it can run, as one dict.

A report, not a check: it never raises for a missing library or device; each absence is a row
with the reason and the fix.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from trtconv.capabilities import Capabilities, probe, support_matrix
from trtconv.environment import git_commit, library_versions

DOCTOR_SCHEMA_VERSION = 1


def doctor(deep: bool = True) -> dict[str, Any]:
    """Probe this machine and return the doctor report.

    `deep=True` also asks TensorFlow, in a subprocess, which TensorRT it links and loads and
    whether it sees a GPU (a few seconds); `deep=False` uses only the fast checks.
    """
    caps = probe(deep=deep)
    return {
        "schema_version": DOCTOR_SCHEMA_VERSION,
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "tensorflow": _tensorflow(caps),
        "tf_trt": _tf_trt(caps),
        "tensorrt": {
            "version": caps.tensorrt_version,
            "usable": caps.trt_usable,
            "reason": caps.tensorrt_reason,
        },
        "onnx": {"version": caps.onnx_version},
        "tf2onnx": {"version": caps.tf2onnx_version},
        "onnxruntime": {
            "version": caps.ort_version,
            "providers": caps.ort_providers,
            "available_providers": caps.ort_available_providers,
            "notes": caps.ort_reason,
        },
        "gpus": [gpu.to_dict() for gpu in caps.gpus],
        "cpu": _cpu(caps),
        "conversions": [verdict.to_dict() for verdict in support_matrix(caps)],
        "libraries": library_versions(),
        "commit": git_commit(),
    }


def _cpu(caps: Capabilities) -> dict[str, Any]:
    """The CPU with its int8 class: which int8 artifacts run on it exactly."""
    from trtconv.quantize.isa import cpu_int8_class, int8_note

    int8_class = cpu_int8_class(caps.cpu)
    return {**caps.cpu, "int8_class": int8_class, "int8_note": int8_note(int8_class)}


def _tensorflow(caps: Capabilities) -> dict[str, Any]:
    return {
        "version": caps.tf_version,
        "is_cuda_build": caps.tf_is_cuda_build,
        "is_tensorrt_build": caps.tf_is_tensorrt_build,
        "cuda_version": caps.tf_cuda_version,
        "cudnn_version": caps.tf_cudnn_version,
        "gpus_seen": caps.tf_gpu_count,
        "reason": caps.tf_reason,
    }


def _tf_trt(caps: Capabilities) -> dict[str, Any]:
    return {
        "usable": caps.tftrt_usable,
        "reason": caps.tftrt_reason,
        "linked_tensorrt": caps.tftrt_linked_version,
        "loaded_tensorrt": caps.tftrt_loaded_version or caps.libnvinfer_version,
        "libnvinfer": caps.libnvinfer_reason or f"loadable ({caps.libnvinfer_version})",
        "asked_tensorflow": caps.deep,
    }
