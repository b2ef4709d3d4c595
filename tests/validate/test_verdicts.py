"""Verdicts a user can trust, end to end on models built for it (tests/helpers/verdict_fixtures.py):
each output judged for what it is, on the data and preprocessing the model expects, and the
held-out split everywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.verdict_fixtures import (
    binary_npz,
    box_label_model,
    box_label_npz,
    image_folder,
    image_model,
    sigmoid_model,
)
from trtconv import api
from trtconv.artifact.manifest import read_manifest
from trtconv.cli import main
from trtconv.core.errors import AccuracyError
from trtconv.core.judging_options import Judging, ToleranceOptions
from trtconv.onnxlib.session import OrtRunner
from trtconv.options.bench import BenchOptions
from trtconv.options.convert import ConvertOptions
from trtconv.options.shared import PreprocessingOptions
from trtconv.options.validate import ValidateOptions
from trtconv.outputs.compare import run_batched
from trtconv.validate.pipeline import ValidateResult

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow]  # trains, converts and benches real models

QUICK_BENCH: dict[str, Any] = {"batch_sizes": (32,), "warmup": 1, "iterations": 3}


def test_box_and_label_heads_are_each_judged_for_what_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `box` [N, 4] sorted first and was judged as class scores (its argmax scored
    against the labels, accuracy 0.23); the label head was not judged at all.

    Point decisions (confidence 0, recorded in the manifest, so validate follows): the 108
    held-out samples of digits 0-2 cannot show int8's 0.97 at 95% (125 agreeing samples
    could); the roles, not the statistics, are under test here."""
    artifact = tmp_path / "box-int8"
    steps: list[str] = []
    result = api.convert(
        ConvertOptions(
            box_label_model(),
            "int8",
            backend="ort",
            output=artifact,
            calib_data=str(box_label_npz()),
            confidence=0.0,
        ),
        progress=lambda done, total, label: steps.append(label),
    ).to_json()
    validation = result["validation"]
    assert validation["outputs"]["box"]["role"] == "regression"
    assert validation["outputs"]["label"]["role"] == "classes"
    assert "Softmax" in validation["outputs"]["label"]["role_source"]
    assert validation["labels_output"] == "label" and validation["accuracy_reference"] > 0.95
    assert validation["verdict"] == "passed"
    assert result["manifest"]["judging"]["roles"]["box"]["role"] == "regression"
    assert steps[-1] == "done" and "validating" in steps
    assert "quantizing to int8 and converting with ort" in steps

    # A tensor at int8 has no tolerance: "not judged", exit 4, unless allowed.
    code = _cli(["validate", str(artifact), "--output-role", "box=tensor"], capsys)
    assert code == 4
    allowed = api.validate(
        ValidateOptions(artifact, judging=Judging.build({"box": "tensor"}, allow_unjudged=True))
    )
    assert allowed.passed and allowed.verdict == "not judged"
    assert allowed.outputs["box"].role_source == "option"
    judged = api.validate(
        ValidateOptions(
            artifact,
            judging=Judging.build({"box": "tensor"}),
            tolerance=ToleranceOptions(atols={"box": 0.1}),
        )
    )
    assert judged.verdict == "passed" and judged.outputs["box"].atol == 0.1


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> int:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    _, err = capsys.readouterr()
    if stopped.value.code == 4:
        assert "box not judged" in err and "--allow-unjudged" in err
    return int(stopped.value.code or 0)


def test_a_badly_calibrated_sigmoid_classifier_fails_on_its_own_data(tmp_path: Path) -> None:
    """Before: int8 calibrated on data 100x off scale passed convert and validate (no gating
    check on a [N, 1] output), and bench showed agreement 1.0 from an argmax over one column."""
    artifact = tmp_path / "sigmoid-int8"
    api.convert(
        ConvertOptions(
            sigmoid_model(),
            "int8",
            backend="ort",
            output=artifact,
            calib_data=str(binary_npz(100.0)),
        )
    )
    with pytest.raises(AccuracyError, match=r"score decision agreement at 0\.5") as caught:
        api.validate(ValidateOptions(artifact, data=str(binary_npz(1.0))))
    result = caught.value.result
    assert isinstance(result, ValidateResult) and result.verdict == "failed"
    assert result.outputs["score"].role == "binary"
    assert result.top1_agreement is not None and result.top1_agreement < 0.97
    assert result.accuracy_drop is not None and result.accuracy_drop > 0.02
    assert any("different scales" in warning for warning in result.warnings)
    passed = [w for w in result.warnings if "manifest says" in w and "PASSED" in w]
    assert passed and "no output was compared" not in passed[0]  # it compared `score`

    benched = api.bench(BenchOptions((artifact,), eval_data=str(binary_npz(1.0)), **QUICK_BENCH))
    int8 = next(model for model in benched.models if not model.is_baseline)
    assert int8.eval_samples == result.samples  # the same held-out samples
    assert int8.top1_agreement == pytest.approx(result.top1_agreement, abs=0.01)
    assert int8.accuracy == pytest.approx(result.accuracy_candidate, abs=0.01)
    # bench says what validate says: calibrated on data 100x the scale of the data judged here.
    assert any("different scales" in warning for warning in benched.warnings)


