"""TF-TRT backend: parameters, calibration feed and error paths for real; conversion under `gpu`.

TensorFlow's own TF-TRT code runs here up to the point where it needs libnvinfer: the real
`TrtConversionParams`, the real `TrtGraphConverterV2` constructor (which fails on this machine),
and the real function TF-TRT calls with calibration and build inputs (`_convert_to_tensor` plus
`_construct_function_from_graph_def` on the frozen graph, minus the TensorRT rewrite).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.tensorflow_range import ENDED_REASON, SHIPS_TFTRT
from trtconv.backends.tftrt import converter as tftrt
from trtconv.backends.tftrt.runner import TfTrtRunner
from trtconv.calib.readers import calibration_feed
from trtconv.calib.sources import ArraySet, load_digits
from trtconv.core.errors import InputError, MissingDependencyError, UsageError
from trtconv.model.savedmodel import load_saved_model
from trtconv.protocol.request import ConversionRequest

pytestmark = pytest.mark.tensorflow

tf = pytest.importorskip("tensorflow")


class TwoInputs(tf.Module):
    """out = zeta * w - alpha: swapping the inputs changes the result."""

    def __init__(self) -> None:
        super().__init__()
        self.w = tf.Variable(3.0)

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, 4], tf.float32, name="zeta"),
            tf.TensorSpec([None, 4], tf.float32, name="alpha"),
        ]
    )
    def serve(self, zeta: Any, alpha: Any) -> dict[str, Any]:
        return {"out": zeta * self.w - alpha}


class DigitsDense(tf.Module):
    """A dense layer over 8x8x1 digits: enough graph for TF-TRT to have something to convert."""

    def __init__(self) -> None:
        super().__init__()
        rng = np.random.default_rng(0)
        self.kernel = tf.Variable(rng.normal(size=(64, 10)).astype(np.float32))

    @tf.function(input_signature=[tf.TensorSpec([None, 8, 8, 1], tf.float32, name="image")])
    def serve(self, image: Any) -> dict[str, Any]:
        flat = tf.reshape(image, [-1, 64])
        return {"probabilities": tf.nn.softmax(tf.nn.relu(tf.matmul(flat, self.kernel)))}


def save(module: tf.Module, path: Path) -> Path:
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(TwoInputs(), tmp_path_factory.mktemp("tftrt") / "two_inputs")


@pytest.fixture(scope="module")
def digits_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save(DigitsDense(), tmp_path_factory.mktemp("tftrt") / "digits_dense")


def tf_trt_callable(saved_model: Path) -> Any:
    """The function TF-TRT feeds calibration and build inputs to, built as convert() builds it
    (frozen signature rebuilt from its GraphDef), without the TensorRT rewrite."""
    from tensorflow.python.framework import convert_to_constants

    trt_convert = tftrt.trt_convert_module()
    loaded = tf.saved_model.load(str(saved_model))  # TF-TRT keeps it too: it owns the variables
    func = loaded.signatures["serving_default"]
    frozen = convert_to_constants.convert_variables_to_constants_v2(func)
    rebuilt = trt_convert._construct_function_from_graph_def(
        func, frozen.graph.as_graph_def(), frozen
    )

    def call(item: Any) -> Any:
        assert loaded is not None
        args, kwargs = trt_convert._convert_to_tensor(item)
        return rebuilt(*args, **kwargs)

    return call


# --- conversion parameters -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("precision", "mode", "calibrate"),
    [
        ("fp32", "FP32", False),
        ("tf32", "FP32", False),
        ("fp16", "FP16", False),
        ("int8", "INT8", True),
    ],
)
def test_conversion_params_are_real_trt_conversion_params(
    precision: str, mode: str, calibrate: bool
) -> None:
    trt_convert = tftrt.trt_convert_module()
    params = tftrt.conversion_params(precision)
    assert isinstance(params, trt_convert.TrtConversionParams)
    assert params.precision_mode == mode
    assert params.use_calibration is calibrate
    assert params.allow_build_at_runtime is False  # engines are prebuilt by build()
    assert params.minimum_segment_size == tftrt.MINIMUM_SEGMENT_SIZE
    trt_convert._check_conversion_params(params, is_v2=True)  # TF's own validation accepts it


def test_conversion_params_overrides_and_unknown_precision() -> None:
    params = tftrt.conversion_params(
        "fp16", max_workspace_size_bytes=1 << 28, minimum_segment_size=5
    )
    assert params.max_workspace_size_bytes == 1 << 28 and params.minimum_segment_size == 5
    with pytest.raises(UsageError):
        tftrt.conversion_params("bf16")


class RecordingConverter:
    """Stands in for TrtGraphConverterV2 (TF-TRT cannot run here): records TensorFlow's TF32
    switch when build() runs and writes what save() writes, one engine per TRTEngineOp."""

    def __init__(self) -> None:
        self.tf32_at_build: bool | None = None

    def convert(self, calibration_input_fn: Any = None) -> Any:
        graph = graph_def({"TRTEngineOp_000_000": 4}, other_ops=1)
        return type("Converted", (), {"graph": type("G", (), {"as_graph_def": lambda s: graph})()})

    def build(self, input_fn: Any) -> None:
        self.tf32_at_build = tf.config.experimental.tensor_float_32_execution_enabled()

    def save(self, path: str) -> None:
        assets = Path(path) / "assets"
        assets.mkdir(parents=True)
        (assets / "trt-serialized-engine.TRTEngineOp_000_000").write_bytes(b"engine")


@pytest.mark.parametrize(("precision", "allowed"), [("fp32", False), ("tf32", True)])
def test_conversion_sets_tf32_for_itself_and_restores_it(
    precision: str, allowed: bool, digits_model: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    """A release converts several models in one process: none may inherit another's TF32."""
    from trtconv.facts import Gpu, described

    h100 = Gpu("NVIDIA H100 80GB HBM3", (9, 0))
    machine = described(gpus=[h100], tftrt_tensorrt="8.6.1")
    monkeypatch.setattr(tftrt.registry, "facts_here", lambda deep=False: machine)
    recording = RecordingConverter()
    monkeypatch.setattr(tftrt, "make_converter", lambda request: recording)
    monkeypatch.delenv("NVIDIA_TF32_OVERRIDE", raising=False)
    tf.config.experimental.enable_tensor_float_32_execution(not allowed)
    try:
        outcome = tftrt.convert(request_for(digits_model, tmp_path / "out", precision))
        assert recording.tf32_at_build is allowed
        assert tf.config.experimental.tensor_float_32_execution_enabled() is (not allowed)
        assert "NVIDIA_TF32_OVERRIDE" not in os.environ
        assert outcome.summary["tf32_allowed"] is allowed
        assert outcome.summary["batch_range"] == [1, 8]
        assert outcome.summary["engines_built"] == 1
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(True)


