"""`trtconv convert` / `trtconv validate`: exit codes, one error line, nothing half-written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trtconv.cli import main

pytestmark = pytest.mark.slow  # loads TensorFlow and the session's digits model


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the CLI in-process; (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    out, err = capsys.readouterr()
    return int(stopped.value.code or 0), out, err


def _no_serving_default(tmp_path: Path) -> Path:
    import tensorflow as tf

    module = tf.Module()
    module.f = tf.function(
        lambda x: {"y": x * 2}, input_signature=[tf.TensorSpec([None], tf.float32)]
    )
    path = tmp_path / "other" / "saved_model"
    tf.saved_model.save(module, str(path), signatures={"other": module.f})
    return path


def _corrupt(tmp_path: Path) -> Path:
    path = tmp_path / "corrupt"
    path.mkdir()
    (path / "saved_model.pb").write_bytes(b"\x08\x01garbage-not-a-protobuf\xff\xff")
    return path


def _npz(tmp_path: Path, name: str, array: np.ndarray | None) -> str:
    path = tmp_path / name
    if array is None:
        path.write_bytes(b"")
    else:
        np.savez(path, x=array)
    return str(path)


def _without_card(tmp_path: Path, saved_model: Path) -> Path:
    copy = tmp_path / "nocard" / "saved_model"
    shutil.copytree(saved_model, copy)
    return copy


Case = Callable[[Path, Path], list[str]]
BAD_INPUTS: dict[str, tuple[Case, int, str]] = {
    "missing dir": (lambda t, m: [str(t / "nope"), "--precision", "fp32"], 2, "does not exist"),
    "not a SavedModel": (
        lambda t, m: [str(t), "--precision", "fp32"],
        1,
        "is not a SavedModel: expected",
    ),
    "corrupt saved_model.pb": (
        lambda t, m: [str(_corrupt(t)), "--precision", "fp32"],
        1,
        "could not be read",  # by the signature reader, before TensorFlow loads anything
    ),
    "no serving_default": (
        lambda t, m: [str(_no_serving_default(t)), "--precision", "fp32"],
        2,
        "has no 'serving_default' signature (found: other); choose one with --signature NAME",
    ),
    "calibration wrong shape": (
        lambda t, m: [str(m), "--precision", "int8", "--calib-data",
                      _npz(t, "shape.npz", np.zeros((20, 8, 8, 3), np.float32))],
        1,
        "input 'image' has samples of shape 8x8x3, but the model expects 8x8x1",
    ),
    "calibration wrong dtype": (
        lambda t, m: [str(m), "--precision", "int8", "--calib-data",
                      _npz(t, "dtype.npz", np.zeros((20, 8, 8, 1), np.int32))],
        1,
        "input 'image' expects dtype float32, found int32",
    ),
    "calibration empty file": (
        lambda t, m: [str(m), "--precision", "int8", "--calib-data", _npz(t, "empty.npz", None)],
        1,
        "is not a readable .npz archive",
    ),
    "int8 without data or model card": (
        lambda t, m: [str(_without_card(t, m)), "--precision", "int8"],
        2,
        "INT8 needs calibration data",
    ),
    "tf32 on CPU": (lambda t, m: [str(m), "--precision", "tf32"], 3, "tf32"),
    "tftrt here": (
        lambda t, m: [str(m), "--precision", "fp32", "--backend", "tftrt"],
        3,
        "--backend tftrt --precision fp32 cannot run on this machine",
    ),
    "fp16 on CPU, auto": (
        lambda t, m: [str(m), "--precision", "fp16"],
        3,
        "no backend can run fp16 on this machine",
    ),
    "unknown precision": (lambda t, m: [str(m), "--precision", "int4"], 2, "--precision must be"),
    "fallback time limit": (
        lambda t, m: [str(m), "--precision", "int8", "--fallback-time-limit", "0"],
        2,
        "--fallback-time-limit must be positive, found 0.0",
    ),
    "top-1 agreement above 1": (
        lambda t, m: [str(m), "--precision", "fp32", "--min-top1-agreement", "97"],
        2,
        "--min-top1-agreement must be between 0 and 1, found 97.0",
    ),
    "bad batch sizes": (
        lambda t, m: [str(m), "--precision", "fp32", "--batch-sizes", "1,x"],
        2,
        "--batch-sizes takes integers",
    ),
}  # flags beside values # fmt: skip


# These refusals hold only where no GPU can run the precision.
NEEDS_NO_GPU = ("tf32 on CPU", "tftrt here", "fp16 on CPU, auto")


# ... and this one only where the CPU has no float16 arithmetic of its own (OpenVINO runs it).
NEEDS_NO_CPU_FP16 = ("fp16 on CPU, auto",)


def _marks(case: str) -> list[pytest.MarkDecorator]:
    return [pytest.mark.no_gpu] * (case in NEEDS_NO_GPU) + [pytest.mark.no_cpu_fp16] * (
        case in NEEDS_NO_CPU_FP16
    )


@pytest.mark.parametrize("case", [pytest.param(c, marks=_marks(c)) for c in BAD_INPUTS])
def test_bad_input_exit_code_one_line_no_output(
    case: str, tmp_path: Path, digits_saved_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_args, code, message = BAD_INPUTS[case]
    work = tmp_path / "work"
    work.mkdir()
    output = tmp_path / "out" / "artifact"
    args = ["convert", *make_args(work, digits_saved_model), "--output", str(output), "--json"]
    exit_code, out, err = run(args, capsys)
    assert exit_code == code, err
    error = json.loads(out)["error"]
    assert message in error["message"]
    assert "\n" not in error["message"].strip()
    assert [line for line in err.splitlines() if line.startswith("trtconv: error:")] == [
        f"trtconv: error: {error['message']}"
    ]
    assert "Traceback" not in err
    assert not output.exists()
    assert not (output.parent.exists() and list(output.parent.iterdir()))


def test_existing_output_needs_force(
    tmp_path: Path, digits_saved_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "taken"
    output.mkdir()
    (output / "keep.txt").write_text("mine")
    args = ["convert", str(digits_saved_model), "--precision", "fp32", "--output", str(output)]
    exit_code, _, err = run(args, capsys)
    assert exit_code == 2 and "already exists; pass --force" in err
    assert [p.name for p in output.iterdir()] == ["keep.txt"]


def test_int8_outside_tolerance_is_written_failed_and_exits_4_then_validate(
    tmp_path: Path, digits_saved_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "digits-int8"
    args = [
        "convert", str(digits_saved_model), "--precision", "int8", "--backend", "ort",
        "--calib-data", "digits", "--calib-samples", "256", "--calib-method", "minmax",
        "--validate-samples", "200", "--tolerance", "1e-6", "--output", str(output), "--json",
    ]  # flags beside values # fmt: skip
    exit_code, out, err = run(args, capsys)
    assert exit_code == 4
    result: dict[str, Any] = json.loads(out)  # the result, not an error document
    [line] = [line for line in err.splitlines() if line.startswith("trtconv: error:")]
    assert "outside tolerance:" in line
    # its share of samples within the atol, on that line or itemised below it beside another
    # check (int8's accuracy drop on a CPU without VNNI may be inconclusive on 200 samples)
    assert "probabilities within tolerance" in err
    assert result["validation"]["passed"] is False
    # int8 itself is about right (a broken one agrees on a tenth), the atol is what fails it
    assert result["validation"]["top1_agreement"] >= 0.9
    manifest = json.loads((output / "manifest.json").read_text())
    assert manifest["status"] == "failed" and manifest["calibration"]["method"] == "minmax"
    assert (output / "model.onnx").is_file()

    # validate keeps the rules it was converted under (its 1e-6), until told to use today's.
    exit_code, out, _ = run(["validate", str(output), "--samples", "450"], capsys)
    assert exit_code == 4
    exit_code, out, _ = run(
        ["validate", str(output), "--samples", "450", "--current-rules"], capsys
    )
    assert exit_code == 0
    assert "✓ top-1 agreement" in out and "passed" in out
    exit_code, out, err = run(
        ["validate", str(output), "--samples", "100", "--tolerance", "1e-6", "--json"], capsys
    )
    assert exit_code == 4 and "outside tolerance" in err
    document = json.loads(out)
    assert document["passed"] is False and document["samples"] == 100


def test_validate_bad_artifact_is_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exit_code, _, err = run(["validate", str(tmp_path)], capsys)
    assert exit_code == 1 and "is not a trtconv artifact" in err
