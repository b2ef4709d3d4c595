"""The manifest records data paths so that `validate ARTIFACT` reads them from any directory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trtconv import api
from trtconv.artifact.manifest import read_manifest
from trtconv.calib.sources import load_digits

pytestmark = pytest.mark.tensorflow  # builds, converts or serves Keras models


def test_validate_elsewhere_reads_the_data_convert_read(
    digits_saved_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "data").mkdir(parents=True)
    elsewhere.mkdir()
    digits = load_digits("all")
    np.savez(work / "data" / "digits.npz", x=digits.x, y=digits.labels)
    monkeypatch.chdir(work)  # convert with a path relative to where it runs
    options = api.ConvertOptions(
        digits_saved_model,
        "fp32",
        backend="ort",
        output=Path("art"),
        calib_data="data/digits.npz",
        confidence=0,
    )
    api.convert(options)
    manifest = read_manifest(work / "art")
    assert manifest.data_contract is not None
    assert manifest.data_contract.data == str(work / "data" / "digits.npz")

    monkeypatch.chdir(elsewhere)
    validated = api.validate(api.ValidateOptions(work / "art", confidence=0))
    assert validated.verdict == "passed"
    assert validated.data_contract.data_from == "manifest"
    assert manifest.validation is not None and validated.samples == manifest.validation.samples
