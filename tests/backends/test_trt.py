"""TensorRT backend: built and run through the strict stand-ins of TensorRT 10 and 11 here
(tests/helpers/standins), end to end on a real GPU under `gpu`.

The stand-ins hold only the names the real bindings of each version define, so a call the real
version lacks fails here as it would there (TensorRT 11 has no BuilderFlag.FP16).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.standins import (
    SUPPORTED_TRT,
    TRT_VERSIONS,
    GpuStandins,
    gpu_machine,
    gpu_standins,
)
from trtconv.backends.trt import builder as trt_builder
from trtconv.backends.trt import converter as trt_converter
from trtconv.backends.trt.runner import TrtRunner
from trtconv.core.errors import ConversionError, InputError, MissingDependencyError, UsageError
from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.protocol.request import ConversionRequest

SIGNATURE = ModelSignature(
    (TensorSpec("image", (None, 8, 8, 1), "float32"),),
    (TensorSpec("probabilities", (None, 10), "float32"),),
)


@pytest.fixture(params=TRT_VERSIONS)
def standins(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> GpuStandins:
    """The strict TensorRT stand-in of each version (TRT_VERSIONS) with its fake GPU, installed."""
    found = gpu_standins(request.param)
    found.install(monkeypatch)
    return found


def network_of(trt: Any, tmp_path: Path) -> tuple[Any, Any, Any]:
    """(builder, network, parser) of a parsed [batch, 8] -> Relu model."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["image"], ["out"])],
        "g",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 8])],
    )
    onnx.save(helper.make_model(graph), str(tmp_path / "relu.onnx"))
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network, parser = trt_builder.parse_onnx(trt, builder, logger, tmp_path / "relu.onnx")
    return builder, network, parser


# --- build plans: TensorRT 10 flags, TensorRT 11 strong typing ------------------------------


@pytest.mark.parametrize(
    ("major", "precision", "source", "set_flags", "cleared"),
    [
        (10, "fp32", "fp32", (), ("TF32",)),  # TF32 is on by default: fp32 must clear it
        (10, "tf32", "fp32", ("TF32",), ()),
        (10, "fp16", "fp32", ("FP16",), ()),
        (10, "int8", "qdq", ("INT8", "FP16"), ()),  # unquantised layers may use fp16
        (11, "fp32", "fp32", (), ("TF32",)),
        (11, "tf32", "fp32", ("TF32",), ()),
        (11, "fp16", "fp16", (), ()),  # no FP16 flag exists: the fp16 ONNX carries the types
        (11, "int8", "qdq", (), ()),
    ],
)
def test_build_plans(
    major: int, precision: str, source: str, set_flags: tuple[str, ...], cleared: tuple[str, ...]
) -> None:
    plan = trt_builder.build_plan(major, precision)
    assert (plan.source, plan.set_flags, plan.clear_flags) == (source, set_flags, cleared)
    assert plan.strongly_typed is (major >= 11)


def test_tensorrt_11_has_no_precision_flag_to_set(tmp_path: Path) -> None:
    """`pip install tensorrt` gives 11: the TensorRT 10 way of asking for fp16 crashes there."""
    trt = gpu_standins("11.4").tensorrt
    builder, network, _ = network_of(trt, tmp_path)
    shapes = trt_builder.profile_shapes(trt_builder.network_inputs(network), (1, 8))
    with pytest.raises(AttributeError):
        trt_builder.configure_builder(trt, builder, trt_builder.build_plan(10, "fp16"), shapes)
    config = trt_builder.configure_builder(trt, builder, trt_builder.build_plan(11, "fp16"), shapes)
    assert builder.build_serialized_network(network, config) is not None


def test_flags_and_profile_reach_the_builder(standins: GpuStandins, tmp_path: Path) -> None:
    trt = standins.tensorrt
    builder, network, _ = network_of(trt, tmp_path)
    shapes = trt_builder.profile_shapes(trt_builder.network_inputs(network), (8, 1, 32))
    assert shapes == {"image": ((1, 8), (32, 8), (32, 8))}
    major = trt_builder.tensorrt_major(trt)
    for precision in ("fp32", "tf32", "fp16"):
        plan = trt_builder.build_plan(major, precision)
        config = trt_builder.configure_builder(trt, builder, plan, shapes)
        flags = {f.name for f in trt.BuilderFlag if config.get_flag(f)}
        assert ("TF32" in flags) is (precision != "fp32")
        assert ("FP16" in flags) is (precision == "fp16" and major == 10)
        assert config.get_memory_pool_limit(trt.MemoryPoolType.WORKSPACE) == 4 << 30
        assert builder.build_serialized_network(network, config) is not None


