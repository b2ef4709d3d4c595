"""The facts probe on this machine, and the described machines tests and rules use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.tensorflow_range import SHIPS_TFTRT, TENSORFLOW_VERSION
from trtconv.facts import Facts, Gpu, described, probe
from trtconv.facts import tensorflow as tf_facts
from trtconv.facts.libraries import GPU_PROVIDERS, probe_onnxruntime


@pytest.fixture(scope="module")
def here() -> Facts:
    return probe()


@pytest.mark.no_gpu
@pytest.mark.tensorflow
def test_probe_tells_the_truth_about_this_machine(here: Facts) -> None:
    assert here.gpus == ()
    assert here.version("tensorflow") == TENSORFLOW_VERSION != ""
    tf = here.tensorflow
    # 2.17's wheel is a CUDA and TensorRT build; 2.18 removed TF-TRT.
    assert tf.is_tensorrt_build is SHIPS_TFTRT
    # The real cause, not TensorFlow's misleading "not built with TensorRT support".
    assert "libnvinfer.so.8.6.1" in tf.libnvinfer_reason
    assert tf.asked is None  # nothing says TF-TRT could run, so TensorFlow was not asked
    assert here.tensorrt.version is None and "not installed" in here.tensorrt.reason
    assert "CPUExecutionProvider" in here.onnxruntime.providers
    assert not here.onnxruntime.gpu_providers


def test_cpu_facts_are_this_cpu(here: Facts) -> None:
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    assert here.cpu.features == {f for f in flags if f in here.cpu.block().features}
    assert here.cpu.logical_cores >= 1 and here.cpu.model
    assert here.cpu.has_bf16 == bool({"avx512_bf16", "amx_bf16"} & flags)


def test_probe_is_cached() -> None:
    assert probe() is probe()


def test_probe_does_not_import_heavy_libraries() -> None:
    code = (
        "import sys; from trtconv.facts import probe; probe(); "
        "print(sorted(m for m in ('tensorflow', 'tensorrt', 'tf2onnx') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.tensorflow
def test_build_info_is_read_without_importing_tensorflow_and_matches_it() -> None:
    import tensorflow as tf

    real = dict(tf.sysconfig.get_build_info())
    read = tf_facts.read_tf_build_info().to_json()
    for key in ("is_cuda_build", "is_tensorrt_build", "cuda_version", "cudnn_version"):
        assert read[key] == real[key]


@pytest.mark.parametrize(
    ("number", "text"), [(8601, "8.6.1"), (8503, "8.5.3"), (100300, "10.3.0"), (101312, "10.13.12")]
)
def test_decode_tensorrt_version(number: int, text: str) -> None:
    assert tf_facts.decode_tensorrt_version(number) == text


@pytest.mark.slow
@pytest.mark.no_gpu
@pytest.mark.tensorflow
def test_tensorflow_subprocess_probe_reports_linked_version_and_real_cause() -> None:
    if not SHIPS_TFTRT:
        pytest.skip(f"TensorFlow {TENSORFLOW_VERSION} has no TF-TRT to probe")
    report = tf_facts.tf_trt_subprocess_probe()
    assert report.enabled is False and not report.error
    assert report.loaded is None  # asking would abort the interpreter
    assert report.linked == tf_facts.TFTRT_LINKED_TENSORRT
    assert any("libnvinfer.so.8.6.1" in cause for cause in report.load_causes)
    assert report.gpu_count == 0


def test_missing_onnxruntime_is_reported_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # makes `import onnxruntime` fail
    facts = probe.__wrapped__()
    assert facts.onnxruntime.version is None and facts.onnxruntime.providers == ()
    assert "onnxruntime is not importable" in facts.onnxruntime.reason


def test_gpu_providers_count_only_when_they_can_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """onnxruntime-gpu lists CUDA even without CUDA libraries, then silently runs on the CPU."""
    import onnxruntime

    listed = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: listed)
    ort = probe_onnxruntime(has_gpu=False)
    assert ort.available_providers == tuple(listed)
    assert ort.providers == ("CPUExecutionProvider",)
    assert "no NVIDIA GPU" in ort.reason
    # With a GPU, the provider libraries must load: here they do not exist, so still CPU only.
    ort = probe_onnxruntime(has_gpu=True)
    assert ort.providers == ("CPUExecutionProvider",)
    assert "libonnxruntime_providers_cuda.so cannot be loaded" in ort.reason


def test_described_machine_is_what_it_says_and_asks_nothing() -> None:
    t4 = Gpu("Tesla T4", (7, 5), 15360.0, "550.54")
    machine = described(
        cpu_features=("avx2", "fma"),
        gpus=[t4],
        tftrt_tensorrt="8.6.1",
        tensorrt="10.3.0",
        ort_providers=("CUDAExecutionProvider", "CPUExecutionProvider"),
    )
    assert machine.best_gpu == t4 and not t4.supports("tf32") and t4.supports("fp16")
    assert machine.cpu.features == {"avx2", "fma"} and not machine.cpu.has_bf16
    assert machine.cpu.block().features["avx512_vnni"] is False
    assert machine.tensorflow.asked is not None and machine.tensorflow.asked.loaded == "8.6.1"
    assert machine.tensorrt.version == "10.3.0"
    assert machine.onnxruntime.gpu_providers == ("CUDAExecutionProvider",)
    assert set(GPU_PROVIDERS) >= set(machine.onnxruntime.gpu_providers)
    plain = described()
    assert plain.gpus == () and plain.tensorflow.libnvinfer_version is None