# --- what TF-TRT is fed ---------------------------------------------------------------------


def test_positional_order_is_the_converted_functions_order(two_inputs: Path) -> None:
    signature = load_saved_model(two_inputs).signature
    assert tftrt.input_order(signature) == ["alpha", "zeta"]
    zeta = np.full((2, 4), 1.0, np.float32)
    alpha = np.full((2, 4), 10.0, np.float32)
    item = tftrt.as_positional({"zeta": zeta, "alpha": alpha}, signature)
    outputs = tf_trt_callable(two_inputs)(item)
    out = outputs["out"] if isinstance(outputs, dict) else outputs[0]
    np.testing.assert_allclose(out.numpy(), zeta * 3.0 - alpha)  # swapped would give 29


def test_calibration_input_fn_yields_what_tf_trt_calls_with(digits_model: Path) -> None:
    signature = load_saved_model(digits_model).signature
    digits = load_digits("train")
    data = ArraySet({"image": digits.x}, digits.labels, digits.source)
    feed = calibration_feed(data, 50)  # the reader's batches: 50, 50, ..., a short last one
    generate = tftrt.calibration_input_fn(feed, signature, batch_size=32)
    items = list(generate())
    assert len(items) == len(data) // 32  # re-cut to the largest engine batch, remainder dropped
    for item in items:
        assert isinstance(item, tuple) and len(item) == 1
        assert isinstance(item[0], tf.Tensor)
        assert item[0].dtype == tf.float32 and item[0].shape == (32, 8, 8, 1)
    np.testing.assert_array_equal(items[1][0].numpy(), data.x[32:64])  # order kept across cuts
    assert len(list(generate())) == len(items)  # a fresh pass each call (TF-TRT may re-read)
    call = tf_trt_callable(digits_model)
    native = load_saved_model(digits_model).function
    got = call(items[0])
    got = got["probabilities"] if isinstance(got, dict) else got[0]
    np.testing.assert_allclose(got.numpy(), native(image=items[0][0])["probabilities"].numpy())


