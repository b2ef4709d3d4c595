"""`trtconv inspect` on SavedModels, artifact directories and ONNX files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trtconv import api
from trtconv.artifact.manifest import Manifest, write_manifest
from trtconv.cli import app
from trtconv.core.errors import InputError, UsageError
from trtconv.core.model_io import TensorSpec
from trtconv.inspect.pipeline import (
    ArtifactInspection,
    InspectResult,
    OnnxInspection,
    SavedModelInspection,
)
from trtconv.model.savedmodel import ModelCard, read_model_card


def assert_reads_back(result: InspectResult) -> None:
    """`--json`'s document loads back as the same inspection, of the same kind."""
    document = json.loads(json.dumps(result.to_json()))
    again = InspectResult.from_json(document)
    assert type(again) is type(result) and again == result and again.to_json() == document


@pytest.mark.slow
def test_inspect_saved_model(digits_model_dir: Path) -> None:
    result = api.inspect(digits_model_dir / "saved_model")
    assert isinstance(result, SavedModelInspection) and result.kind == "saved_model"
    serving = result.signatures["serving_default"]
    assert serving.inputs == (TensorSpec("image", (None, 8, 8, 1), "float32"),)
    assert serving.outputs == (TensorSpec("probabilities", (None, 10), "float32"),)
    document = result.to_json()["signatures"]["serving_default"]  # as --json prints it
    assert document["inputs"] == [{"name": "image", "shape": [None, 8, 8, 1], "dtype": "float32"}]
    histogram = result.op_histogram
    assert histogram is not None and result.graph_dtypes is not None
    # Counted inside the nested model function, not just the StatefulPartitionedCall wrapper.
    assert histogram["Conv2D"] == 2
    assert histogram["MatMul"] == 2
    assert histogram["Softmax"] == 1
    assert result.op_count == sum(histogram.values())
    assert "bfloat16" not in result.graph_dtypes
    assert result.size_bytes > 100_000  # ~130k float32 weights
    assert result.model_card is not None and result.model_card["model"] == "digits-cnn"
    assert_reads_back(result)


@pytest.mark.slow
def test_inspect_a_train_output_directory_finds_its_saved_model(digits_model_dir: Path) -> None:
    result = api.inspect(digits_model_dir)
    assert isinstance(result, SavedModelInspection)
    assert result.path == digits_model_dir / "saved_model"
    assert result.model_card is not None and result.model_card["amp"]["policy"]


def test_a_hand_written_model_card_reads_with_the_keys_it_has(tmp_path: Path) -> None:
    written = {"data": {"source": "x.npz"}, "amp": {"policy": "float32"}, "note": "by hand"}
    (tmp_path / "trtconv.json").write_text(json.dumps(written))
    card = read_model_card(tmp_path / "saved_model")  # beside the SavedModel, as train writes
    assert card == ModelCard(written, amp_policy="float32", data_source="x.npz")
    assert card.model is None and card.labels == [] and card.preprocessing is None
    (tmp_path / "trtconv.json").write_text("{not json")
    with pytest.raises(InputError, match="is not valid JSON"):
        read_model_card(tmp_path)