def test_timing_cache_reused_only_when_tensorrt_accepts_it(
    standins: GpuStandins, tmp_path: Path
) -> None:
    trt = standins.tensorrt
    builder = trt.Builder(trt.Logger())
    path = tmp_path / "cache"
    config = builder.create_builder_config()
    cache, use = trt_builder.attach_timing_cache(config, path)
    assert use.status == "new"
    path.write_bytes(bytes(cache.serialize()))
    _, use = trt_builder.attach_timing_cache(builder.create_builder_config(), path)
    assert use.status == "reused"
    # The same TensorRT on another GPU: set_timing_cache refuses it.
    other = gpu_standins(".".join(trt.__version__.split(".")[:2]), name="NVIDIA A100-SXM4-80GB")
    other_config = other.tensorrt.Builder(other.tensorrt.Logger()).create_builder_config()
    _, use = trt_builder.attach_timing_cache(other_config, path)
    assert (use.status, use.reason) == ("rejected", "made on another GPU")
    assert other_config.get_timing_cache() is not None  # the build still gets an empty cache
    # Another TensorRT version cannot read it at all.
    newer = gpu_standins("11.4" if trt.__version__.startswith("10") else "10.16")
    newer_config = newer.tensorrt.Builder(newer.tensorrt.Logger()).create_builder_config()
    _, use = trt_builder.attach_timing_cache(newer_config, path)
    assert (use.status, use.reason) == ("rejected", "not readable by this TensorRT version")


def test_timing_cache_is_kept_per_tensorrt_version_and_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trtconv.facts import Gpu

    monkeypatch.setenv("TRTCONV_TRT_TIMING_CACHE_DIR", str(tmp_path))
    h100 = Gpu("NVIDIA H100 80GB HBM3", (9, 0))
    paths = {
        trt_builder.timing_cache_path("10.16.1", h100),
        trt_builder.timing_cache_path("11.4.0", h100),
        trt_builder.timing_cache_path("11.4.0", Gpu("NVIDIA L4", (8, 9))),
    }
    assert len(paths) == 3 and all(p.parent == tmp_path for p in paths)
    assert trt_builder.timing_cache_path("11.4.0", h100).name == (
        "tensorrt-11.4.0-nvidia-h100-80gb-hbm3-sm90.cache"
    )


def test_profile_shapes_from_a_signature_with_several_inputs() -> None:
    shapes = trt_builder.profile_shapes([("a", (-1, 3)), ("b", (None, 2, 2))], (4,))
    assert shapes == {"a": ((4, 3), (4, 3), (4, 3)), "b": ((4, 2, 2), (4, 2, 2), (4, 2, 2))}


def test_profile_shapes_refuse_what_tensorrt_cannot_build() -> None:
    with pytest.raises(InputError, match="dynamic dimensions"):
        trt_builder.profile_shapes([("image", (-1, -1, -1, 3))], (1,))
    with pytest.raises(InputError, match="fixed batch of 1"):
        trt_builder.profile_shapes([("image", (1, 8, 8, 1))], (1, 8))
    with pytest.raises(UsageError):
        trt_builder.profile_shapes([("image", (-1, 8))], ())
    with pytest.raises(UsageError):
        trt_builder.build_plan(11, "bf16")