def test_calibration_with_fewer_samples_than_the_largest_batch(digits_model: Path) -> None:
    """TF-TRT got zero calibration batches and only warned; now one batch inside the profile."""
    signature = load_saved_model(digits_model).signature
    data = ArraySet({"image": load_digits("train").x[:20]}, None, "digits")
    generate = tftrt.calibration_input_fn(calibration_feed(data, 16), signature, 32, min_batch=8)
    items = list(generate())
    assert [item[0].shape[0] for item in items] == [20]
    np.testing.assert_array_equal(items[0][0].numpy(), data.x)
    too_few = tftrt.calibration_input_fn(calibration_feed(data, 16), signature, 64, min_batch=32)
    with pytest.raises(UsageError, match=r"needs at least 32 samples .* holds 20"):
        list(too_few())


def test_calibration_feed_with_wrong_dtype_is_one_sentence(digits_model: Path) -> None:
    signature = load_saved_model(digits_model).signature
    data = ArraySet({"image": load_digits("train").x.astype(np.float64)}, None, "digits")
    generate = tftrt.calibration_input_fn(calibration_feed(data, 16), signature, 16)
    with pytest.raises(InputError, match="'image' has dtype float64; the model expects float32"):
        next(generate())


def test_build_feeds_cover_each_batch_size(digits_model: Path) -> None:
    signature = load_saved_model(digits_model).signature
    feeds = tftrt.build_feeds(signature, (8, 1, 32, 8))
    assert [f["image"].shape for f in feeds] == [(1, 8, 8, 1), (8, 8, 8, 1), (32, 8, 8, 1)]
    sample = {"image": load_digits("test").x[:5]}
    tiled = tftrt.build_feeds(signature, (12,), sample)[0]["image"]
    assert tiled.shape == (12, 8, 8, 1)
    np.testing.assert_array_equal(tiled[5:10], sample["image"])
    call = tf_trt_callable(digits_model)
    for feed in feeds:  # each build input runs through the function TF-TRT builds with
        call(tftrt.as_positional(feed, signature))


def test_build_feeds_refuse_unknown_dimensions() -> None:
    from trtconv.core.model_io import ModelSignature, TensorSpec

    signature = ModelSignature((TensorSpec("x", (None, None, 3), "float32"),), ())
    with pytest.raises(InputError, match="dynamic dimensions"):
        tftrt.build_feeds(signature, (1,))


# --- conversion summary ----------------------------------------------------------------------


def graph_def(engines: dict[str, int], other_ops: int) -> Any:
    """A GraphDef shaped like TF-TRT's output: TRTEngineOps plus their native segments."""
    graph = tf.compat.v1.GraphDef()
    for index in range(other_ops):
        graph.node.add(name=f"op{index}", op="Identity")
    for name, size in engines.items():
        graph.node.add(name=name, op=tftrt.TRT_ENGINE_OP)
        function = graph.library.function.add()
        function.signature.name = f"{name}_native_segment"
        for index in range(size):
            function.node_def.add(name=f"{name}/n{index}", op="MatMul")
    return graph


def test_summary_counts_engines_and_converted_ops() -> None:
    summary = tftrt.summarize_graph(graph_def({"TRTEngineOp_000_000": 5}, other_ops=2))
    assert summary.to_json() == {
        "trt_engine_ops": 1,
        "ops_converted": 5,
        "ops_total": 7,
        "percent_ops_converted": 71.43,
    }


