"""The doctor's `serving` section: whether `trtconv serve` can run here, and why not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers.shadow_fixtures import shadow_manifest
from trtconv.artifact.manifest import write_manifest
from trtconv.cli import main
from trtconv.doctor.pipeline import doctor
from trtconv.serving.doctor_section import doctor_section, serving_reason


def test_reasons_name_the_missing_piece() -> None:
    assert serving_reason("0.7.0", "2.36", "1.26.4") == ""
    assert "glibc 2.35 or newer, this machine has 2.31" in serving_reason("0.7.0", "2.31", None)
    assert "trtconv[serve]" in serving_reason(None, "2.36", "1.26.4")
    assert "glibc Linux only" in serving_reason(None, None, None)
    # PyTriton's Triton answers with empty outputs under NumPy 2, whatever installed it.
    assert "needs NumPy < 2, this environment has NumPy 2.4.6" in serving_reason(
        "0.7.0", "2.36", "2.4.6"
    )


def test_doctor_reports_serving() -> None:
    section = doctor(deep=False).to_json()["serving"]
    assert section["usable"] is (section["reason"] == "")
    assert section["row"]["component"] == "Serving (PyTriton)"


def an_artifact(tmp_path: Path) -> Path:
    """An ONNX artifact's folder as far as `serve` reads it before it looks for Triton."""
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "model.onnx").write_bytes(b"onnx")
    write_manifest(artifact, shadow_manifest(source=tmp_path / "saved_model"))
    return artifact


def test_serve_without_pytriton_is_exit_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "pytriton.triton", None)  # import fails as if absent
    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(an_artifact(tmp_path)), "--json"])
    out, err = capsys.readouterr()
    assert stopped.value.code == 3
    assert json.loads(out)["error"]["type"] == "MissingDependencyError"
    # Where serving cannot run for another reason (NumPy 2), that reason is the sentence.
    assert (doctor_section().reason or "trtconv[serve]") in err


def test_serve_under_numpy_2_is_exit_3_before_starting_triton(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from trtconv.serving import doctor_section as section

    found = section.dist_version
    monkeypatch.setattr(
        section, "dist_version", lambda name: "2.4.6" if name == "numpy" else found(name)
    )
    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(an_artifact(tmp_path))])
    assert stopped.value.code == 3
    assert "needs NumPy < 2, this environment has NumPy 2.4.6" in capsys.readouterr().err


def test_bad_ports_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(tmp_path), "--http-port", "9000", "--grpc-port", "9000"])
    assert stopped.value.code == 2
    assert "must differ" in capsys.readouterr().err
