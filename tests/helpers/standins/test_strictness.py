"""The stand-ins hold only what the real bindings define, with the real parameter names."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from . import CUDA_VERSIONS, SUPPORTED_TRT, gpu_standins
from .cuda_runtime import cuda_names
from .tensorrt_api import IMPLEMENTED, public_names, trt_names


def hidden(cls: type, name: str) -> bool:
    """True when the stand-in class answers `name` with AttributeError (absent in its version)."""
    value = inspect.getattr_static(cls, name, None)
    return isinstance(value, property) and value.fget is not None and value.fget.__name__ == "fail"


@pytest.mark.parametrize("version", SUPPORTED_TRT)
def test_tensorrt_classes_hold_only_real_names(version: str) -> None:
    real = trt_names(version)["classes"]
    module = gpu_standins(version).tensorrt
    for impl in IMPLEMENTED:
        strict = getattr(module, impl.__name__)
        reachable = {n for n in public_names(impl) if not hidden(strict, n)}
        extra = {n for n in reachable if n not in real[impl.__name__]}
        assert not extra, f"{impl.__name__} on {version} defines {extra} the real one lacks"


def test_every_stand_in_name_exists_in_some_real_version() -> None:
    tables = [trt_names(v)["classes"] for v in SUPPORTED_TRT]
    for impl in IMPLEMENTED:
        invented = {n for n in public_names(impl) if all(n not in t[impl.__name__] for t in tables)}
        assert not invented, f"{impl.__name__} invents {invented}"


@pytest.mark.parametrize("version", SUPPORTED_TRT)
def test_tensorrt_parameter_names_match_the_binding(version: str) -> None:
    real = trt_names(version)["classes"]
    for impl in IMPLEMENTED:
        for name in public_names(impl) & set(real[impl.__name__]):
            value = vars(impl)[name]
            want = real[impl.__name__][name]
            if not callable(value) or not want or name.startswith("__"):
                continue
            got = [p for p in inspect.signature(value).parameters if p != "self"]
            assert got == want[: len(got)] and set(got) <= set(want), (impl.__name__, name, got)


@pytest.mark.parametrize("version", SUPPORTED_TRT)
def test_tensorrt_module_and_enums_are_the_real_ones(version: str) -> None:
    names = trt_names(version)
    module = gpu_standins(version).tensorrt
    public = {n for n in vars(module) if not n.startswith("_")}
    assert public <= set(names["module"]), public - set(names["module"])
    for enum_name, members in names["enums"].items():
        if "." in enum_name:
            continue
        made = getattr(module, enum_name)
        assert set(made.__members__) == set(members)
        for member, value in members.items():
            if value is not None:
                assert int(made[member]) == value


def test_tensorrt_11_has_no_precision_flags_and_10_has_them() -> None:
    trt10, trt11 = gpu_standins("10.16").tensorrt, gpu_standins("11.4").tensorrt
    assert {"FP16", "INT8"} <= set(trt10.BuilderFlag.__members__)
    with pytest.raises(AttributeError):
        trt11.BuilderFlag.FP16  # noqa: B018
    assert int(trt10.NetworkDefinitionCreationFlag.STRONGLY_TYPED) == 1
    assert int(trt11.NetworkDefinitionCreationFlag.STRONGLY_TYPED) == 0


def test_instances_refuse_attributes_the_real_class_lacks() -> None:
    trt = gpu_standins("10.16").tensorrt
    config = trt.Builder(trt.Logger(trt.Logger.WARNING)).create_builder_config()
    with pytest.raises(AttributeError):
        config.max_workspace_size = 1 << 30  # removed in TensorRT 10
    trt11 = gpu_standins("11.4").tensorrt
    config11 = trt11.Builder(trt11.Logger()).create_builder_config()
    with pytest.raises(AttributeError):
        config11.int8_calibrator = object()  # removed in TensorRT 11


@pytest.mark.parametrize("version", CUDA_VERSIONS)
def test_cuda_runtime_holds_only_real_functions_with_real_parameters(version: str) -> None:
    real = cuda_names(version)
    module = gpu_standins(cuda_version=version).cudart
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name)
        if isinstance(value, type):
            assert name in real["types"] or name in real["enums"], name
            continue
        assert name in real["functions"], name
        got = list(inspect.signature(value).parameters)
        assert got == real["functions"][name], (name, got)
    for member in module.cudaError_t:
        assert member.name in real["enums"]["cudaError_t"]


def test_name_lists_record_their_source() -> None:
    for path in (Path(__file__).parent / "names").glob("*.json"):
        source = json.loads(path.read_text())["source"]
        assert source.get("version"), path
    for version in SUPPORTED_TRT:
        source = trt_names(version)["source"]
        assert source["version"].startswith(f"{version}.")
        assert source["wheel"].endswith(".whl") and len(source["sha256"]) == 64
        assert source["generated_by"] == "tests/helpers/standins/generate_names.py"


def test_what_the_old_source_extracted_lists_had_wrong() -> None:
    """The lists read from NVIDIA's pybind11 sources had three enum values and one method that
    the real wheels do not: the generated lists have the wheels' own."""
    assert trt_names("10.16")["enums"]["BuilderFlag"]["WEIGHTLESS"] == 19  # was 20
    for version in ("10.16", "11.4"):
        names = trt_names(version)
        assert names["enums"]["ErrorCodeTRT"]["INTERNAL_ERROR"] == 2  # was 1
        assert names["enums"]["PluginCreatorVersion"]["V1_PYTHON"] == 64  # was 1
        assert "serialize" not in names["classes"]["INetworkDefinition"]  # was listed
    trt = gpu_standins("10.16").tensorrt
    assert int(trt.BuilderFlag.WEIGHTLESS) == 19 and int(trt.ErrorCodeTRT.INTERNAL_ERROR) == 2


