"""The CLI contract (docs/architecture.md): --json is one document, exit codes, stderr is one
line, outputs are never replaced silently; and `import trtconv.cli` stays free of heavy
libraries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from trtconv.cli import app

HEAVY = ("tensorflow", "keras", "tf2onnx", "onnx", "onnxruntime", "tensorrt")


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtconv", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def _bad_npz(tmp_path: Path, case: str) -> Path:
    x = np.random.default_rng(0).random((20, 8, 8, 1), dtype=np.float32)
    y = np.arange(20) % 2
    path = tmp_path / f"{case}.npz"
    if case == "nan":
        x[0, 0, 0, 0] = np.nan
        np.savez(path, x=x, y=y)
    elif case == "three_d":
        np.savez(path, x=x[..., 0], y=y)
    elif case == "empty":
        np.savez(path, x=x[:0], y=y[:0])
    elif case == "label_out_of_range":
        y[1] = -1
        np.savez(path, x=x, y=y)
    return path  # "missing": never written


# --- in process, through typer's CliRunner -------------------------------------------------


@pytest.mark.slow
@pytest.mark.tensorflow
def test_runner_train_json_is_one_document(tmp_path: Path) -> None:
    output = tmp_path / "m"
    result = CliRunner().invoke(app, ["train", "--epochs", "1", "--output", str(output), "--json"])
    assert result.exit_code == 0, result.stderr
    card = json.loads(result.stdout)
    assert card["saved_model"] == str(output / "saved_model")
    assert card["model"] == "digits-cnn"
    assert (output / "trtconv.json").is_file()


def test_runner_usage_errors_exit_2_with_a_json_error(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["train", "--model", "vgg", "--output", str(tmp_path / "a"), "--json"]
    unknown = runner.invoke(app, args)
    message = "Unknown model 'vgg'; known models: digits-cnn, resnet50."
    assert unknown.exit_code == 2
    assert json.loads(unknown.stdout) == {"error": {"type": "UsageError", "message": message}}
    assert unknown.stderr == f"trtconv: error: {message}\n"
    grid_only = runner.invoke(app, ["train", "--batch-sizes", "8,16", "--json"])
    assert grid_only.exit_code == 2
    assert "--grid" in json.loads(grid_only.stdout)["error"]["message"]
    bench_output = runner.invoke(app, ["train", "--benchmark", "--output", "x", "--json"])
    assert bench_output.exit_code == 2
    assert not list(tmp_path.iterdir())


def test_runner_bad_data_exits_1_with_one_line(tmp_path: Path) -> None:
    data = _bad_npz(tmp_path, "nan")
    result = CliRunner().invoke(
        app, ["train", "--data", str(data), "--output", str(tmp_path / "out"), "--json"]
    )
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["type"] == "InputError"
    assert result.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_runner_refuses_existing_output_and_leaves_it_intact(tmp_path: Path) -> None:
    output = tmp_path / "out"
    (output / "saved_model").mkdir(parents=True)
    (output / "trtconv.json").write_text('{"mine": true}\n')
    result = CliRunner().invoke(app, ["train", "--output", str(output), "--json"])
    assert result.exit_code == 2
    assert "already exists" in json.loads(result.stdout)["error"]["message"]
    assert (output / "trtconv.json").read_text() == '{"mine": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging left behind
    assert sorted(p.name for p in output.iterdir()) == ["saved_model", "trtconv.json"]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["train", "convert", "bench", "release"])
def test_runner_unwritable_output_is_refused_before_any_work(
    command: str, tmp_path: Path, digits_saved_model: Path
) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_text("not a folder")
    output = str(blocker / "out")
    config = tmp_path / "release.toml"
    config.write_text(
        f'[model]\npath = "{digits_saved_model}"\n[[targets]]\nbackend = "ort"\n'
        'precision = "fp32"\n'
    )
    args = {
        "train": ["train", "--output", output],
        "convert": ["convert", str(digits_saved_model), "--precision", "fp32", "--output", output],
        "bench": ["bench", str(digits_saved_model), "--report", output],
        "release": ["release", str(config), "--output", output],
    }[command]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 2, result.stdout
    message = json.loads(result.stdout)["error"]["message"]
    assert message.endswith("notes.txt is a file, not a folder.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "release.toml"]


# --- as a subprocess: the real entry point -------------------------------------------------


@pytest.mark.slow
@pytest.mark.tensorflow
def test_subprocess_train_json_stdout_is_exactly_one_document(tmp_path: Path) -> None:
    completed = _run("train", "--epochs", "1", "--output", str(tmp_path / "m"), "--json")
    assert completed.returncode == 0, completed.stderr[-2000:]
    card = json.loads(completed.stdout)  # fails on any stray print or log line on stdout
    assert card["exported_dtype"] == "float32"
    assert "Traceback" not in completed.stderr


@pytest.mark.parametrize("case", ["nan", "three_d", "empty", "label_out_of_range", "missing"])
def test_subprocess_bad_data_one_line_no_traceback(tmp_path: Path, case: str) -> None:
    data = _bad_npz(tmp_path, case)
    output = tmp_path / "out"
    completed = _run("train", "--data", str(data), "--output", str(output))
    assert completed.returncode in (1, 2)
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("trtconv: error: ")
    assert data.name in lines[0]
    assert "Traceback" not in completed.stderr
    assert completed.stdout == ""
    assert not output.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".partial-")]


def test_subprocess_bad_data_json_mode(tmp_path: Path) -> None:
    data = _bad_npz(tmp_path, "three_d")
    completed = _run("train", "--data", str(data), "--output", str(tmp_path / "o"), "--json")
    assert completed.returncode == 1
    error = json.loads(completed.stdout)["error"]
    assert error["type"] == "InputError"
    assert "4 dimensions" in error["message"]


def test_subprocess_existing_output_refused(tmp_path: Path) -> None:
    output = tmp_path / "out"
    output.mkdir()
    (output / "keep").write_bytes(b"\x01\x02")
    completed = _run("train", "--output", str(output))
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        f"trtconv: error: Output {output} already exists; pass --force to replace it."
    ]
    assert (output / "keep").read_bytes() == b"\x01\x02"


def test_subprocess_bad_option_is_usage_error() -> None:
    completed = _run("train", "--epochs", "0", "--json")
    assert completed.returncode == 2
    assert json.loads(completed.stdout)["error"]["type"] == "UsageError"
    assert "Traceback" not in completed.stderr


def test_version_alone_prints_the_version() -> None:
    from trtconv import __version__

    completed = _run("--version")
    assert (completed.returncode, completed.stdout.strip()) == (0, __version__)


PROBE = """
import json, sys
import trtconv.cli
after_import = sorted(m for m in {heavy} if m in sys.modules)
for argv in (["--help"], ["train", "--help"], ["inspect", "--help"]):
    try:
        trtconv.cli.main(argv)
    except SystemExit:
        pass
