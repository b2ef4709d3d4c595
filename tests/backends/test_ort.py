"""The ort backend on ONNX Runtime CPU: runner, offline fp32 optimisation, Q/DQ INT8."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.convert_fixtures import digits_onnx
from tests.helpers.ort_manifests import ort_manifest
from trtconv.backends.ort import convert
from trtconv.backends.tf_native import SavedModelRunner
from trtconv.core.errors import InputError, MissingDependencyError, UsageError
from trtconv.onnxlib.export import op_counts
from trtconv.onnxlib.session import CPU, OrtRunner
from trtconv.options.bench import BenchOptions
from trtconv.options.convert import ConvertOptions
from trtconv.options.validate import ValidateOptions
from trtconv.outputs.compare import run_batched
from trtconv.protocol.request import ConversionRequest

pytestmark = pytest.mark.slow  # trains digits-cnn (session fixture) and runs tf2onnx


def test_runner_reads_signature_and_matches_tensorflow(
    digits_saved_model: Path, digits_held_out: object, digits_reference: dict[str, np.ndarray]
) -> None:
    runner = OrtRunner(digits_onnx(digits_saved_model), threads=1)
    with runner:
        assert runner.session.get_providers() == [CPU]
        spec = runner.signature.inputs[0]
        assert (spec.name, spec.shape, spec.dtype) == ("image", (None, 8, 8, 1), "float32")
        outputs = run_batched(runner, digits_held_out)  # type: ignore[arg-type]
        expected = digits_reference["probabilities"]
        np.testing.assert_allclose(outputs["probabilities"], expected, atol=1e-5)
        with pytest.raises(InputError, match=r"input 'image' expects dtype float32, found float64"):
            runner.infer({"image": np.zeros((1, 8, 8, 1))})
    # Deactivated: the session is gone and the runner says so instead of crashing.
    assert runner.session is None and not runner.is_active
    with pytest.raises(RuntimeError, match="before activate"):
        runner.infer({"image": np.zeros((1, 8, 8, 1), np.float32)})


@pytest.mark.no_gpu
@pytest.mark.filterwarnings("ignore:Specified provider")
def test_runner_fails_loudly_when_a_provider_falls_back(digits_saved_model: Path) -> None:
    # onnxruntime silently drops CUDA on this machine; the runner must not.
    runner = OrtRunner(digits_onnx(digits_saved_model), providers=["CUDAExecutionProvider", CPU])
    with pytest.raises(MissingDependencyError, match=r"did not enable CUDAExecutionProvider"):
        runner.activate()


@pytest.mark.converts("ort")
def test_fp32_convert_saves_a_portable_model(
    digits_saved_model: Path, tmp_path: Path, digits_native: SavedModelRunner
) -> None:
    """Only standard ONNX operators: no CPU-provider contrib op (FusedConv) that CUDA refuses."""
    import onnx

    source = digits_onnx(digits_saved_model)
    request = ConversionRequest(
        digits_saved_model, digits_native.signature, "fp32", tmp_path, onnx_path=source
    )
    outcome = convert(request)
    assert outcome.payload == "model.onnx" and outcome.summary["providers"] == [CPU]
    assert outcome.summary["optimization_level"] == "basic"
    model = onnx.load(str(tmp_path / "model.onnx"))
    assert {node.domain for node in model.graph.node} <= {"", "ai.onnx"}
    # Constant folding and Conv+BatchNorm: no more nodes than the export.
    assert sum(op_counts(tmp_path / "model.onnx").values()) <= sum(op_counts(source).values())


@pytest.mark.no_gpu
@pytest.mark.parametrize("precision", ["tf32"])  # fp16 converts here (test_fp16_convert.py)
def test_gpu_only_precisions_need_a_gpu_provider(
    precision: str, digits_saved_model: Path, tmp_path: Path, digits_native: SavedModelRunner
) -> None:
    request = ConversionRequest(
        digits_saved_model,
        digits_native.signature,
        precision,
        tmp_path,
        onnx_path=digits_onnx(digits_saved_model),
    )
    with pytest.raises(MissingDependencyError, match=rf"{precision} needs the CUDA"):
        convert(request)
    assert list(tmp_path.iterdir()) == []


def test_device_chooses_the_providers_at_run_time(tmp_path: Path) -> None:
    """A CPU-converted artifact runs wherever --device says, with TF32 off on CUDA for fp32."""
    from trtconv.backends.ort.runner import ort_runner
    from trtconv.protocol.runner import RunOptions

    payload = tmp_path / "model.onnx"
    fp32 = ort_manifest("fp32")
    auto = ort_runner(payload, fp32, RunOptions())
    assert (auto.providers, auto.device, auto.warnings) == ([CPU], "cpu", [])
    cuda = ort_runner(payload, fp32, RunOptions(device="cuda"))
    assert cuda.providers == ["CUDAExecutionProvider", CPU] and cuda.device == "cuda"
    assert cuda.options == [{"use_tf32": "0"}, {}]
    tensorrt = ort_runner(payload, fp32, RunOptions(device="tensorrt"))
    assert tensorrt.providers[0] == "TensorrtExecutionProvider" and tensorrt.device == "tensorrt"
    int8 = ort_runner(payload, ort_manifest("int8"), RunOptions(device="cuda"))
    assert len(int8.warnings) == 1 and "dequantised float kernels" in int8.warnings[0]
    assert ort_runner(payload, ort_manifest("int8"), RunOptions(device="tensorrt")).warnings == []
    with pytest.raises(UsageError, match="Unknown device 'gpu'"):
        ort_runner(payload, fp32, RunOptions(device="gpu"))


@pytest.mark.no_gpu
@pytest.mark.filterwarnings("ignore:Specified provider")
def test_device_cuda_on_a_machine_without_it_is_exit_3(digits_saved_model: Path) -> None:
    from trtconv.backends.ort.runner import ort_runner
    from trtconv.protocol.runner import RunOptions

    runner = ort_runner(digits_onnx(digits_saved_model), None, RunOptions(device="cuda"))
    with pytest.raises(MissingDependencyError, match="did not enable CUDAExecutionProvider"):
        runner.activate()


@pytest.mark.gpu
def test_cpu_converted_fp32_artifact_benches_on_the_cuda_provider(
    digits_saved_model: Path, tmp_path: Path
) -> None:
    """Converted with the CPU provider (basic optimisations only), run on CUDA at bench time."""
    from trtconv import api

    artifact = tmp_path / "ort-fp32"
    api.convert(ConvertOptions(digits_saved_model, "fp32", backend="ort", output=artifact))
    result = api.bench(BenchOptions((artifact,), batch_sizes=(1, 8), iterations=20, device="cuda"))
    rows = [row for row in result.results if row.model == str(artifact)]
    assert rows and all(row.device == "cuda" for row in rows)
    assert api.validate(ValidateOptions(artifact, device="cuda")).passed
