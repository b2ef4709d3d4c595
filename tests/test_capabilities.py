"""The capability probe and the backend/precision rules.

The probe runs for real on this machine (no GPU, no TensorRT libraries). The rules for GPU
machines are checked on Capabilities records that differ from the real one only in the GPU and
TensorRT facts (data, not mocks: the decisions are pure functions of those facts).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from trtconv import capabilities
from trtconv.capabilities import (
    Capabilities,
    Gpu,
    check_supported,
    choose_backend,
    decode_tensorrt_version,
    probe,
    support,
)
from trtconv.errors import MissingDependencyError, UsageError

A100 = Gpu("NVIDIA A100-SXM4-40GB", (8, 0), 40960.0, "550.54")
T4 = Gpu("Tesla T4", (7, 5), 15360.0, "550.54")


@pytest.fixture(scope="module")
def here() -> Capabilities:
    return probe()


def with_tftrt(caps: Capabilities, gpu: Gpu, loaded: str = "8.6.1") -> Capabilities:
    """This machine's record, but with a GPU and TensorFlow loading TensorRT `loaded`."""
    return dataclasses.replace(
        caps,
        gpus=[gpu],
        tftrt_usable=True,
        tftrt_reason=f"TensorFlow loads TensorRT {loaded}",
        tftrt_loaded_version=loaded,
    )


def with_tensorrt(caps: Capabilities, gpu: Gpu, version: str = "10.3.0") -> Capabilities:
    return dataclasses.replace(caps, gpus=[gpu], tensorrt_version=version, tensorrt_reason="")


# --- the probe on this machine -------------------------------------------------------------


def test_probe_tells_the_truth_about_this_machine(here: Capabilities) -> None:
    assert here.gpus == []
    assert here.tf_version and here.tf_version.startswith("2.17")
    assert here.tf_is_cuda_build and here.tf_is_tensorrt_build
    assert not here.tftrt_usable
    # The real cause, not TensorFlow's misleading "not built with TensorRT support".
    assert "libnvinfer.so.8.6.1" in here.tftrt_reason
    assert "no NVIDIA GPU" in here.tftrt_reason
    assert here.tensorrt_version is None and not here.trt_usable
    assert "CPUExecutionProvider" in here.ort_providers
    assert not any(p in here.ort_providers for p in capabilities.GPU_PROVIDERS)
    json.dumps(here.to_dict())  # serialisable for doctor --json and manifests


def test_probe_is_cached() -> None:
    assert probe() is probe()