def test_source_onnx_is_the_qdq_model_for_int8_and_an_fp16_copy_on_11(
    tmp_path: Path, digits_saved_model: Path
) -> None:
    import onnx

    from tests.helpers.convert_fixtures import digits_onnx
    from trtconv.calib.readers import calibration_feed
    from trtconv.calib.sources import ArraySet, load_digits

    export = digits_onnx(digits_saved_model)
    request = ConversionRequest(tmp_path, SIGNATURE, "int8", tmp_path, onnx_path=export)
    with pytest.raises(ConversionError, match="calibration data"):  # int8 quantises the export
        trt_converter.source_onnx(request, trt_builder.build_plan(11, "int8"), tmp_path)
    fp32, none = trt_converter.source_onnx(request, trt_builder.build_plan(10, "fp16"), tmp_path)
    assert fp32 == export and none is None
    with pytest.raises(ConversionError, match="calibration data"):  # fp16 measures on it
        trt_converter.source_onnx(request, trt_builder.build_plan(11, "fp16"), tmp_path)
    digits = ArraySet({"image": load_digits("train").x}, None, "digits")
    request.calibration = calibration_feed(digits, 32)
    fp16, block = trt_converter.source_onnx(request, trt_builder.build_plan(11, "fp16"), tmp_path)
    assert block is not None and block.to_json()["kept_float32"] == []  # the fp16 record
    model = onnx.load(str(fp16))
    floats = {i.data_type for i in model.graph.initializer if i.data_type in (1, 10)}
    assert floats == {10}  # float16 weights
    assert [v.type.tensor_type.elem_type for v in model.graph.input] == [1]  # float32 inputs


