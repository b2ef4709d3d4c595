"""`trtconv convert --backend trt`, `validate` and the TensorRT runner driven end to end through
the strict stand-ins of TensorRT 10 and 11 (tests/helpers/standins) on a fake H100.

Everything of trtconv runs for real: the facts probe (it imports the stand-in `tensorrt`), the
ONNX export, the S8S8 Q/DQ model, the build plan, the timing cache, the manifest, the runner's
device buffers and copies, and the validation against TensorFlow. The stand-in engine computes
with ONNX Runtime on the CPU, so the numbers prove the plumbing, not TensorRT's precision.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.standins import GpuStandins, gpu_machine
from tests.helpers.standins.tensorrt_api import trt_names
from trtconv import api
from trtconv import facts as facts_module
from trtconv.backends.registry import open_runner
from trtconv.calib.sources import ArraySet, load_digits
from trtconv.core.errors import AccuracyError, ConversionError, MissingDependencyError, UsageError
from trtconv.options.convert import ConvertOptions
from trtconv.options.validate import ValidateOptions
from trtconv.outputs.compare import run_batched
from trtconv.protocol.runner import RunOptions

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # trains digits-cnn (session fixture), exports and builds


def machine(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    version: str,
    cuda: str = "13.4.4",
    **gpu: Any,
) -> GpuStandins:
    """This process as a GPU machine with the stand-in TensorRT `version` (standins.gpu_machine)."""
    return gpu_machine(monkeypatch, tmp_path, version, cuda, **gpu)


@pytest.fixture(autouse=True)
def fresh_facts() -> Iterator[None]:
    """The facts probe is cached per process: forget the fake machine after each test."""
    facts_module.probe.cache_clear()
    yield
    facts_module.probe.cache_clear()


def manifest_of(artifact: Path) -> dict[str, Any]:
    return json.loads((artifact / "manifest.json").read_text())


def validate_anyway(options: ValidateOptions) -> dict[str, Any]:
    """`validate`'s JSON result, whether its verdict passed or failed (exit 4 carries it)."""
    try:
        return api.validate(options).to_json()
    except AccuracyError as failed:
        assert failed.result is not None
        return failed.result if isinstance(failed.result, dict) else failed.result.to_json()


def figures(validation: dict[str, Any]) -> tuple[Any, ...]:
    """A validation JSON's measured figures: what its verdicts are decided on."""
    keys = ("samples", "top1_agreement", "accuracy_reference", "accuracy_candidate")
    return tuple(validation[key] for key in keys)