def test_probe_does_not_import_heavy_libraries() -> None:
    code = (
        "import sys; from trtconv.capabilities import probe; probe(); "
        "print(sorted(m for m in ('tensorflow', 'tensorrt', 'tf2onnx') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_build_info_is_read_without_importing_tensorflow_and_matches_it() -> None:
    import tensorflow as tf

    real = dict(tf.sysconfig.get_build_info())
    read = capabilities.read_tf_build_info()
    for key in ("is_cuda_build", "is_tensorrt_build", "cuda_version", "cudnn_version"):
        assert read[key] == real[key]


@pytest.mark.parametrize(
    ("number", "text"), [(8601, "8.6.1"), (8503, "8.5.3"), (100300, "10.3.0"), (101312, "10.13.12")]
)
def test_decode_tensorrt_version(number: int, text: str) -> None:
    assert decode_tensorrt_version(number) == text


@pytest.mark.slow
def test_tensorflow_subprocess_probe_reports_linked_version_and_real_cause() -> None:
    report = capabilities.tf_trt_subprocess_probe()
    assert report["enabled"] is False
    assert "loaded" not in report  # asking would abort the interpreter
    assert ".".join(map(str, report["linked"])) == capabilities.TFTRT_LINKED_TENSORRT
    assert any("libnvinfer.so.8.6.1" in cause for cause in report["cause"])
    assert report["gpus"] == 0


def test_missing_onnxruntime_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` fail
    caps = probe.__wrapped__()
    assert caps.ort_version is None and caps.ort_providers == []
    verdict = support("ort", "fp32", caps)
    assert not verdict.ok and "onnxruntime" in verdict.reason


def test_gpu_providers_count_only_when_they_can_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime-gpu lists CUDA even without CUDA libraries, then silently runs on the CPU."""
    import onnxruntime

    listed = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: listed)
    _, available, usable, notes = capabilities._onnxruntime(has_gpu=False)
    assert available == listed and usable == ["CPUExecutionProvider"]
    assert "no NVIDIA GPU" in notes
    # With a GPU, the provider libraries must load: here they do not exist, so still CPU only.
    _, _, usable, notes = capabilities._onnxruntime(has_gpu=True)
    assert usable == ["CPUExecutionProvider"]
    assert "libonnxruntime_providers_cuda.so cannot be loaded" in notes


# --- decisions on this machine ---------------------------------------------------------------


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_auto_picks_ort_on_a_cpu_machine(here: Capabilities, precision: str) -> None:
    backend, reason = choose_backend(precision, here)
    assert backend == "ort"
    assert "tftrt" in reason and "trt" in reason  # says why the GPU backends were passed over
    check_supported(backend, precision, here)


def test_tftrt_here_is_exit_3_with_reason_and_fix(here: Capabilities) -> None:
    with pytest.raises(MissingDependencyError) as caught:
        check_supported("tftrt", "fp16", here)
    message = str(caught.value)
    assert caught.value.exit_code == 3
    assert "libnvinfer.so.8.6.1" in message and "LD_LIBRARY_PATH" in message
    assert "NGC" in message or "nvcr.io" in message


def test_trt_here_names_the_extra_and_the_gpu(here: Capabilities) -> None:
    with pytest.raises(MissingDependencyError) as caught:
        check_supported("trt", "fp32", here)
    assert "pip install 'trtconv[trt]'" in str(caught.value)
    assert "GPU" in str(caught.value)


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_ort_cpu_refuses_gpu_precisions_instead_of_downgrading(
    here: Capabilities, precision: str
) -> None:
    backend, reason = choose_backend(precision, here)
    assert "no backend can run" in reason
    with pytest.raises(MissingDependencyError) as caught:
        check_supported(backend, precision, here)
    assert "trtconv[gpu]" in str(caught.value)


def test_unknown_names_are_usage_errors(here: Capabilities) -> None:
    with pytest.raises(UsageError):
        check_supported("tensorflow-lite", "fp32", here)
    with pytest.raises(UsageError):
        check_supported("ort", "bf16", here)


# --- decisions on GPU machines (records differing only in GPU/TensorRT facts) ---------------


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "int8"])
def test_auto_prefers_tftrt_on_ampere(here: Capabilities, precision: str) -> None:
    caps = with_tensorrt(with_tftrt(here, A100), A100)
    backend, reason = choose_backend(precision, caps)
    assert backend == "tftrt" and "A100" in reason
    check_supported(backend, precision, caps)


def test_tf32_needs_ampere(here: Capabilities) -> None:
    caps = with_tensorrt(with_tftrt(here, T4), T4)
    for backend in ("tftrt", "trt"):
        with pytest.raises(MissingDependencyError, match=r"compute capability >= 8\.0.*7\.5"):
            check_supported(backend, "tf32", caps)
        check_supported(backend, "fp16", caps)
    backend, reason = choose_backend("tf32", caps)
    assert backend == "tftrt" and "no backend can run tf32" in reason  # then exit 3, no downgrade


def test_auto_falls_to_trt_when_tensorflow_lacks_tensorrt(here: Capabilities) -> None:
    caps = with_tensorrt(here, A100)
    assert choose_backend("int8", caps)[0] == "trt"
    assert "explicit Q/DQ" in support("trt", "int8", caps).reason


def test_trt_needs_version_10(here: Capabilities) -> None:
    caps = with_tensorrt(here, A100, version="8.6.1")
    assert not support("trt", "fp32", caps).ok


def test_tftrt_int8_calibration_needs_tensorrt_before_11(here: Capabilities) -> None:
    assert support("tftrt", "int8", with_tftrt(here, A100, loaded="10.3.0")).ok
    verdict = support("tftrt", "int8", with_tftrt(here, A100, loaded="11.0.0"))
    assert not verdict.ok and "8.6-10" in verdict.reason
    assert support("tftrt", "fp16", with_tftrt(here, A100, loaded="11.0.0")).ok


def test_ort_fp16_with_a_working_cuda_provider(here: Capabilities) -> None:
    caps = dataclasses.replace(
        here, gpus=[T4], ort_providers=["CUDAExecutionProvider", "CPUExecutionProvider"]
    )
    assert support("ort", "fp16", caps).ok
    assert not support("ort", "tf32", caps).ok  # T4 has no TF32


def test_support_matrix_covers_every_pair(here: Capabilities) -> None:
    matrix = capabilities.support_matrix(here)
    pairs = {(s.backend, s.precision) for s in matrix}
    assert pairs == {(b, p) for b in capabilities.BACKENDS for p in capabilities.PRECISIONS}
    assert all(s.fix for s in matrix if not s.ok)
