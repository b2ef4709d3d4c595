"""One reader of model data: the same .npz is accepted or refused alike by convert, validate and
bench (before, bench cast integer pixels to float; a single array feeds the single input of
every command alike, whatever its name)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trtconv.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow]  # converts the session's digits model once

SAMPLES = 40
rng = np.random.default_rng(0)
DATA: dict[str, dict[str, np.ndarray]] = {
    # float64 is cast to the model's float32: accepted everywhere
    "float64 x": {"x": rng.random((SAMPLES, 8, 8, 1))},
    # integers for a float input change meaning (uint8 pixels vs [0, 1]): refused everywhere
    "integer pixels": {"x": rng.integers(0, 255, (SAMPLES, 8, 8, 1)).astype(np.int32)},
    "wrong shape": {"x": rng.random((SAMPLES, 8, 8, 3)).astype(np.float32)},
    # one array, one input: fed whatever its name
    "one unnamed array": {"pixels": rng.random((SAMPLES, 8, 8, 1)).astype(np.float32)},
}
REFUSALS = {
    "integer pixels": "input 'image' expects dtype float32, found int32",
    "wrong shape": "input 'image' has samples of shape 8x8x3, but the model expects 8x8x1",
}


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    with pytest.raises(SystemExit) as stopped:
        main([*argv, "--json"])
    return int(stopped.value.code or 0), json.loads(capsys.readouterr().out)


def npz(tmp_path: Path, case: str) -> str:
    path = tmp_path / f"{case.replace(' ', '-')}.npz"
    np.savez(path, **DATA[case], y=np.arange(SAMPLES) % 10)
    return str(path)


@pytest.fixture(scope="module")
def artifact(digits_saved_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """digits-cnn converted by `trtconv convert` with the acceptable file as its data."""
    work = tmp_path_factory.mktemp("data-rules")
    output = work / "artifact"
    args = ["convert", str(digits_saved_model), "--precision", "fp32", "--backend", "ort"]
    # Point decisions (recorded, so validate follows): 8 held-out samples cannot show fp32's
    # 0.99 at 95%, and the data rules, not the statistics, are under test.
    args += ["--calib-data", npz(work, "float64 x"), "--output", str(output), "--confidence", "0"]
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code in (0, None)
    return output


def commands(model: Path, artifact: Path, data: str, output: Path) -> dict[str, list[str]]:
    return {
        "convert": ["convert", str(model), "--precision", "fp32", "--backend", "ort",
                    "--calib-data", data, "--output", str(output)],
        "validate": ["validate", str(artifact), "--data", data],
        "bench": ["bench", str(model), "--data", data, "--batch-sizes", "1",
                  "--iterations", "1", "--warmup", "0"],
    }  # flags beside values # fmt: skip


def test_acceptable_data_is_accepted_by_all(
    artifact: Path, digits_saved_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = npz(tmp_path, "float64 x")
    manifest = json.loads((artifact / "manifest.json").read_text())  # convert accepted it
    # Not the model's training data, and fp32 fits nothing: every sample validates.
    assert manifest["validation"]["data_source"].endswith("float64-x.npz[shuffled]")
    code, validated = run(
        commands(digits_saved_model, artifact, data, tmp_path)["validate"], capsys
    )
    assert code == 0 and validated["data_source"] == data
    code, benched = run(commands(digits_saved_model, artifact, data, tmp_path)["bench"], capsys)
    assert code == 0 and benched["results"][0]["iterations"] == 1


def test_one_array_of_another_name_is_fed_by_all(
    artifact: Path, digits_saved_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = npz(tmp_path, "one unnamed array")
    output = tmp_path / "converted"
    for command, argv in commands(digits_saved_model, artifact, data, output).items():
        # point decisions: 40 samples cannot show fp32 at 95%, and the names are under test
        code, _ = run([*argv, "--confidence", "0"] if command == "convert" else argv, capsys)
        assert code == 0, command


@pytest.mark.parametrize("case", list(REFUSALS))
def test_unfit_data_is_refused_alike_by_all(
    case: str,
    artifact: Path,
    digits_saved_model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = npz(tmp_path, case)
    output = tmp_path / "never"
    refusals = {}
    for command, argv in commands(digits_saved_model, artifact, data, output).items():
        code, document = run(argv, capsys)
        error = document["error"]
        # The data's part ([validation]) is named where a part was read; the rule is the same.
        refusals[command] = (code, error["type"], re.sub(r"\[validation\]", "", error["message"]))
    assert len(set(refusals.values())) == 1, refusals
    code, kind, message = refusals["bench"]
    assert (code, kind) == (1, "InputError")
    assert message.startswith(data) and REFUSALS[case] in message
    assert not output.exists()