def _tiny_onnx(path: Path) -> None:
    """A real two-op ONNX model (MatMul -> Relu) with a dynamic batch."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_inspect_onnx_file(tmp_path: Path) -> None:
    _tiny_onnx(tmp_path / "model.onnx")
    result = api.inspect(tmp_path / "model.onnx")
    assert isinstance(result, OnnxInspection) and result.kind == "onnx"
    assert result.op_histogram == {"MatMul": 1, "Relu": 1}
    assert result.inputs == [TensorSpec("x", (None, 4), "float32")]
    assert result.to_json()["inputs"] == [{"name": "x", "shape": [None, 4], "dtype": "float32"}]
    assert result.opsets == {"ai.onnx": 17}
    assert not result.quantized
    assert list(result.to_json()) == [
        "schema_version",
        "kind",
        "path",
        "size_bytes",
        "opsets",
        "producer",
        "inputs",
        "outputs",
        "op_histogram",
        "op_count",
        "quantized",
    ]
    assert_reads_back(result)


def _artifact(directory: Path, payload: str, backend: str, precision: str) -> None:
    manifest = Manifest(
        backend=backend,
        precision=precision,
        payload=payload,
        source_model={"path": "models/digits/saved_model", "sha256": "0" * 64},
        signature={"inputs": [], "outputs": [], "name": "serving_default"},
        device={"name": "cpu"},
        tools={},
        conversion_seconds=1.5,
        status="passed",
    )
    write_manifest(directory, manifest)


def test_inspect_onnx_artifact_shows_manifest_and_payload_ops(tmp_path: Path) -> None:
    _tiny_onnx(tmp_path / "model.onnx")
    _artifact(tmp_path, "model.onnx", "ort", "fp32")
    result = api.inspect(tmp_path)
    assert isinstance(result, ArtifactInspection) and result.kind == "artifact"
    assert (result.backend, result.precision, result.status) == ("ort", "fp32", "passed")
    assert result.payload == "model.onnx"
    assert isinstance(result.payload_details, OnnxInspection)
    assert result.payload_details.op_histogram == {"MatMul": 1, "Relu": 1}
    assert list(result.to_json()) == [
        "schema_version",
        "kind",
        "path",
        "size_bytes",
        "backend",
        "precision",
        "payload",
        "status",
        "source_model",
        "signature",
        "calibration",
        "conversion_seconds",
        "conversion_summary",
        "created_at",
        "payload_details",
    ]
    assert_reads_back(result)


@pytest.mark.slow
def test_inspect_saved_model_artifact(tmp_path: Path, digits_saved_model: Path) -> None:
    shutil.copytree(digits_saved_model, tmp_path / "saved_model")
    _artifact(tmp_path, "saved_model", "tf", "fp32")
    result = api.inspect(tmp_path)
    assert isinstance(result, ArtifactInspection) and result.backend == "tf"
    details = result.payload_details
    assert isinstance(details, SavedModelInspection) and details.op_histogram is not None
    assert details.op_histogram["Conv2D"] == 2
    assert list(details.to_json()) == [
        "schema_version",
        "kind",
        "path",
        "size_bytes",
        "signatures",
        "model_card",
        "serving_signature",
        "op_histogram",
        "op_count",
        "graph_dtypes",
    ]
    assert_reads_back(result)


@pytest.mark.tensorflow
def test_bad_paths(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        api.inspect(tmp_path / "missing")
    with pytest.raises(InputError, match="is not a SavedModel"):
        api.inspect(tmp_path)
    (tmp_path / "broken.onnx").write_bytes(b"\x00garbage")
    with pytest.raises(InputError, match="not a readable ONNX model"):
        api.inspect(tmp_path / "broken.onnx")
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(b"\x00garbage")
    with pytest.raises(InputError, match="could not be loaded"):
        api.inspect(tmp_path / "sm")


def test_cli_json_and_exit_codes(tmp_path: Path) -> None:
    _tiny_onnx(tmp_path / "model.onnx")
    runner = CliRunner()
    ok = runner.invoke(app, ["inspect", str(tmp_path / "model.onnx"), "--json"])
    assert ok.exit_code == 0, ok.stderr
    assert json.loads(ok.stdout)["op_count"] == 2
    human = runner.invoke(app, ["inspect", str(tmp_path / "model.onnx")])
    assert human.exit_code == 0
    assert "MatMul" in human.stdout
    missing = runner.invoke(app, ["inspect", str(tmp_path / "nope"), "--json"])
    assert missing.exit_code == 2
    assert json.loads(missing.stdout)["error"]["type"] == "UsageError"
    assert missing.stderr.count("\n") == 1
    not_a_model = runner.invoke(app, ["inspect", str(tmp_path)])
    assert not_a_model.exit_code == 1
    assert not_a_model.stdout == ""
