"""The keys of the `--json` documents of convert, validate, bench and release stay as recorded.

Scripts and users read these documents; a refactor may change how they are built, never their
keys. Each test runs the real CLI on the session's digits-cnn and compares the document's key
structure (tests/helpers/json_structure.py says what a structure keeps and which differences count)
with its golden file in tests/contract/golden/. A mismatch lists the missing, extra and changed
key paths, e.g. `missing: validation.outputs.*.role`.

The golden files were recorded on a machine without an NVIDIA GPU (`--backend auto` is ONNX
Runtime there); with a GPU, auto picks TensorRT and the documents differ, so the module is
marked `no_gpu`. After an INTENDED change of keys, record the golden files again and review
their diff:

    TRTCONV_UPDATE_GOLDEN=1 python -m pytest -q tests/contract

(with the variable set, each test writes its golden file instead of comparing).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.json_structure import compare, key_structure
from tests.helpers.release_configs import LENIENT_GATES, config_text
from trtconv.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.no_gpu, pytest.mark.tensorflow]

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TRTCONV_UPDATE_GOLDEN") == "1"
# Small calibration: the structure, not the figures, is under test. Validation on all 450
# held-out digits: fewer could not show fp32's 0.99 agreement (381 agreeing samples would), and
# the verdict would be inconclusive (exit 4).
SAMPLES = ["--calib-samples", "64", "--validate-samples", "450"]


@dataclass
class Run:
    """One CLI run: its exit code and the JSON document it printed."""

    code: int
    document: dict[str, Any]


def run_json(*args: str | Path) -> Run:
    """Run `trtconv ARGS --json` in-process; its exit code and stdout parsed as JSON."""
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), pytest.raises(SystemExit) as stopped:
        main([*map(str, args), "--json"])
    return Run(int(stopped.value.code or 0), json.loads(stdout.getvalue()))


def check_golden(name: str, document: dict[str, Any]) -> None:
    """Compare `document`'s key structure with golden/NAME.json (or record it: module doc)."""
    path = GOLDEN / f"{name}.json"
    structure = key_structure(document)
    if UPDATE:
        path.write_text(json.dumps(structure, indent=2) + "\n")
        return
    assert path.is_file(), f"no golden file {path}: record it with TRTCONV_UPDATE_GOLDEN=1"
    difference = compare(json.loads(path.read_text()), structure)
    assert not difference, (
        f"the --json document's keys differ from golden/{path.name} (missing: recorded, "
        "not printed; extra: printed, not recorded; changed: recorded type -> printed type; "
        "TRTCONV_UPDATE_GOLDEN=1 records them again if the change is intended):\n"
        + difference.describe()
    )


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("contract")


@pytest.fixture(scope="module")
def fp32(digits_saved_model: Path, work: Path) -> Run:
    """`convert --precision fp32` with the default backend (auto: ort on this machine)."""
    return run_json(
        "convert", digits_saved_model, "--precision", "fp32", "--output", work / "fp32", *SAMPLES
    )


@pytest.fixture(scope="module")
def int8(digits_saved_model: Path, work: Path) -> Run:
    """`convert --precision int8 --calib-data digits` (the int8 ladder and calibration blocks)."""
    return run_json(
        "convert", digits_saved_model, "--precision", "int8", "--calib-data", "digits",
        "--output", work / "int8", *SAMPLES,
    )  # flags beside values # fmt: skip


def test_convert_fp32(fp32: Run) -> None:
    assert fp32.code == 0, fp32.document
    assert fp32.document["backend"] == "ort"
    check_golden("convert", fp32.document)


def test_convert_int8(int8: Run) -> None:
    assert int8.code == 0, int8.document
    check_golden("convert_int8", int8.document)


def test_convert_fp16(digits_saved_model: Path, work: Path) -> None:
    """`convert --backend ort --precision fp16` (the mixed float16 block, validated by float16
    emulation on this machine)."""
    fp16 = run_json(
        "convert", digits_saved_model, "--backend", "ort", "--precision", "fp16",
        "--calib-data", "digits", "--output", work / "fp16", *SAMPLES,
    )  # flags beside values # fmt: skip
    assert fp16.code == 0, fp16.document
    check_golden("convert_fp16", fp16.document)


def test_validate(int8: Run, work: Path) -> None:
    validated = run_json("validate", work / "int8", "--samples", "450")
    assert validated.code == 0, validated.document
    check_golden("validate", validated.document)


def test_bench(fp32: Run, digits_saved_model: Path, work: Path) -> None:
    bench = run_json(
        "bench", digits_saved_model, work / "fp32",
        "--batch-sizes", "1,8", "--warmup", "2", "--iterations", "10",
    )  # flags beside values # fmt: skip
    assert bench.code == 0, bench.document
    assert len(bench.document["results"]) == 4
    check_golden("bench", bench.document)


def test_release(digits_saved_model: Path, work: Path) -> None:
    """ort int8 (converted, evaluated, benched) and tftrt fp16 (a failed target's entry here)."""
    config = work / "release.toml"
    targets: list[tuple[str, str | None]] = [("ort", "int8"), ("tftrt", "fp16")]
    config.write_text(config_text(str(digits_saved_model), targets, LENIENT_GATES))
    release = run_json("release", config, "--output", work / "release")
    assert release.code == 0, release.document
    statuses = {t["id"]: t["status"] for t in release.document["targets"]}
    assert statuses == {"ort-int8": "converted", "tftrt-fp16": "failed"}
    check_golden("release", release.document)
