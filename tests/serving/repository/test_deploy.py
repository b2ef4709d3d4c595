"""`trtconv deploy`: Triton repositories from real artifacts, parsed with Triton's own
ModelConfig protobuf and checked against the payload each model loads."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.serving_fixtures import artifact
from tests.helpers.user_model_fixtures import fixed_batch_model
from trtconv.cli import main
from trtconv.measure.bench_result import BenchRow
from trtconv.measure.server_bench_result import ServerBenchResult, ServerRow
from trtconv.serving.repository.deploy import batching_for, describe
from trtconv.serving.repository.triton_config import TRITON_TYPES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # converts a small Keras model three times (about a minute)

# ONNX TensorProto element types and OpenVINO element type names -> numpy dtype names.
ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 10: "float16"}
OV_TYPES = {"f32": "float32", "f16": "float16", "i64": "int64", "i32": "int32", "u8": "uint8"}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI in-process; (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    out, err = capsys.readouterr()
    return int(stopped.value.code or 0), out, err


def parse_config(path: Path) -> Any:
    """config.pbtxt parsed by Triton's ModelConfig protobuf (raises on anything it rejects)."""
    from google.protobuf import text_format

    model_config_pb2 = pytest.importorskip(
        "tritonclient.grpc.model_config_pb2", reason="tritonclient[grpc] is not installed"
    )
    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


def config_tensors(tensors: Any, config: Any) -> list[tuple[str, str, list[int]]]:
    """(name, numpy dtype, full shape with -1 for dynamic) for the config's tensors."""
    from tritonclient.grpc import model_config_pb2

    dtypes = {triton: numpy for numpy, triton in TRITON_TYPES.items()}
    batch = [-1] if config.max_batch_size > 0 else []
    return [
        (t.name, dtypes[model_config_pb2.DataType.Name(t.data_type)], [*batch, *t.dims])
        for t in tensors
    ]


def onnx_tensors(path: Path) -> tuple[list[Any], list[Any]]:
    import onnx

    graph = onnx.load(str(path)).graph

    def describe(value: Any) -> tuple[str, str, list[int]]:
        kind = value.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in kind.shape.dim]
        return value.name, ONNX_TYPES[kind.elem_type], dims

    return [describe(v) for v in graph.input], [describe(v) for v in graph.output]