after_help = sorted(m for m in {heavy} if m in sys.modules)
sys.stderr.write("PROBE " + json.dumps([after_import, after_help]) + "\\n")
"""


def test_import_and_help_load_no_heavy_library() -> None:
    completed = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=repr(HEAVY))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert "--benchmark" in completed.stdout and "--json" in completed.stdout
    probe = next(line for line in completed.stderr.splitlines() if line.startswith("PROBE "))
    assert json.loads(probe[len("PROBE ") :]) == [[], []]


@pytest.mark.parametrize(
    "argv",
    [
        ["convert", "{missing}", "--precision", "fp32"],
        ["validate", "{missing}"],
        ["validate", "{artifact}", "--reference", "{missing}"],
        ["inspect", "{missing}"],
        ["bench", "{missing}"],
    ],
    ids=["convert", "validate", "validate --reference", "inspect", "bench"],
)
def test_a_missing_model_is_exit_2_everywhere(tmp_path: Path, argv: list[str]) -> None:
    """Before, convert and validate said exit 1 where inspect and bench said 2."""
    missing = tmp_path / "nowhere"
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    manifest = {
        "schema_version": 1,
        "backend": "ort",
        "precision": "fp32",
        "payload": "model.onnx",
        "source_model": {"path": str(missing)},
        "signature": {"inputs": [], "outputs": []},
        "device": {},
        "tools": {},
        "conversion_seconds": 0.0,
    }
    (artifact / "manifest.json").write_text(json.dumps(manifest))
    (artifact / "model.onnx").write_bytes(b"")
    args = [a.format(missing=missing, artifact=artifact) for a in argv]
    completed = _run(*args, "--json")
    assert completed.returncode == 2, completed.stderr
    error = json.loads(completed.stdout)["error"]
    assert error["type"] == "UsageError"
    assert error["message"].endswith(f"{missing} does not exist.")