@pytest.mark.parametrize(
    ("version", "precision", "flags", "built_from"),
    [
        # Strongly typed: no precision flag, the fp16 ONNX carries the types (TF32, on by
        # default, stays allowed for what remains float32).
        ("11.4", "fp16", ["TF32"], "fp16"),
        ("11.4", "int8", ["TF32"], "qdq"),
        ("10.16", "int8", ["FP16", "INT8", "TF32"], "qdq"),  # FP16 next to INT8
    ],
)
def test_convert_and_validate_through_the_stand_ins(
    version: str,
    precision: str,
    flags: list[str],
    built_from: str,
    digits_saved_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    standins = machine(monkeypatch, tmp_path, version)
    artifact = tmp_path / "artifact"
    # The stand-ins' boundary is under test, not int8's accuracy on this CPU: the stand-in engine
    # runs ONNX Runtime's CPU int8 kernels, whose accuracy on the digits model (retrained for
    # each source change) moves with the CPU (0.967-0.997 on AVX2 EPYCs without VNNI). Plumbing
    # that broke (buffers swapped, a batch misread) agrees on about a tenth of the samples, so
    # these limits still catch it; the point figures decide (confidence 0).
    limits = {"min_top1_agreement": 0.9, "max_accuracy_drop": 0.1} if precision == "int8" else {}
    result = api.convert(
        ConvertOptions(
            digits_saved_model,
            precision,
            backend="trt",
            output=artifact,
            batch_sizes=(4, 16),
            calib_samples=256,
            validate_samples=300,
            confidence=0.0,
            **limits,
        )
    ).to_json()
    assert result["validation"]["passed"], result["validation"]
    assert result["validation"]["batch_size"] == 16 and result["validation"]["device"] == "tensorrt"
    summary = manifest_of(artifact)["conversion_summary"]
    assert summary["tensorrt_version"] == trt_names(version)["source"]["version"]  # the wheel's
    assert summary["strongly_typed"] is version.startswith("11")
    assert summary["built_from"] == built_from
    assert summary["batch_range"] == [4, 16]
    assert summary["timing_cache"]["status"] == "new" and summary["timing_cache_reused"] is False
    plan = (artifact / "model.plan").read_bytes()
    header = json.loads(plan.split(b"\n", 1)[1][8 : 8 + int.from_bytes(plan[21:29], "little")])
    assert header["flags"] == flags
    assert standins.gpu.launches > 0  # validation ran the engine on the (fake) device
    # validate reopens the engine and judges it on the same 300 samples: the same figures (it
    # judges at the precision's own limits, so int8's verdict there is the CPU's to give).
    validated = validate_anyway(ValidateOptions(artifact, samples=300))
    assert validated["device"] == "tensorrt"
    assert figures(validated) == figures(result["validation"])
    with pytest.raises(UsageError, match="cannot run on --device cpu"):
        api.validate(ValidateOptions(artifact, samples=300, device="cpu"))


@pytest.fixture(scope="module")
def engine_dir(
    digits_saved_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Path]:
    """One TensorRT 11 fp32 engine for batches 8..16, built through the stand-ins."""
    monkeypatch = pytest.MonkeyPatch()
    tmp = tmp_path_factory.mktemp("engine")
    try:
        machine(monkeypatch, tmp, "11.4")
        api.convert(
            ConvertOptions(
                digits_saved_model, "fp32", backend="trt", output=tmp / "a", batch_sizes=(8, 16)
            )
        )
    finally:
        monkeypatch.undo()
        facts_module.probe.cache_clear()
    yield tmp / "a"


def test_second_build_reuses_the_timing_cache(
    engine_dir: Path, digits_saved_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine(monkeypatch, tmp_path, "11.4")
    monkeypatch.setenv("TRTCONV_TRT_TIMING_CACHE_DIR", str(engine_dir.parent / "timing"))
    api.convert(
        ConvertOptions(
            digits_saved_model, "fp32", backend="trt", output=tmp_path / "b", batch_sizes=(1,)
        )
    )
    first = manifest_of(engine_dir)["conversion_summary"]["timing_cache"]
    second = manifest_of(tmp_path / "b")["conversion_summary"]
    assert first["status"] == "new" and second["timing_cache"]["status"] == "reused"
    assert second["timing_cache_reused"] and second["timing_cache"]["path"] == first["path"]
    assert second["tensorrt_version"] == "11.4.0.106" and second["built_from"] == "fp32"


def test_validation_batches_stay_inside_the_profile(
    engine_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three samples: a batch of 3 lies outside the 8..16 profile, so it is padded to 8."""
    machine(monkeypatch, tmp_path, "11.4")
    three = ArraySet({"image": load_digits("test").x[:3]}, None, "digits")
    with open_runner(engine_dir) as runner:
        padded = run_batched(runner, three, 16, min_batch=8)
        assert padded["probabilities"].shape == (3, 10)
        with pytest.raises(Exception, match="outside the engine's profile"):
            run_batched(runner, three, 16)  # what validation did before: batch 32, unpadded
        assert set(vars(runner.last_timings)) == {
            "host_to_device_ms",
            "compute_ms",
            "device_to_host_ms",
        }


def test_runtime_only_host_runs_the_engine(
    engine_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GPU host with TensorRT but without tf2onnx/onnx runs an engine built elsewhere (here
    with cuda-python 12, as `trtconv[trt-cu12]` installs it)."""
    machine(monkeypatch, tmp_path, "11.4", cuda="12.9.10")
    real_versions = facts_module.library_versions
    monkeypatch.setattr(
        facts_module,
        "library_versions",
        lambda packages=(): {**real_versions(packages), "tf2onnx": None, "onnx": None},
    )
    facts_module.probe.cache_clear()
    images = load_digits("test").x[:8]
    with open_runner(engine_dir, RunOptions(device="tensorrt")) as runner:
        out = runner.infer({"image": images})["probabilities"]
    assert out.shape == (8, 10) and np.allclose(out.sum(axis=1), 1.0, atol=1e-4)


def test_engine_from_another_tensorrt_version_is_refused(
    engine_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine(monkeypatch, tmp_path, "10.16")
    with pytest.raises(Exception, match="built for another TensorRT version or GPU"):
        open_runner(engine_dir).activate()


def test_no_execution_context_is_one_sentence_about_gpu_memory(
    engine_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine(monkeypatch, tmp_path, "11.4", total_bytes=1 << 20)  # 1 MiB of GPU memory
    with pytest.raises(ConversionError, match=r"could not create an execution context .* MiB"):
        open_runner(engine_dir).activate()


def test_cuda_python_13_on_an_old_driver_names_the_cuda_12_extra(
    engine_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine(monkeypatch, tmp_path, "11.4", driver_ok=False)
    with pytest.raises(MissingDependencyError, match=r"trtconv\[trt-cu12\]"):
        open_runner(engine_dir).activate()
