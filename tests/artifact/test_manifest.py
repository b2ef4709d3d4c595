"""The artifact manifest round-trips and rejects what a release must not trust."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from trtconv.artifact.manifest import MANIFEST, Manifest, read_manifest, write_manifest
from trtconv.core.data_contract import DataContract
from trtconv.core.errors import InputError
from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.outputs.validation_result import ValidatingMachine, ValidationReport


def _manifest() -> Manifest:
    signature = ModelSignature(
        inputs=(TensorSpec("image", (None, 8, 8, 1), "float32"),),
        outputs=(TensorSpec("probabilities", (None, 10), "float32"),),
    )
    return Manifest(
        backend="ort",
        precision="int8",
        payload="model.onnx",
        source_model={"path": "models/digits/saved_model", "sha256": "ab" * 32},
        signature=signature.to_dict(),
        device={"type": "cpu"},
        tools={"onnxruntime": "1.31.1"},
        conversion_seconds=1.5,
    )


def test_manifest_round_trip(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    write_manifest(tmp_path, _manifest())
    loaded = read_manifest(tmp_path)
    assert loaded == _manifest()
    assert loaded.model_signature.input_names == ["image"]
    assert loaded.model_signature.inputs[0].shape == (None, 8, 8, 1)


def test_missing_payload_is_rejected(tmp_path: Path) -> None:
    write_manifest(tmp_path, _manifest())
    with pytest.raises(InputError, match=r"payload 'model.onnx'.*missing"):
        read_manifest(tmp_path)


def test_missing_manifest_is_not_an_artifact(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not a trtconv artifact"):
        read_manifest(tmp_path)


def test_corrupt_manifest_is_rejected(tmp_path: Path) -> None:
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        read_manifest(tmp_path)


def test_other_schema_version_is_rejected(tmp_path: Path) -> None:
    data = _manifest().to_json() | {"schema_version": 99}
    (tmp_path / MANIFEST).write_text(json.dumps(data))
    with pytest.raises(InputError, match="schema_version 99"):
        read_manifest(tmp_path)


def test_a_manifest_loads_back_as_the_same_type() -> None:
    manifest = _manifest()
    assert Manifest.from_json(manifest.to_json()) == manifest


def test_typed_blocks_write_the_recorded_json_and_old_manifests_load(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    calibration = {
        "source": "digits",
        "part": "digits[train]",
        "samples": 64,
        "method": "entropy",
        "sha256": "cd" * 32,
        "input_stats": {"image": {"mean": 0.5, "std": 0.25, "min": 0.0, "max": 1.0}},
    }
    judging = {
        "roles": {"probabilities": {"role": "classes", "source": "inferred", "threshold": None}},
        "tolerances": {"probabilities": 0.01},
        "allow_unjudged": False,
        "labels_output": "probabilities",
    }
    document = _manifest().to_json() | {"calibration": calibration, "judging": judging}
    (tmp_path / MANIFEST).write_text(json.dumps(document, indent=2))
    loaded = read_manifest(tmp_path)
    assert loaded.calibration is not None and loaded.calibration.input_stats["image"].std == 0.25
    assert loaded.judging is not None and loaded.judging.roles["probabilities"].role == "classes"
    assert json.dumps(loaded.to_json(), indent=2) == json.dumps(document, indent=2)
    # Written before the calibration part, input spread and labels output were recorded.
    old = {key: calibration[key] for key in ("source", "samples", "method", "sha256")}
    judged = {key: value for key, value in judging.items() if key != "labels_output"}
    (tmp_path / MANIFEST).write_text(json.dumps(document | {"calibration": old, "judging": judged}))
    loaded = read_manifest(tmp_path)
    assert loaded.calibration is not None and loaded.calibration.input_stats == {}
    assert loaded.judging is not None and loaded.judging.labels_output is None
    assert "labels_output" not in loaded.to_json()["judging"]


def test_unknown_keys_do_not_match_the_schema(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    (tmp_path / MANIFEST).write_text(json.dumps(_manifest().to_json() | {"surprise": 1}))
    with pytest.raises(InputError, match=r"does not match the manifest schema.*surprise"):
        read_manifest(tmp_path)


def test_the_validation_and_data_contract_blocks_are_typed(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    report = ValidationReport(
        samples=450,
        data_source="digits[test]",
        min_top1_agreement=0.97,
        max_accuracy_drop=0.02,
        confidence=0.95,
        precision="int8",
        machine=ValidatingMachine("a CPU", "x86-vnni"),
    )
    contract = DataContract(data="digits", split="held-out", data_from="option", purposes=())
    manifest = replace(_manifest(), validation=report, status="failed", data_contract=contract)
    write_manifest(tmp_path, manifest)
    text = (tmp_path / MANIFEST).read_text()
    document = json.loads(text)
    assert document["validation"] == json.loads(json.dumps(report.to_json()))
    assert document["data_contract"] == contract.to_json()
    loaded = read_manifest(tmp_path)
    assert loaded.validation == report and loaded.data_contract == contract
    assert loaded.validated_on == "x86-vnni" and _manifest().validated_on is None
    assert json.dumps(loaded.to_json(), indent=2, default=str) + "\n" == text
