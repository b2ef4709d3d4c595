"""Static Q/DQ INT8 with ONNX Runtime's quantiser on the digits model: schemes and weight range."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.convert_fixtures import digits_onnx, work_dir
from trtconv.backends.tf_native import SavedModelRunner
from trtconv.calib.readers import CALIBRATION, calibration_feed, read_model_data, whole_batches
from trtconv.onnxlib.export import op_counts
from trtconv.onnxlib.session import OrtRunner
from trtconv.outputs.compare import run_batched
from trtconv.quantize.checks import tensorrt_qdq_problems
from trtconv.quantize.qdq import QdqOptions, quantize_qdq

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # trains digits-cnn (session fixture) and runs tf2onnx


def _feed(native: SavedModelRunner, samples: int = 256) -> object:
    data = read_model_data("digits", native.signature, role=CALIBRATION, samples=samples)
    return calibration_feed(whole_batches(data, 32), 32)


def _top1(outputs: dict[str, np.ndarray]) -> np.ndarray:
    return outputs["probabilities"].argmax(axis=1)


def _int8_weights(path: Path) -> list[np.ndarray]:
    """The int8 weight tensors (rank > 1) the Q/DQ model dequantises."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    initializers = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    dequantized = [n.input[0] for n in model.graph.node if n.op_type == "DequantizeLinear"]
    return [
        initializers[name]
        for name in dequantized
        if name in initializers
        and initializers[name].dtype == np.int8
        and initializers[name].ndim > 1
    ]


def test_int8_qdq_u8s8_runs_on_cpu_and_agrees(
    digits_saved_model: Path,
    digits_native: SavedModelRunner,
    digits_held_out: object,
    digits_reference: dict[str, np.ndarray],
) -> None:
    import onnx
    from onnx import numpy_helper

    output = work_dir() / "digits.qdq.onnx"
    summary = quantize_qdq(digits_onnx(digits_saved_model), output, _feed(digits_native))
    assert summary.calibration_samples_seen == 256 and summary.scheme == "u8s8"
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
    assert softmax and summary.kept_float == [node.name for node in softmax]
    quantized_inputs = {n.input[0] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    assert not quantized_inputs & {node.output[0] for node in softmax}
    assert not list(output.parent.glob("augmented_model*.onnx"))
    with OrtRunner(output) as runner:
        outputs = run_batched(runner, digits_held_out)  # type: ignore[arg-type]
    assert (_top1(outputs) == _top1(digits_reference)).mean() >= 0.97
    # ORT's own defaults (uint8 activations, int32 bias Q/DQ) are what TensorRT refuses.
    problems = tensorrt_qdq_problems(output)
    assert any("takes int32" in p for p in problems) and any("takes uint8" in p for p in problems)


@pytest.fixture(scope="module", params=["minmax", "percentile"])
def s8s8(
    request: pytest.FixtureRequest,
    digits_saved_model: Path,
    tmp_path_factory: pytest.TempPathFactory,
    digits_native: SavedModelRunner,
) -> tuple[str, Path, object]:
    """(calibration method, the S8S8 Q/DQ model TensorRT builds from, its summary)."""
    output = tmp_path_factory.mktemp("s8s8") / "s8s8.onnx"
    options = QdqOptions(scheme="s8s8", method=request.param)
    summary = quantize_qdq(digits_onnx(digits_saved_model), output, _feed(digits_native), options)
    return request.param, output, summary


def test_int8_other_methods_and_tensorrt_scheme(s8s8: tuple[str, Path, Any]) -> None:
    import onnx
    from onnx import numpy_helper

    method, output, summary = s8s8
    assert summary.calib_method == method
    model = onnx.load(str(output))
    initializers = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    zero_points = [
        initializers[node.input[2]] for node in model.graph.node if node.op_type == "QuantizeLinear"
    ]
    # TensorRT reads only signed, symmetric Q/DQ, and dequantises int8 only (no int32 biases).
    assert zero_points and all(zp.dtype == np.int8 and not zp.any() for zp in zero_points)
    assert tensorrt_qdq_problems(output) == []


@pytest.mark.vnni  # ONNX Runtime runs S8S8 partly in float on x86 without VNNI
def test_the_tensorrt_scheme_keeps_the_decisions(
    s8s8: tuple[str, Path, Any], digits_held_out: object, digits_reference: dict[str, np.ndarray]
) -> None:
    with OrtRunner(s8s8[1]) as runner:
        outputs = run_batched(runner, digits_held_out)  # type: ignore[arg-type]
    assert (_top1(outputs) == _top1(digits_reference)).mean() >= 0.97


@pytest.mark.parametrize("reduce_range", [False, True])
def test_weight_range_in_the_model(
    reduce_range: bool,
    digits_saved_model: Path,
    tmp_path: Path,
    digits_native: SavedModelRunner,
    digits_held_out: object,
    digits_reference: dict[str, np.ndarray],
) -> None:
    """7-bit weights (|w| <= 64) cannot saturate int16 pair sums on x86 without VNNI."""
    output = tmp_path / "model.qdq.onnx"
    options = QdqOptions(reduce_range=reduce_range)
    summary = quantize_qdq(digits_onnx(digits_saved_model), output, _feed(digits_native), options)
    assert summary.reduce_range is reduce_range
    assert summary.weights.endswith("7-bit range") is reduce_range
    weights = _int8_weights(output)
    assert weights  # every conv and dense layer
    largest = max(int(np.abs(w.astype(np.int16)).max()) for w in weights)
    # Per-channel symmetric: each channel's largest weight maps to the end of the range.
    assert largest == (64 if reduce_range else 127)
    with OrtRunner(output) as runner:
        outputs = run_batched(runner, digits_held_out)  # type: ignore[arg-type]
    assert (_top1(outputs) == _top1(digits_reference)).mean() >= 0.97


def _activation_scales(path: Path) -> dict[str, float]:
    """Scale of every activation QuantizeLinear, by the tensor it quantises."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    initializers = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    return {
        node.input[0]: float(initializers[node.input[1]])
        for node in model.graph.node
        if node.op_type == "QuantizeLinear" and node.input[0] not in initializers
    }


def test_entropy_searches_thresholds_minmax_does_not(
    digits_saved_model: Path, tmp_path: Path, digits_native: SavedModelRunner
) -> None:
    """ORT's default entropy settings give one candidate, the full range: minmax, bit for bit."""
    source, feed = digits_onnx(digits_saved_model), _feed(digits_native)
    scales = {}
    for method in ("minmax", "entropy"):
        output = tmp_path / f"{method}.onnx"
        summary = quantize_qdq(source, output, feed, QdqOptions(method=method))
        scales[method] = _activation_scales(output)
    assert "193 candidate ranges" in summary.calibration
    assert scales["entropy"].keys() == scales["minmax"].keys()
    entropy, minmax = scales["entropy"], scales["minmax"]
    assert any(entropy[name] < minmax[name] for name in minmax)  # a narrower range, somewhere
    assert all(entropy[name] <= minmax[name] * (1 + 1e-6) for name in minmax)


def test_errors_name_the_users_model(digits_saved_model: Path, tmp_path: Path) -> None:
    from trtconv.core.errors import ConversionError

    def no_batches() -> Iterator[dict[str, np.ndarray]]:
        return iter([])

    with pytest.raises(ConversionError, match=r"^INT8 calibration of models/mine saw no samples"):
        source = digits_onnx(digits_saved_model)
        quantize_qdq(source, tmp_path / "q.onnx", no_batches, None, "models/mine")
    assert list(tmp_path.iterdir()) == []