def ir_tensors(path: Path) -> tuple[list[Any], list[Any]]:
    import openvino as ov

    model = ov.Core().read_model(str(path))

    def describe(port: Any) -> tuple[str, str, list[int]]:
        dims = [d.get_length() if d.is_static else -1 for d in port.get_partial_shape()]
        return port.get_any_name(), OV_TYPES[port.get_element_type().get_type_name()], dims

    return [describe(p) for p in model.inputs], [describe(p) for p in model.outputs]


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ort fp32, ort int8 and openvino fp32 artifacts of one small CNN deployed together."""
    output = tmp_path_factory.mktemp("deploy") / "repo"
    models = [
        str(artifact(b, p)) for b, p in (("ort", "fp32"), ("ort", "int8"), ("openvino", "fp32"))
    ]
    argv = ["deploy", *models, "--output", str(output), "--threads", "2", "--json"]
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code in (0, None)
    return output


def test_configs_parse_as_triton_model_configs_and_match_the_payloads(
    repository: Path,
) -> None:
    output = repository
    expected = {
        "serving-ort-fp32": ("onnxruntime", "model.onnx", onnx_tensors),
        "serving-ort-int8": ("onnxruntime", "model.onnx", onnx_tensors),
        "serving-openvino-fp32": ("openvino", "model.xml", ir_tensors),
    }
    assert sorted(p.name for p in output.iterdir()) == sorted(expected)
    for name, (backend, filename, read_payload) in expected.items():
        config = parse_config(output / name / "config.pbtxt")
        assert (config.name, config.backend, config.default_model_filename) == (
            name,
            backend,
            filename,
        )
        payload_inputs, payload_outputs = read_payload(output / name / "1" / filename)
        assert config_tensors(config.input, config) == payload_inputs
        assert config_tensors(config.output, config) == payload_outputs
        assert config.max_batch_size == 8
        assert list(config.dynamic_batching.preferred_batch_size) == [4, 8]
        assert config.dynamic_batching.max_queue_delay_microseconds == 100
        # Admission control without a measured rate: the 100 ms budget as the queue timeout, a
        # queue of 8 largest batches, requests timed out rejected.
        policy = config.dynamic_batching.default_queue_policy
        assert (policy.max_queue_size, policy.default_timeout_microseconds) == (64, 100_000)
        assert policy.timeout_action == type(policy).REJECT
        cpu = type(config.instance_group[0]).KIND_CPU
        assert [(g.kind, g.count) for g in config.instance_group] == [(cpu, 1)]
        manifest = json.loads((output / name / "trtconv.json").read_text())["manifest"]
        assert config.parameters["trtconv_status"].string_value == manifest["status"] == "passed"
        assert config.parameters["trtconv_precision"].string_value == manifest["precision"]
    assert (output / "serving-openvino-fp32" / "1" / "model.bin").is_file()
    ort = parse_config(output / "serving-ort-int8" / "config.pbtxt")
    assert ort.parameters["intra_op_thread_count"].string_value == "2"
    openvino = parse_config(output / "serving-openvino-fp32" / "config.pbtxt")
    assert openvino.parameters["INFERENCE_NUM_THREADS"].string_value == "2"


def test_an_existing_repository_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "repo"
    code, _, err = run(["deploy", str(artifact("ort", "fp32")), "-o", str(output)], capsys)
    assert code == 0, err
    before = (output / "serving-ort-fp32" / "config.pbtxt").read_text()
    code, out, err = run(["deploy", str(artifact("ort", "int8")), "-o", str(output)], capsys)
    assert code == 2 and "already exists; pass --force" in err
    assert (output / "serving-ort-fp32" / "config.pbtxt").read_text() == before
    code, out, err = run(
        ["deploy", str(artifact("ort", "int8")), "-o", str(output), "--force", "--json"], capsys
    )
    assert code == 0, err
    assert [m["name"] for m in json.loads(out)["models"]] == ["serving-ort-int8"]
    assert sorted(p.name for p in output.iterdir()) == ["serving-ort-int8"]
    assert [p.name for p in tmp_path.iterdir()] == ["repo"]  # no .partial- folder left


def test_a_fixed_batch_savedmodel_is_served_by_tensorflow_without_batching(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "repo"
    code, out, err = run(["deploy", str(fixed_batch_model()), "-o", str(output), "--json"], capsys)
    assert code == 0, err
    (model,) = json.loads(out)["models"]
    assert model["name"] == "fixed1" and model["max_batch_size"] == 0
    config = parse_config(output / "fixed1" / "config.pbtxt")
    assert config.platform == "tensorflow_savedmodel"
    assert not config.HasField("dynamic_batching")
    assert [list(t.dims) for t in config.input] == [[1, 32, 32, 3]]
    assert (output / "fixed1" / "1" / "model.savedmodel" / "saved_model.pb").is_file()


def _row(batch_size: int, throughput: float, p50_ms: float) -> BenchRow:
    """A bench row with only the figures batching reads filled in."""
    values: dict[str, Any] = {}
    for spec in dataclasses.fields(BenchRow):
        if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
            values[spec.name] = "" if spec.type in ("str", str) else 0
    values.update(batch_size=batch_size, throughput_per_s=throughput, latency_ms_p50=p50_ms)
    return BenchRow(**values)


def test_batching_comes_from_a_bench_run_when_one_is_given() -> None:
    source = describe(artifact("ort", "int8"))
    rows = [_row(1, 1000.0, 1.0), _row(8, 3900.0, 2.0), _row(16, 4000.0, 4.0), _row(4, 2000, 2)]
    batching = batching_for(source, rows, Path("bench.json"))
    assert batching.max_batch_size == 16
    assert batching.preferred_batch_sizes == (8, 16)  # within 90% of the best throughput
    assert batching.max_queue_delay_us == 500  # half the batch-1 median latency
    assert "bench.json" in batching.source
    defaults = batching_for(source, None, None)
    assert (defaults.max_batch_size, defaults.preferred_batch_sizes) == (8, (4, 8))
    assert np.isclose(defaults.max_queue_delay_us, 100)


def _edited_copy(source: Path, target: Path, **changes: Any) -> Path:
    """A copy of artifact `source` whose manifest has `changes` (what only a GPU machine makes:
    an ONNX Runtime artifact built for TensorRT, a TensorRT plan)."""
    import shutil

    shutil.copytree(source, target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest.update(changes)
    (target / "manifest.json").write_text(json.dumps(manifest))
    return target


def test_gpu_artifacts_get_gpu_instances_and_their_precision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    int8 = artifact("ort", "int8")
    summary = json.loads((int8 / "manifest.json").read_text())["conversion_summary"]
    on_trt = _edited_copy(
        int8, tmp_path / "ort-trt", device={"provider": "TensorrtExecutionProvider"}
    )
    plan = _edited_copy(
        int8,
        tmp_path / "trt-fp16",
        backend="trt",
        precision="fp16",
        payload="model.plan",
        conversion_summary={**summary, "batch_range": [1, 4]},
    )
    (plan / "model.plan").write_bytes(b"an engine: not built here, there is no TensorRT")
    output = tmp_path / "repo"
    argv = ["deploy", str(on_trt), str(plan), "-o", str(output), "--instances", "2"]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    config = parse_config(output / "ort-trt" / "config.pbtxt")
    group = config.instance_group[0]
    assert (group.kind, group.count) == (type(group).KIND_GPU, 2)
    (accelerator,) = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert accelerator.name == "tensorrt"
    assert accelerator.parameters["precision_mode"] == "INT8"
    engine = parse_config(output / "trt-fp16" / "config.pbtxt")
    assert (engine.platform, engine.default_model_filename) == ("tensorrt_plan", "model.plan")
    assert engine.instance_group[0].kind == type(group).KIND_GPU
    assert engine.max_batch_size == 4  # the engine's batch range caps it
    assert list(engine.dynamic_batching.preferred_batch_size) == [4]
    assert sorted(p.name for p in (output / "trt-fp16" / "1").iterdir()) == ["model.plan"]


def test_batching_comes_from_a_serving_run_over_a_bench(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = artifact("ort", "int8")
    row = ServerRow(
        model=str(model),
        label="m",
        backend="ort",
        precision="int8",
        dynamic_batching=True,
        max_batch_size=8,
        max_queue_delay_us=250,
        qps_at_budget=130.4,
        latency_ms_p50=1.0,
        latency_ms_p90=2.0,
        latency_ms_p99=3.0,
        loadgen_result="VALID",
        loadgen_reasons=[],
        batches={"1": 1929, "2": 545, "3": 300, "8": 1},
        runs=[],
    )
    batch_1 = dataclasses.replace(row, dynamic_batching=False, max_batch_size=1)
    serving = tmp_path / "serving.json"
    ServerBenchResult(
        scenario="server",
        latency_budget_ms=10.0,
        run_s=1.0,
        rows=[row, batch_1],
        ratios_vs_baseline={},
        batching_gain={},
        notes=[],
    ).save(serving)
    argv = ["deploy", str(model), "--output", str(tmp_path / "repo"), "--serving", str(serving)]
    code, out, err = run([*argv, "--json"], capsys)
    assert code == 0, err
    (deployed,) = json.loads(out)["models"]
    # The limit and delay it met the budget with; preferred: sizes formed >= 10% of the time.
    assert (deployed["max_batch_size"], deployed["max_queue_delay_us"]) == (8, 250)
    assert deployed["preferred_batch_sizes"] == [2, 3]
    assert "130.4 queries/s" in deployed["batching_source"]
    # Admission from the rate served at the budget: the queue holds what 130.4/s drains in the
    # 100 ms timeout (no execution measured: the budget itself).
    assert (deployed["max_queue_size"], deployed["queue_timeout_us"]) == (13, 100_000)
    assert "130.4 samples/s served in" in deployed["admission_source"]
    config = parse_config(tmp_path / "repo" / deployed["config"])
    assert config.dynamic_batching.default_queue_policy.max_queue_size == 13
    serving.write_text("{}")
    code, _, err = run([*argv, "--force"], capsys)
    assert code == 1 and "is not a `bench --scenario server --json` result" in err


def test_the_api_deploys_as_the_command_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`trtconv.api.deploy` is the command's function: the same typed result, the same files."""
    from trtconv import api
    from trtconv.serving.repository.deploy_result import DeployResult

    source = artifact("ort", "fp32")
    result = api.deploy(api.DeployOptions((source,), tmp_path / "api"))
    code, out, err = run(["deploy", str(source), "-o", str(tmp_path / "cli"), "--json"], capsys)
    assert code == 0, err
    assert isinstance(result, DeployResult)
    document = {**json.loads(out), "repository": str(tmp_path / "api")}
    assert result.to_json() == document
    config = Path("serving-ort-fp32") / "config.pbtxt"
    assert (tmp_path / "api" / config).read_text() == (tmp_path / "cli" / config).read_text()