def test_an_engine_round_trip_through_the_stand_ins(tmp_path: Path) -> None:
    """Parse, build, deserialize and execute a tiny ONNX via device memory."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    standins = gpu_standins("11.4")
    trt, rt = standins.tensorrt, standins.cudart
    builder = trt.Builder(trt.Logger())
    network = builder.create_network(0)
    assert trt.OnnxParser(network, trt.Logger()).parse_from_file(str(tmp_path / "m.onnx"))
    profile = builder.create_optimization_profile()
    profile.set_shape("x", (1, 3), (4, 3), (4, 3))
    config = builder.create_builder_config()
    config.add_optimization_profile(profile)
    engine = trt.Runtime(trt.Logger()).deserialize_cuda_engine(
        builder.build_serialized_network(network, config)
    )
    context = engine.create_execution_context()
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    y = np.empty_like(x)
    _, d_x = rt.cudaMalloc(x.nbytes)
    _, d_y = rt.cudaMalloc(y.nbytes)
    _, stream = rt.cudaStreamCreate()
    rt.cudaMemcpyAsync(
        d_x, x.ctypes.data, x.nbytes, rt.cudaMemcpyKind.cudaMemcpyHostToDevice, stream
    )
    assert context.set_input_shape("x", x.shape)
    assert not context.set_input_shape("x", (8, 3))  # outside the profile
    context.set_tensor_address("x", d_x)
    context.set_tensor_address("y", d_y)
    assert context.execute_async_v3(int(stream))
    rt.cudaMemcpyAsync(
        y.ctypes.data, d_y, y.nbytes, rt.cudaMemcpyKind.cudaMemcpyDeviceToHost, stream
    )
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    wrong = rt.cudaMemcpyAsync(d_x, d_y, 4, rt.cudaMemcpyKind.cudaMemcpyHostToDevice, stream)
    assert wrong[0] != rt.cudaError_t.cudaSuccess  # a device pointer passed as host memory
