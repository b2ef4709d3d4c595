"""Resume records: reused only when inputs and outputs are unchanged."""

from __future__ import annotations

import json
from pathlib import Path

from trtconv.release.store import StepStore, step_key, sweep_partials, write_json_atomic


def make_output(release: Path, text: str = "payload") -> Path:
    artifact = release / "artifacts" / "ort-int8"
    artifact.mkdir(parents=True, exist_ok=True)
    (artifact / "model.onnx").write_text(text)
    return artifact


def test_key_ignores_dict_order() -> None:
    assert step_key({"a": 1, "b": [1, 2]}) == step_key({"b": [1, 2], "a": 1})
    assert step_key({"a": 1}) != step_key({"a": 2})


def test_recorded_step_is_reused(tmp_path: Path) -> None:
    store = StepStore(tmp_path)
    inputs = {"source_sha256": "abc", "precision": "int8"}
    store.record("convert-ort-int8", inputs, {"artifact": "x"}, [make_output(tmp_path)], 1.5)
    record, reason = store.lookup("convert-ort-int8", dict(inputs))
    assert record is not None and record.result == {"artifact": "x"}
    assert record.outputs == {"artifacts/ort-int8": record.outputs["artifacts/ort-int8"]}
    assert reason == "inputs and outputs unchanged"


def test_changed_inputs_are_named(tmp_path: Path) -> None:
    store = StepStore(tmp_path)
    store.record("s", {"source_sha256": "abc", "precision": "int8"}, {}, [], 0.1)
    record, reason = store.lookup("s", {"source_sha256": "def", "precision": "int8"})
    assert record is None and reason == "inputs changed (source_sha256)"


def test_changed_or_missing_output_is_not_trusted(tmp_path: Path) -> None:
    store = StepStore(tmp_path)
    artifact = make_output(tmp_path)
    store.record("s", {}, {}, [artifact], 0.1)
    (artifact / "model.onnx").write_text("half-written")
    assert store.lookup("s", {}) == (None, "output artifacts/ort-int8 changed since it was written")
    (artifact / "model.onnx").unlink()
    artifact.rmdir()
    assert store.lookup("s", {})[1] == "output artifacts/ort-int8 is missing"


def test_unrun_forgotten_and_corrupt_steps(tmp_path: Path) -> None:
    store = StepStore(tmp_path)
    assert store.lookup("s", {}) == (None, "not run before")
    store.record("s", {}, {}, [], 0.1)
    store.forget("s")
    assert store.lookup("s", {})[0] is None
    (store.steps_dir / "t.json").write_text("{not json")
    assert store.lookup("t", {})[0] is None


def test_atomic_json_and_sweep(tmp_path: Path) -> None:
    write_json_atomic(tmp_path / "a" / "doc.json", {"x": 1})
    assert json.loads((tmp_path / "a" / "doc.json").read_text()) == {"x": 1}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["doc.json"]
    leftover = tmp_path / ".partial-ort-int8-123"
    leftover.mkdir()
    (leftover / "model.onnx").write_text("x")
    assert sweep_partials(tmp_path) == [leftover]
    assert not leftover.exists()
