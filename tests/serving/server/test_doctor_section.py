"""The doctor's `serving` section: whether `trtconv serve` can run here, and why not."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.shadow_fixtures import shadow_manifest
from trtconv.artifact.manifest import write_manifest
from trtconv.cli import main
from trtconv.doctor.pipeline import doctor
from trtconv.serving.server.triton_install import (
    TRITON_STEP,
    located,
    python_version,
    triton_reason,
)


def test_reasons_name_the_missing_piece_and_the_step_that_installs_it(tmp_path: Path) -> None:
    root = tmp_path / "pytriton"
    found = located(root)
    for path in (found.server, found.stub):
        path.parent.mkdir(parents=True)
        path.write_bytes(b"")
    assert triton_reason("2.36", root, "2.73.0") == ""
    assert "glibc 2.35 or newer, this machine has 2.31" in triton_reason("2.31", root, "2.73.0")
    assert "glibc Linux only" in triton_reason(None, None, None)
    # The wheel without its dependencies: the step says so, whatever NumPy the environment has.
    assert f"{TRITON_STEP} (" in triton_reason("2.36", None, "2.73.0")
    assert TRITON_STEP == "pip install --no-deps nvidia-pytriton==0.7.0"
    assert "trtconv[serve]" in triton_reason("2.36", root, None)
    found.stub.unlink()
    assert f"no Python-backend stub for Python {python_version()}" in triton_reason(
        "2.36", root, "2.73.0"
    )


def test_doctor_reports_serving() -> None:
    section = doctor(deep=False).to_json()["serving"]
    assert section["usable"] is (section["reason"] == "")
    assert section["row"]["component"] == "Serving (PyTriton's Triton)"
    assert section["string_tensors"] is (int(np.__version__.split(".")[0]) < 2)


def an_artifact(tmp_path: Path) -> Path:
    """An ONNX artifact's folder as far as `serve` reads it before it looks for Triton."""
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "model.onnx").write_bytes(b"onnx")
    write_manifest(artifact, shadow_manifest(source=tmp_path / "saved_model"))
    return artifact


def test_serve_without_triton_is_exit_3_naming_the_step(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from trtconv.serving.server import triton_install

    monkeypatch.setattr(triton_install, "wheel_root", lambda: None)  # as if not installed
    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(an_artifact(tmp_path)), "--json"])
    out, err = capsys.readouterr()
    assert stopped.value.code == 3
    assert json.loads(out)["error"]["type"] == "MissingDependencyError"
    assert triton_install.serving_reason() in err
    assert TRITON_STEP in err or "glibc" in err


def test_bad_ports_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["serve", str(tmp_path), "--http-port", "9000", "--grpc-port", "9000"])
    assert stopped.value.code == 2
    assert "must differ" in capsys.readouterr().err
