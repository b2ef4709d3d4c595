"""`trtconv doctor`: a report that tells the truth and never crashes on a missing piece."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.helpers.tensorflow_range import ENDED_REASON, SHIPS_TFTRT
from trtconv import api
from trtconv.backends import registry
from trtconv.cli import app
from trtconv.core.precision import PRECISIONS
from trtconv.doctor.pipeline import DoctorReport
from trtconv.protocol.doctor_section import RawSection
from trtconv.serving.server.doctor_section import ServingSection


def run_doctor(*args: str, block: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`trtconv doctor ARGS` in a fresh interpreter, with the modules in `block` unimportable."""
    code = (
        "import sys\n"
        f"for name in {list(block)!r}: sys.modules[name] = None\n"
        "from trtconv.cli import main\n"
        f"main(['doctor', *{list(args)!r}])\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def rows(conversions: list[dict[str, Any]], backend: str) -> dict[str, dict[str, Any]]:
    return {r["precision"]: r for r in conversions if r["backend"] == backend}


@pytest.mark.no_gpu
@pytest.mark.tensorflow
def test_report_on_this_machine() -> None:
    report = api.doctor(deep=False)
    assert report.tensorflow.is_tensorrt_build is SHIPS_TFTRT
    sections = report.to_json()  # each backend's section, as doctor --json prints it
    assert sections["tf_trt"]["usable"] is False
    # 2.17: the real cause (its libraries); 2.18+: that TF-TRT ended, and nothing else.
    expected = "libnvinfer.so.8.6.1" if SHIPS_TFTRT else ENDED_REASON
    assert expected in sections["tf_trt"]["reason"]
    assert report.gpus == []
    assert sections["tensorrt"]["version"] is None
    assert "CPUExecutionProvider" in sections["onnxruntime"]["providers"]
    # Every feature of note has a yes/no, whatever this CPU has.
    features = report.cpu.features
    assert set(features) >= {"avx2", "avx512f", "avx512_vnni", "avx512_bf16"}
    assert all(isinstance(present, bool) for present in features.values())
    conversions = report.to_json()["conversions"]  # as doctor --json prints them
    ort = rows(conversions, "ort")
    assert ort["fp32"]["ok"] and ort["int8"]["ok"]
    assert ort["fp16"]["ok"] and not ort["fp16"]["runs_here"]  # converts for a GPU
    assert not ort["tf32"]["ok"] and "trtconv[gpu]" in ort["tf32"]["fix"]
    assert not any(r["ok"] for r in rows(conversions, "tftrt").values())
    assert all(r.reason and r.fix for r in report.conversions if not r.ok)


def test_json_is_one_document_and_exit_0() -> None:
    done = run_doctor("--json", "--quick")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["schema_version"] == 1
    converters = [backend.name for backend in registry.converters()]
    expected = [name for name in converters for _ in PRECISIONS]
    assert [row["backend"] for row in report["conversions"]] == expected
    # Today's keys, the backends' sections between tf2onnx and gpus; read back typed.
    keys = list(report)
    assert keys[:5] == ["schema_version", "python", "tensorflow", "onnx", "tf2onnx"]
    assert keys[-5:] == ["gpus", "cpu", "conversions", "libraries", "commit"]
    assert {"tf_trt", "tensorrt", "onnxruntime"} <= set(keys[5:-5])
    again = DoctorReport.from_json(report)
    assert list(again.sections) == keys[5:-5] and again.to_json() == report
    # The backends' and serving's sections come back as their types, none as a plain block.
    assert isinstance(again.sections["serving"], ServingSection)
    assert not [section for section in again.sections.values() if isinstance(section, RawSection)]


def test_missing_libraries_are_rows_not_crashes() -> None:
    done = run_doctor("--json", "--quick", block=("onnxruntime", "tensorrt"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["onnxruntime"]["version"] is None
    ort = rows(report["conversions"], "ort")
    assert not ort["fp32"]["ok"] and "onnxruntime" in ort["fp32"]["reason"]
    assert "pip install onnxruntime" in ort["fp32"]["fix"]


def test_missing_tensorflow_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib import metadata

    from trtconv import facts
    from trtconv.doctor import pipeline as doctor_module
    from trtconv.facts import libraries

    real_version = metadata.version

    def version(name: str) -> str:
        if name == "tensorflow":
            raise metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(libraries.metadata, "version", version)
    facts.probe.cache_clear()  # probe again with the version lookup above, then forget it
    monkeypatch.setattr(registry, "probe", facts.probe.__wrapped__)
    report = doctor_module.doctor(deep=True)  # deep: still must not ask a missing TensorFlow
    assert report.tensorflow.version is None
    tf_trt = report.to_json()["tf_trt"]
    assert "not installed" in tf_trt["reason"] and tf_trt["asked_tensorflow"] is False


@pytest.mark.no_gpu
def test_human_report_shows_fixes_verbatim() -> None:
    result = CliRunner().invoke(app, ["doctor", "--quick"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Conversions possible here" in result.output
    # Square brackets must survive rich's markup: the extras are what users copy.
    assert "trtconv[gpu]" in text and "trtconv[trt]" in text
    if SHIPS_TFTRT:
        assert "libnvinfer.so.8.6.1" in text
    else:  # where TF-TRT ended, its fix is the TensorRT backend
        assert ENDED_REASON in text and "--backend trt builds TensorRT 10/11 engines" in text
    # Every section's row of the libraries table, read from its fields.
    for component in ("TF-TRT", "TensorRT (python)", "ONNX Runtime", "OpenVINO", "Serving"):
        assert f"│ {component}" in result.output, component


@pytest.mark.slow
@pytest.mark.no_gpu
@pytest.mark.tensorflow
def test_deep_report_asks_tensorflow_for_its_tensorrt() -> None:
    done = run_doctor("--json")
    assert done.returncode == 0, done.stderr
    tf_trt = json.loads(done.stdout)["tf_trt"]
    assert tf_trt["asked_tensorflow"] is True
    assert tf_trt["usable"] is False
    if SHIPS_TFTRT:
        assert tf_trt["linked_tensorrt"] == "8.6.1"
    else:
        assert tf_trt["reason"] == ENDED_REASON