def test_parser_errors_are_reported(standins: GpuStandins, tmp_path: Path) -> None:
    """TensorRT's ONNX parser refuses an int32 (bias) DequantizeLinear; every error is named."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("DequantizeLinear", ["b", "s"], ["out"], name="dq_bias")]
    initializers = [
        numpy_helper.from_array(np.zeros(8, np.int32), "b"),
        numpy_helper.from_array(np.array(0.5, np.float32), "s"),
    ]
    graph = helper.make_graph(
        nodes, "g", [], [helper.make_tensor_value_info("out", TensorProto.FLOAT, [8])], initializers
    )
    onnx.save(helper.make_model(graph), str(tmp_path / "bias.onnx"))
    trt = standins.tensorrt
    builder = trt.Builder(trt.Logger())
    with pytest.raises(ConversionError, match=r"dq_bias.*INT8, FP8, INT4 or FP4, found INT32"):
        trt_builder.parse_onnx(trt, builder, trt.Logger(), tmp_path / "bias.onnx")


# --- trtconv's converter and runner on every supported TensorRT -------------------------------

RELU = ModelSignature(
    (TensorSpec("image", (None, 8), "float32"),), (TensorSpec("out", (None, 8), "float32"),)
)


@pytest.fixture
def gpu_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """`gpu_host(version, cuda="13.4.4", **gpu)`: this process as a GPU machine with the stand-ins
    (trtconv's facts probe sees them); the cached facts are forgotten afterwards."""
    from trtconv import facts

    yield lambda *args, **kwargs: gpu_machine(monkeypatch, tmp_path, *args, **kwargs)
    facts.probe.cache_clear()


def relu_request(tmp_path: Path, precision: str = "fp32") -> ConversionRequest:
    """A conversion request for the [batch, 8] -> Relu ONNX model, into tmp_path/artifact."""
    network_of(gpu_standins().tensorrt, tmp_path)  # writes tmp_path/relu.onnx
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    return ConversionRequest(
        tmp_path, RELU, precision, artifact, batch_sizes=(1, 8), onnx_path=tmp_path / "relu.onnx"
    )


@pytest.mark.parametrize("version", SUPPORTED_TRT)
def test_build_and_run_on_every_supported_tensorrt(
    version: str, gpu_host: Any, tmp_path: Path
) -> None:
    """The strict stand-in of each supported version (from its real bindings' names): a name
    trtconv calls that the version lacks raises AttributeError here."""
    standins = gpu_host(version, cuda="12.9.10" if version == "10.0" else "13.4.4")
    request = relu_request(tmp_path, "tf32")
    outcome = trt_converter.convert(request)
    assert outcome.summary["tensorrt_version"] == standins.tensorrt.__version__
    x = np.array([[-1, 2, -3, 4, -5, 6, -7, 8]] * 3, np.float32)
    with TrtRunner(request.output_dir / outcome.payload, RELU, "tf32") as runner:
        np.testing.assert_array_equal(runner.infer({"image": x})["out"], np.maximum(x, 0))
    assert standins.gpu.launches == 1


@pytest.mark.parametrize(
    ("version", "cuda", "stops_at"),
    [
        ("11.4", "13.4.4", "CUDA call cudaGetDeviceCount"),  # cuda-python 13 refuses at once
        ("11.4", "12.9.10", "could not create a builder"),  # cuda-python 12 runs; TensorRT not
        ("10.16", "12.9.10", "could not create a builder"),
    ],
)
def test_a_driver_older_than_r580_is_exit_3_with_the_fix(
    version: str, cuda: str, stops_at: str, gpu_host: Any, tmp_path: Path
) -> None:
    """TensorRT for CUDA 13 on an older driver: trt.Builder raises pybind11's "factory function
    returned nullptr" TypeError, which was an internal error; now the runner's sentence."""
    gpu_host(version, cuda=cuda, driver_ok=False)
    with pytest.raises(MissingDependencyError) as caught:
        trt_converter.convert(relu_request(tmp_path))
    message = str(caught.value)
    assert caught.value.exit_code == 3 and stops_at in message
    assert "R580" in message and "pip install 'trtconv[trt-cu12]'" in message
    assert list((tmp_path / "artifact").iterdir()) == []


def test_tensorrt_for_cuda_12_builds_on_an_older_driver(gpu_host: Any, tmp_path: Path) -> None:
    gpu_host("10.0", cuda="12.9.10", driver_ok=False)  # tensorrt-cu12 with cuda-python 12
    assert trt_converter.convert(relu_request(tmp_path)).summary["layers"] == 1


# --- without TensorRT ------------------------------------------------------------------------


def test_module_imports_without_tensorrt() -> None:
    code = (
        "import sys; sys.modules['tensorrt'] = None; sys.modules['cuda'] = None\n"
        "import trtconv.backends.trt\n"
        "print('tensorflow' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


@pytest.mark.no_gpu
def test_convert_here_is_exit_3_naming_the_extra_and_the_gpu(tmp_path: Path) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    request = ConversionRequest(
        tmp_path, SIGNATURE, "fp16", staging, (1, 8), onnx_path=tmp_path / "model.onnx"
    )
    with pytest.raises(MissingDependencyError) as caught:
        trt_converter.convert(request)
    assert caught.value.exit_code == 3
    assert "pip install 'trtconv[trt]'" in str(caught.value)
    assert "GPU" in str(caught.value)
    assert list(staging.iterdir()) == []


@pytest.mark.no_gpu
def test_runner_here_is_exit_3(tmp_path: Path) -> None:
    (tmp_path / "model.plan").write_bytes(b"not an engine")
    with pytest.raises(MissingDependencyError):
        TrtRunner(tmp_path / "model.plan", SIGNATURE).activate()


# --- end to end on a GPU with TensorRT >= 10 --------------------------------------------------


@pytest.mark.gpu
@pytest.mark.converts("trt")
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_build_and_run_engine_on_gpu(
    digits_saved_model: Path, tmp_path: Path, precision: str
) -> None:
    from tests.helpers.convert_fixtures import digits_onnx
    from trtconv.calib.sources import load_digits
    from trtconv.model.savedmodel import load_saved_model

    loaded = load_saved_model(digits_saved_model)
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    request = ConversionRequest(
        digits_saved_model,
        loaded.signature,
        precision,
        artifact,
        (1, 8, 32),
        onnx_path=digits_onnx(digits_saved_model),
    )
    outcome = trt_converter.convert(request)
    assert (artifact / "model.plan").stat().st_size > 0
    assert (artifact / "timing.cache").stat().st_size > 0
    assert outcome.summary["layers"] > 0
    name = loaded.signature.input_names[0]
    images = load_digits("test").x[:8]
    with TrtRunner(artifact / outcome.payload, loaded.signature, precision) as runner:
        got = runner.infer({name: images})
        timings = runner.last_timings
    want = {k: v.numpy() for k, v in loaded.function(**{name: images}).items()}
    for key, value in want.items():
        np.testing.assert_allclose(got[key], value, atol=1e-3 if precision == "fp32" else 2e-2)
    assert timings is not None and timings.compute_ms > 0 and timings.transfer_ms > 0
