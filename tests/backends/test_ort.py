"""The ort backend on ONNX Runtime CPU: runner, offline fp32 optimisation, Q/DQ INT8."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from convert_fixtures import digits_onnx, work_dir

from trtconv.backends.base import ConversionRequest
from trtconv.backends.onnx_export import op_counts
from trtconv.backends.ort import CPU, OrtRunner, convert
from trtconv.backends.tf_native import SavedModelRunner
from trtconv.calib.readers import (
    CALIBRATION,
    VALIDATION,
    calibration_feed,
    read_model_data,
    whole_batches,
)
from trtconv.errors import InputError, MissingDependencyError
from trtconv.quantize.qdq import quantize_qdq
from trtconv.validation import run_batched

pytestmark = pytest.mark.slow  # trains digits-cnn (session fixture) and runs tf2onnx


@pytest.fixture(scope="module")
def native(digits_saved_model: Path) -> SavedModelRunner:
    runner = SavedModelRunner(digits_saved_model)
    runner.activate()
    return runner


@pytest.fixture(scope="module")
def held_out(native: SavedModelRunner) -> object:
    return read_model_data("digits", native.signature, role=VALIDATION)


@pytest.fixture(scope="module")
def reference(native: SavedModelRunner, held_out: object) -> dict[str, np.ndarray]:
    return run_batched(native, held_out)  # type: ignore[arg-type]


def _feed(native: SavedModelRunner, samples: int = 256) -> object:
    data = read_model_data("digits", native.signature, role=CALIBRATION, samples=samples)
    return calibration_feed(whole_batches(data, 32), 32)


def _top1(outputs: dict[str, np.ndarray]) -> np.ndarray:
    return outputs["probabilities"].argmax(axis=1)


def test_runner_reads_signature_and_matches_tensorflow(
    digits_saved_model: Path, held_out: object, reference: dict[str, np.ndarray]
) -> None:
    runner = OrtRunner(digits_onnx(digits_saved_model), threads=1)
    runner.activate()
    assert runner.session.get_providers() == [CPU]
    spec = runner.signature.inputs[0]
    assert (spec.name, spec.shape, spec.dtype) == ("image", (None, 8, 8, 1), "float32")
    outputs = run_batched(runner, held_out)  # type: ignore[arg-type]
    np.testing.assert_allclose(outputs["probabilities"], reference["probabilities"], atol=1e-5)
    with pytest.raises(InputError, match=r"input 'image' expects dtype float32, found float64"):
        runner.infer({"image": np.zeros((1, 8, 8, 1))})


@pytest.mark.filterwarnings("ignore:Specified provider")
def test_runner_fails_loudly_when_a_provider_falls_back(digits_saved_model: Path) -> None:
    # onnxruntime silently drops CUDA on this machine; the runner must not.
    runner = OrtRunner(digits_onnx(digits_saved_model), providers=["CUDAExecutionProvider", CPU])
    with pytest.raises(MissingDependencyError, match=r"did not enable CUDAExecutionProvider"):
        runner.activate()


def test_fp32_convert_saves_an_optimised_model(
    digits_saved_model: Path, tmp_path: Path, native: SavedModelRunner
) -> None:
    source = digits_onnx(digits_saved_model)
    request = ConversionRequest(
        digits_saved_model, native.signature, "fp32", tmp_path, onnx_path=source
    )
    outcome = convert(request)
    assert outcome.payload == "model.onnx" and outcome.summary["providers"] == [CPU]
    assert outcome.summary["optimization_level"] == "extended"
    # Conv + BatchNorm + ReLU fused: fewer nodes than the export.
    assert sum(op_counts(tmp_path / "model.onnx").values()) < sum(op_counts(source).values())


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_gpu_only_precisions_need_a_gpu_provider(
    precision: str, digits_saved_model: Path, tmp_path: Path, native: SavedModelRunner
) -> None:
    request = ConversionRequest(
        digits_saved_model,
        native.signature,
        precision,
        tmp_path,
        onnx_path=digits_onnx(digits_saved_model),
    )
    with pytest.raises(MissingDependencyError, match=rf"{precision} needs the CUDA"):
        convert(request)
    assert list(tmp_path.iterdir()) == []


def test_int8_qdq_u8s8_runs_on_cpu_and_agrees(
    digits_saved_model: Path,
    native: SavedModelRunner,
    held_out: object,
    reference: dict[str, np.ndarray],
) -> None:
    import onnx
    from onnx import numpy_helper

    output = work_dir() / "digits.qdq.onnx"
    summary = quantize_qdq(digits_onnx(digits_saved_model), output, _feed(native), "entropy")
    assert summary["calibration_samples_seen"] == 256 and summary["scheme"] == "u8s8"
    counts = op_counts(output)
    assert counts["QuantizeLinear"] > 0 and counts["DequantizeLinear"] > 0
    model = onnx.load(str(output))
    initializers = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    activation_zero_points = [
        initializers[node.input[2]] for node in model.graph.node if node.op_type == "QuantizeLinear"
    ]
    assert all(zp.dtype == np.uint8 for zp in activation_zero_points)
    assert any(array.dtype == np.int8 and array.ndim == 4 for array in initializers.values())
    # The output Softmax stays float: nothing quantises its output.
    softmax = [node for node in model.graph.node if node.op_type == "Softmax"]
    assert softmax and summary["kept_float"] == [node.name for node in softmax]
    quantized_inputs = {n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    assert not quantized_inputs & {node.output[0] for node in softmax}
    assert not list(output.parent.glob("augmented_model*.onnx"))
    runner = OrtRunner(output)
    outputs = run_batched(runner, held_out)  # type: ignore[arg-type]
    assert (_top1(outputs) == _top1(reference)).mean() >= 0.97


@pytest.mark.parametrize("method", ["minmax", "percentile"])
def test_int8_other_methods_and_tensorrt_scheme(
    method: str,
    digits_saved_model: Path,
    tmp_path: Path,
    native: SavedModelRunner,
    held_out: object,
    reference: dict[str, np.ndarray],
) -> None:
    import onnx
    from onnx import numpy_helper

    output = tmp_path / "s8s8.onnx"
    summary = quantize_qdq(digits_onnx(digits_saved_model), output, _feed(native), method, "s8s8")
    assert summary["calib_method"] == method
    model = onnx.load(str(output))
    initializers = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    zero_points = [
        initializers[node.input[2]] for node in model.graph.node if node.op_type == "QuantizeLinear"
    ]
    # TensorRT reads only signed, symmetric Q/DQ.
    assert zero_points and all(zp.dtype == np.int8 and not zp.any() for zp in zero_points)
    outputs = run_batched(OrtRunner(output), held_out)  # type: ignore[arg-type]
    assert (_top1(outputs) == _top1(reference)).mean() >= 0.97