def test_an_engine_that_failed_to_build_is_not_counted_as_converted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """TF-TRT runs a failed engine's native segment and only logs it; save() writes no engine."""
    assets = tmp_path / "saved_model" / "assets"
    assets.mkdir(parents=True)
    (assets / "trt-serialized-engine.TRTEngineOp_000_000").write_bytes(b"engine")
    (assets / "trt-serialized-engine.TRTEngineOp_000_001").write_bytes(b"")  # nothing built
    built = tftrt.engines_written(tmp_path / "saved_model")
    assert built == {"TRTEngineOp_000_000"}
    graph = graph_def({"TRTEngineOp_000_000": 5, "TRTEngineOp_000_001": 3}, other_ops=2)
    summary = tftrt.summarize_graph(graph, built)
    assert list(summary.to_json())[-2:] == ["engines_built", "engines_failed"]
    assert summary.ops_converted == 5 and summary.ops_total == 10
    assert summary.percent_ops_converted == 50.0
    assert summary.engines_built == 1 and summary.engines_failed == ["TRTEngineOp_000_001"]
    request = ConversionRequest(Path("m"), None, "fp32", Path("o"))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="trtconv"):
        tftrt._warn_if_engines_failed(summary, request)
    assert "built 1 of 2 engine(s)" in caplog.text and "TRTEngineOp_000_001" in caplog.text


def test_nothing_converted_is_a_loud_warning(caplog: pytest.LogCaptureFixture) -> None:
    summary = tftrt.summarize_graph(graph_def({}, other_ops=4))
    assert summary.trt_engine_ops == 0 and summary.percent_ops_converted == 0.0
    request = ConversionRequest(Path("m"), None, "fp32", Path("o"))  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="trtconv"):
        tftrt._warn_if_nothing_converted(summary, request)
    assert "converted NOTHING" in caplog.text


# --- on this machine: exit 3 with the real cause ---------------------------------------------


def request_for(saved_model: Path, output: Path, precision: str = "fp16") -> ConversionRequest:
    signature = load_saved_model(saved_model).signature
    output.mkdir(exist_ok=True)
    return ConversionRequest(saved_model, signature, precision, output, batch_sizes=(1, 8))


@pytest.mark.no_gpu
def test_convert_here_is_exit_3_and_writes_nothing(digits_model: Path, tmp_path: Path) -> None:
    request = request_for(digits_model, tmp_path / "staging")
    with pytest.raises(MissingDependencyError) as caught:
        tftrt.convert(request)
    assert caught.value.exit_code == 3
    if SHIPS_TFTRT:
        assert "libnvinfer.so.8.6.1" in str(caught.value)
        assert "LD_LIBRARY_PATH" in str(caught.value) and "NGC" in str(caught.value)
    else:  # one reason, and the backend that builds TensorRT engines instead
        assert ENDED_REASON in str(caught.value) and "--backend trt" in str(caught.value)
        assert "libnvinfer" not in str(caught.value)
    assert list(request.output_dir.iterdir()) == []


@pytest.mark.no_gpu
def test_tensorflows_misleading_error_becomes_the_real_cause(
    digits_model: Path, tmp_path: Path
) -> None:
    """The real TrtGraphConverterV2 says 'not built with TensorRT support' in this CUDA build."""
    with pytest.raises(MissingDependencyError) as caught:
        tftrt.make_converter(request_for(digits_model, tmp_path / "staging"))
    assert "not been built with TensorRT" in str(caught.value.__cause__)
    real_cause = "libnvinfer.so.8.6.1 cannot be loaded" if SHIPS_TFTRT else ENDED_REASON
    assert real_cause in str(caught.value)


@pytest.mark.no_gpu
def test_runner_here_is_exit_3(digits_model: Path) -> None:
    with pytest.raises(MissingDependencyError):
        TfTrtRunner(digits_model).activate()


# --- end to end on a GPU with TensorRT 8.6 ---------------------------------------------------


@pytest.mark.gpu
@pytest.mark.converts("tftrt")
@pytest.mark.parametrize("precision", ["fp32", "fp16", "int8"])
def test_convert_and_run_on_gpu(digits_model: Path, tmp_path: Path, precision: str) -> None:
    digits = load_digits("train")
    data = ArraySet({"image": digits.x[:256]}, None, "digits")
    request = request_for(digits_model, tmp_path / "artifact", precision)
    request.calibration = calibration_feed(data, 32)
    outcome = tftrt.convert(request)
    assert outcome.payload == "saved_model"
    assert outcome.summary["trt_engine_ops"] >= 1
    images = load_digits("test").x[:8]
    with TfTrtRunner(request.output_dir / outcome.payload, precision) as runner:
        got = runner.infer({"image": images})["probabilities"]
    want = load_saved_model(digits_model).function(image=images)["probabilities"].numpy()
    tolerance = {"fp32": 1e-4, "fp16": 2e-2, "int8": 1e-1}[precision]
    np.testing.assert_allclose(got, want, atol=tolerance)
