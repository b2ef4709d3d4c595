"""Each backend's support rules and `--backend auto`, judged on described machines.

The rules are pure functions of the facts, so a machine is described (an AVX2 CPU only, a T4, an
A100 with TF-TRT, ...) rather than probed: these tests mean the same on every machine.
"""

from __future__ import annotations

import pytest

from trtconv.backends import registry
from trtconv.core.errors import MissingDependencyError, UsageError
from trtconv.facts import Facts, Gpu, described, probe

A100 = Gpu("NVIDIA A100-SXM4-40GB", (8, 0), 40960.0, "550.54")
T4 = Gpu("Tesla T4", (7, 5), 15360.0, "550.54")
CPU_ONLY = described()


def gpu_machine(gpu: Gpu, tftrt: str | None = "8.6.1", tensorrt: str | None = "10.3.0") -> Facts:
    """A machine with `gpu`, TF-TRT loading TensorRT `tftrt`, and the `tensorrt` module."""
    return described(gpus=[gpu], tftrt_tensorrt=tftrt, tensorrt=tensorrt)


# --- a CPU-only machine ----------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_auto_picks_ort_on_a_cpu_machine(precision: str) -> None:
    backend, reason = registry.choose(precision, CPU_ONLY)
    assert backend == "ort"
    assert "tftrt" in reason and "trt" in reason  # says why the GPU backends were passed over
    registry.support(backend, precision, CPU_ONLY).require()


def test_tftrt_without_its_libraries_is_exit_3_with_reason_and_fix() -> None:
    with pytest.raises(MissingDependencyError) as caught:
        registry.support("tftrt", "fp16", CPU_ONLY).require()
    message = str(caught.value)
    assert caught.value.exit_code == 3
    assert "libnvinfer.so.8.6.1" in message and "LD_LIBRARY_PATH" in message
    assert "no NVIDIA GPU" in message and "nvcr.io" in message


def test_trt_names_the_extra_and_the_gpu() -> None:
    with pytest.raises(MissingDependencyError) as caught:
        registry.support("trt", "fp32", CPU_ONLY).require()
    assert "pip install 'trtconv[trt]'" in str(caught.value)
    assert "GPU" in str(caught.value)


def test_ort_cpu_refuses_tf32_instead_of_downgrading() -> None:
    backend, reason = registry.choose("tf32", CPU_ONLY)
    assert "no backend can run" in reason
    with pytest.raises(MissingDependencyError) as caught:
        registry.support(backend, "tf32", CPU_ONLY).require()
    assert "trtconv[gpu]" in str(caught.value)


def test_ort_fp16_converts_on_a_cpu_machine_for_a_gpu_but_auto_passes_it_over() -> None:
    verdict = registry.support("ort", "fp16", CPU_ONLY)
    verdict.require()  # an explicit --backend ort converts it here
    assert not verdict.runs_here and "float16 emulation" in verdict.reason
    _, reason = registry.choose("fp16", CPU_ONLY)
    assert "no backend can run fp16 here" in reason and "ort (converts for" in reason
    cuda = ("CUDAExecutionProvider", "CPUExecutionProvider")
    assert registry.support("ort", "fp16", described(gpus=[T4], ort_providers=cuda)).runs_here


def test_unknown_names_are_usage_errors() -> None:
    with pytest.raises(UsageError):
        registry.support("tensorflow-lite", "fp32", CPU_ONLY)
    with pytest.raises(UsageError):
        registry.support("ort", "int4", CPU_ONLY)
    with pytest.raises(UsageError, match="converts nothing"):
        registry.support(registry.native().name, "fp32", CPU_ONLY)


# --- GPU machines -----------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["fp32", "tf32", "fp16", "int8"])
def test_auto_prefers_tftrt_on_ampere(precision: str) -> None:
    machine = gpu_machine(A100)
    backend, reason = registry.choose(precision, machine)
    assert backend == "tftrt" and "A100" in reason
    registry.support(backend, precision, machine).require()


def test_tf32_needs_ampere() -> None:
    machine = gpu_machine(T4)
    for backend in ("tftrt", "trt"):
        with pytest.raises(MissingDependencyError, match=r"compute capability >= 8\.0.*7\.5"):
            registry.support(backend, "tf32", machine).require()
        registry.support(backend, "fp16", machine).require()
    backend, reason = registry.choose("tf32", machine)
    assert backend == "tftrt" and "no backend can run tf32" in reason  # then exit 3, no downgrade


def test_auto_falls_to_trt_when_tensorflow_lacks_tensorrt() -> None:
    machine = gpu_machine(A100, tftrt=None)
    assert registry.choose("int8", machine)[0] == "trt"
    assert "explicit Q/DQ" in registry.support("trt", "int8", machine).reason


def test_trt_needs_version_10() -> None:
    verdict = registry.support("trt", "fp32", gpu_machine(A100, tensorrt="8.6.1"))
    assert not verdict.ok and "older than 10" in verdict.reason