def test_preprocessing_travels_from_convert_to_validate_and_bench(tmp_path: Path) -> None:
    """Before: `convert --image-scale 1` was not recorded; validate scaled the images by 1/255
    and reported "passed" at accuracy 0.2, bench showed 0.2 without a word."""
    artifact = tmp_path / "image-int8"
    converted = api.convert(
        ConvertOptions(
            image_model(),
            "int8",
            backend="ort",
            output=artifact,
            calib_data=str(image_folder()),
            preprocessing=PreprocessingOptions(scale=1.0),
        )
    ).to_json()
    recorded = converted["manifest"]["data_contract"]
    assert recorded["preprocessing"]["scale"] == 1.0
    assert recorded["preprocessing"]["sources"]["scale"] == "option"
    assert recorded["split"] == "held-out" and recorded["preprocessing_applied"]

    validated = api.validate(ValidateOptions(artifact))
    contract = validated.data_contract
    assert (contract.data, contract.data_from) == (str(image_folder()), "manifest")
    assert contract.preprocessing.sources["scale"] == "manifest (option)"
    accuracy = converted["validation"]["accuracy_reference"]
    assert accuracy > 0.9 and validated.accuracy_reference == accuracy

    benched = api.bench(BenchOptions((artifact,), eval_data=str(image_folder()), **QUICK_BENCH))
    assert benched.settings.data_contract is not None
    assert benched.settings.data_contract.preprocessing.scale == 1.0
    for model in benched.models:
        assert model.eval_samples == validated.samples
        assert model.accuracy == pytest.approx(accuracy, abs=0.01)


def test_an_artifact_that_failed_is_said_so_by_validate_and_bench(tmp_path: Path) -> None:
    """Before: validate reported "passed" (on random data) for an artifact whose manifest says
    failed, and bench showed its speed without a word. (Point decisions: 108 held-out samples
    cannot show fp32's 0.99 at 95%.)"""
    artifact = tmp_path / "box-fp32"
    with pytest.raises(AccuracyError):
        api.convert(
            ConvertOptions(
                box_label_model(),
                "fp32",
                backend="ort",
                output=artifact,
                calib_data=str(box_label_npz()),
                tolerance=ToleranceOptions(atol=1e-12),
                confidence=0.0,
            )
        )
    # The default tolerance passes it (the recorded 1e-12 would not).
    validated = api.validate(ValidateOptions(artifact, current_rules=True))
    assert validated.data_contract.data == str(box_label_npz())  # what convert used
    # Float arrays are fed as given: the contract must not claim a 1/255 scale was applied.
    for contract in (read_manifest(artifact).data_contract, validated.data_contract):
        assert contract is not None and contract.preprocessing_applied is False
        assert contract.summary.startswith("none applied")
        assert contract.to_json()["preprocessing"]["summary"] == contract.summary
    assert validated.verdict == "passed" and validated.manifest_status == "failed"
    assert any("its manifest says" in w and "FAILED" in w for w in validated.warnings)

    benched = api.bench(BenchOptions((artifact,), baseline="first", **QUICK_BENCH))
    rows = [row for row in benched.results if row.label == artifact.name]
    assert rows and all(row.validation == "failed" for row in rows)
    assert any(artifact.name in w and "FAILED" in w for w in benched.warnings)


def test_bench_evaluates_on_the_held_out_split_unless_told(digits_saved_model: Path) -> None:
    """Before: bench --eval-data digits scored all 1,797 digits (train split included) while
    validate and release scored the 450 held out."""
    native = (digits_saved_model,)
    held_out = api.bench(BenchOptions(native, eval_data="digits", **QUICK_BENCH))
    assert held_out.models[0].eval_samples == 450
    assert held_out.settings.eval_split == "held-out"
    every = api.bench(BenchOptions(native, eval_data="digits", split="all", **QUICK_BENCH))
    assert every.models[0].eval_samples == 1797


def test_an_int8_verdict_on_seven_samples_is_inconclusive_and_on_all_held_out_decided(
    digits_saved_model: Path,
    digits_reference: dict[str, Any],
    digits_held_out: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: seven agreeing samples "passed" int8's 0.97 (exit 0), though 7 of 7 has a 95%
    lower bound of 0.65. Now: inconclusive (exit 4), naming the samples seen and needed, said
    before any work; the same artifact on all 450 held-out digits is decided, with an interval
    narrower than 0.05 that holds ONNX Runtime's own agreement with TensorFlow."""
    artifact = tmp_path / "int8-7"
    argv = ["convert", str(digits_saved_model), "--precision", "int8", "--backend", "ort",
            "--calib-data", "digits", "--calib-samples", "256", "--validate-samples", "7",
            "--no-fallback", "--output", str(artifact)]  # flags beside values # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    _, err = capsys.readouterr()
    assert stopped.value.code == 4 and "(inconclusive)" in err
    assert "7 samples of digits[test] cannot show a top-1 agreement of 0.97" in err  # before work
    assert "n=7" in err and "about 125 at this rate would decide it" in err
    assert read_manifest(artifact).status == "inconclusive"

    validated = api.validate(ValidateOptions(artifact))  # every held-out digit (450)
    assert validated.samples == 450 and validated.verdict == "passed"
    low, high = validated.top1_agreement_ci95 or (0.0, 1.0)
    assert high - low < 0.05 and low >= 0.97
    assert any("its manifest says" in w and "INCONCLUSIVE" in w for w in validated.warnings)
    payload = artifact / read_manifest(artifact).payload
    with OrtRunner(payload) as runner:
        int8 = run_batched(runner, digits_held_out)
    independent = float(
        (int8["probabilities"].argmax(1) == digits_reference["probabilities"].argmax(1)).mean()
    )
    assert low <= independent <= high

    point = api.validate(ValidateOptions(artifact, samples=7, confidence=0.0))
    assert point.verdict == "passed" and point.confidence == 0.0  # the rule before intervals
