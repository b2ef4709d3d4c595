"""The artifact manifest round-trips and rejects what a release must not trust."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtconv.core.errors import InputError
from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.manifest import MANIFEST, Manifest, read_manifest, write_manifest


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