@pytest.mark.parametrize("loaded", ["10.3.0", "11.0.0", "8.5.3"])
@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_tftrt_needs_the_tensorrt_major_tensorflow_was_built_with(
    loaded: str, precision: str
) -> None:
    """TensorFlow 2.17 links TensorRT 8.6.1; its `_check_trt_version_compatibility` refuses
    another loaded major or an older 8 ("Incompatible TensorRT major version"), INT8 or not."""
    machine = gpu_machine(A100, tftrt=loaded)
    with pytest.raises(MissingDependencyError) as caught:
        registry.support("tftrt", precision, machine).require()
    message = str(caught.value)
    assert caught.value.exit_code == 3 and message.count("; fix: ") == 1
    assert f"built against TensorRT 8.6.1 and TF-TRT refuses TensorRT {loaded}" in message
    assert "TensorRT 8.6 libraries" in message and "--backend trt" in message
    assert registry.choose(precision, machine)[0] == "trt"  # auto passes over TF-TRT
    for good in ("8.6.1", "8.6.2"):
        assert registry.support("tftrt", precision, gpu_machine(A100, tftrt=good)).ok


def test_doctor_says_which_tensorrt_tf_trt_refuses() -> None:
    from trtconv.backends.tftrt import rules as tftrt_rules

    section = tftrt_rules.doctor_section(gpu_machine(A100, tftrt="10.3.0"))
    assert section.usable is False and section.loaded_tensorrt == "10.3.0"
    assert "TF-TRT refuses TensorRT 10.3.0: it needs TensorRT 8 (8.6.1 or newer)" in section.reason
    assert section.to_json()["reason"] == section.reason  # the block doctor --json prints


def test_ort_fp16_with_a_working_cuda_provider() -> None:
    providers = ("CUDAExecutionProvider", "CPUExecutionProvider")
    machine = described(gpus=[T4], ort_providers=providers)
    assert registry.support("ort", "fp16", machine).ok
    assert not registry.support("ort", "tf32", machine).ok  # T4 has no TF32


def test_support_matrix_covers_every_converter_and_precision() -> None:
    matrix = registry.support_matrix(CPU_ONLY)
    pairs = {(s.backend, s.precision) for s in matrix}
    names = {backend.name for backend in registry.converters()}
    assert pairs == {(b, p) for b in names for p in ("fp32", "tf32", "fp16", "bf16", "int8")}
    assert all(s.fix for s in matrix if not s.ok)


# --- this machine -----------------------------------------------------------------------------


@pytest.mark.no_gpu
def test_this_machine_converts_on_the_cpu_only() -> None:
    here = probe()
    assert registry.choose("fp32", here)[0] == "ort"
    assert not registry.support("tftrt", "fp32", here).ok
    assert not registry.support("trt", "fp32", here).ok


# --- GPU hosts that only run, or whose TensorRT TensorFlow finds itself ----------------------


def test_a_runtime_only_gpu_host_runs_engines_it_cannot_build() -> None:
    """TensorRT and a GPU but no tf2onnx/onnx: engines built elsewhere run here."""
    from trtconv.backends.trt import rules as trt_rules

    host = described(gpus=[A100], tensorrt="11.1.0", libraries={"tf2onnx": None, "onnx": None})
    assert trt_rules.runtime_support(host, "fp16").ok
    build = trt_rules.support(host, "fp16")
    assert not build.ok and "onnx and tf2onnx" in build.reason


def test_tftrt_trusts_tensorflows_answer_over_our_soname_check() -> None:
    """libnvinfer.so.8.6.1 was not found by name, but TensorFlow itself loads TensorRT 8.6.2."""
    import dataclasses

    from trtconv.facts import TfTrtReport

    machine = described(gpus=[A100], tftrt_tensorrt=None)
    report = TfTrtReport(enabled=True, linked="8.6.1", loaded="8.6.2", gpu_count=1)
    tensorflow = dataclasses.replace(machine.tensorflow, asked=report)
    machine = dataclasses.replace(machine, tensorflow=tensorflow)
    assert machine.tensorflow.libnvinfer_reason  # our ctypes check failed
    verdict = registry.support("tftrt", "fp16", machine)
    assert verdict.ok and "8.6.2" in verdict.reason


def test_doctor_names_both_onnxruntime_packages_when_both_are_installed() -> None:
    from trtconv.backends.ort import rules as ort_rules

    both = described(libraries={"onnxruntime": "1.31.1", "onnxruntime-gpu": "1.31.1"})
    section = ort_rules.doctor_section(both)
    assert section.packages == {"onnxruntime": "1.31.1", "onnxruntime-gpu": "1.31.1"}
    assert "both installed" in section.notes and "pip uninstall -y" in section.notes
    one = ort_rules.doctor_section(described(libraries={"onnxruntime-gpu": None}))
    assert set(one.packages) == {"onnxruntime"} and "both" not in one.notes


def test_the_gpu_fix_names_the_cuda_major_of_each_extra() -> None:
    """The `gpu` extra is onnxruntime-gpu for CUDA 13 (pyproject.toml); CUDA 12 is `gpu-cu12`."""
    from trtconv.backends.ort.rules import ORT_GPU_FIX

    assert "'trtconv[gpu]' (onnxruntime-gpu for CUDA 13" in ORT_GPU_FIX
    assert "'trtconv[gpu-cu12]' for CUDA 12" in ORT_GPU_FIX
