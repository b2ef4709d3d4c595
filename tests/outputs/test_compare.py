"""The comparison and the per-precision tolerance table (numpy only, no models)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.core.data_contract import DataContract
from trtconv.core.errors import AccuracyError, UsageError
from trtconv.core.judging_options import OutputRole
from trtconv.core.precision import PRECISIONS
from trtconv.outputs.compare import compare, raise_if_failed
from trtconv.outputs.tolerance import TOLERANCES
from trtconv.outputs.validation_result import ValidatingMachine, ValidationReport
from trtconv.validate.pipeline import ValidateResult


# 500 samples: enough for identical outputs to show fp32's 0.99 agreement (381 would).
def _probabilities(samples: int = 500, classes: int = 10, seed: int = 0) -> np.ndarray:
    logits = np.random.default_rng(seed).normal(size=(samples, classes)) * 3
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)


def test_every_precision_has_a_tolerance_and_they_loosen() -> None:
    assert set(TOLERANCES) == set(PRECISIONS)
    atols = [TOLERANCES[p].atol for p in ("fp32", "tf32", "fp16")]
    assert atols == sorted(atols)  # type: ignore[type-var]
    assert TOLERANCES["int8"].atol is None and TOLERANCES["int8"].min_top1_agreement == 0.97


def test_tolerance_override_and_errors() -> None:
    assert rules("int8", atol=0.05).atol == 0.05
    assert rules("int8", atol=0.05).min_top1_agreement == 0.97
    with pytest.raises(UsageError, match="Unknown precision 'int4'"):
        rules("int4")
    with pytest.raises(UsageError, match="must be positive"):
        rules("fp32", atol=0.0)


def test_identical_outputs_pass_every_check() -> None:
    probs = _probabilities()
    labels = probs.argmax(axis=1)
    report = compare({"p": probs}, {"p": probs.copy()}, rules("fp32"), labels, "unit")
    assert report.passed and report.top1_agreement == 1.0 and report.accuracy_drop == 0.0
    assert report.outputs["p"].max_abs_error == 0.0
    assert report.accuracy_reference == report.accuracy_candidate == 1.0
    names = [c.name for c in report.checks]
    assert names == ["p values", "p top-1 agreement", "p accuracy drop", "p margins"]
    # fp32 is decided by its values: the rates are reported, the near-ties named.
    assert [c.gating for c in report.checks] == [True, False, False, False]


def test_small_noise_fails_an_fp32_tensor_but_passes_int8() -> None:
    probs = _probabilities()
    noisy = probs + np.float32(1e-3)
    tensor = {"p": OutputRole("tensor", "option")}
    fp32 = compare({"p": probs}, {"p": noisy}, rules("fp32"), roles=tensor)
    assert not fp32.passed
    assert fp32.outputs["p"].max_abs_error == pytest.approx(1e-3, rel=1e-3)
    assert compare({"p": probs}, {"p": noisy}, rules("int8")).passed


def test_small_noise_on_fp32_class_scores_is_judged_by_their_decisions() -> None:
    """float32 not reproduced (1e-3 on every probability): a classes output is held to what
    fp16 would be, its decisions against fp16's budget; the values line says why."""
    probs = _probabilities()
    noisy = probs + np.float32(1e-3)
    fp32 = compare({"p": probs}, {"p": noisy}, rules("fp32"))
    assert fp32.passed
    values = next(c for c in fp32.checks if c.name == "p values")
    assert not values.gating and "float32 is not reproduced" in values.detail
    agreement = next(c for c in fp32.checks if c.name == "p top-1 agreement")
    assert agreement.gating and "minimum 0.98" in agreement.detail
    output = fp32.outputs["p"]
    assert output.values_not_reproduced and output.agreement_minimum == 0.98
    # NaN still fails, and a tolerance the user gives the output keeps its values rule.
    broken = noisy.copy()
    broken[3, 2] = np.nan
    assert compare({"p": probs}, {"p": broken}, rules("fp32")).verdict == "failed"
    stated = rules("fp32", atols={"p": 1e-4})
    assert compare({"p": probs}, {"p": noisy}, stated).verdict == "failed"
    # Beyond fp16's own tolerance the rule holds, and the line no longer blames float32.
    far = compare({"p": probs}, {"p": probs + np.float32(0.03)}, rules("fp32"))
    values = next(c for c in far.checks if c.name == "p values")
    assert not values.gating and "float32 is not reproduced" not in values.detail
    assert "differ by more than fp32's and fp16's tolerances" in values.detail


def test_every_mismatch_is_collected_then_one_error() -> None:
    probs = _probabilities()
    labels = probs.argmax(axis=1)
    flipped = probs[:, ::-1].copy()  # different top-1 almost everywhere
    report = compare({"p": probs}, {"p": flipped}, rules("fp16"), labels)
    failed = [c.name for c in report.checks if not c.passed]
    # At fp16 a classes output is decided by its decisions; its values are reported.
    assert failed == ["p top-1 agreement", "p accuracy drop"]
    assert report.accuracy_drop is not None and report.accuracy_drop > 0.5
    with pytest.raises(AccuracyError) as caught:
        raise_if_failed(report, "the int8 artifact")
    lines = str(caught.value).splitlines()  # a sentence, then one line per failed check
    assert lines[0] == "the int8 artifact is outside tolerance:"
    assert [line.split(":")[0] for line in lines[1:]] == [f"  - {name}" for name in failed]
    assert caught.value.exit_code == 4 and caught.value.result is report


def test_shape_mismatch_missing_output_and_nan_fail() -> None:
    probs = _probabilities()
    report = compare({"p": probs, "q": probs}, {"p": probs[:, :5]}, rules("int8"))
    names = {c.name: c.passed for c in report.checks}
    assert names == {"outputs present": False, "p shape": False}
    assert not report.passed
    broken = probs.copy()
    broken[0, 0] = np.nan
    assert not compare({"p": probs}, {"p": broken}, rules("int8")).passed


def test_relative_error_ignores_tiny_references() -> None:
    reference = np.array([[1e-9, 1.0 - 1e-9]], np.float32)
    candidate = np.array([[2e-9, 1.0 - 2e-9]], np.float32)
    report = compare({"p": reference}, {"p": candidate}, rules("fp32"))
    max_rel_error = report.outputs["p"].max_rel_error
    assert max_rel_error is not None and max_rel_error < 1e-5


# The validation report's keys, in order (validate's result holds them between its own).
REPORT_KEYS = [
    "samples",
    "data_source",
    "outputs",
    "top1_agreement",
    "top1_agreement_ci95",
    "min_top1_agreement",
    "accuracy_reference",
    "accuracy_reference_ci95",
    "accuracy_candidate",
    "accuracy_candidate_ci95",
    "accuracy_drop",
    "accuracy_drop_ci95",
    "max_accuracy_drop",
    "labels_output",
    "checks",
    "unjudged",
    "allow_unjudged",
    "confidence",
    "verdict",
    "passed",
]


def test_the_report_serialises_to_the_documented_keys() -> None:
    probs = _probabilities()
    report = compare({"p": probs}, {"p": probs}, rules("fp16"), probs.argmax(axis=1), "u")
    data = report.to_json()
    assert list(data) == REPORT_KEYS
    assert data["outputs"]["p"] == {
        "max_abs_error": 0.0,
        "max_rel_error": 0.0,
        "atol": 1e-2,
        "passed": True,
        "shape_matches": True,
        "role": "classes",
        "role_source": "inferred: rows of probabilities summing to 1",
        "judged": True,
        "agreement": 1.0,
        "accuracy_reference": 1.0,
        "accuracy_candidate": 1.0,
        "threshold": None,
        "tolerance": None,
        "agreement_ci95": data["outputs"]["p"]["agreement_ci95"],
        "accuracy_reference_ci95": data["accuracy_reference_ci95"],
        "accuracy_candidate_ci95": data["accuracy_candidate_ci95"],
        "accuracy_drop_ci95": data["accuracy_drop_ci95"],
        "within": {
            "bound": 1e-2,
            "samples_within": 500,
            "samples": 500,
            "share": 1.0,
            "share_ci95": data["top1_agreement_ci95"],
            "minimum": 0.98,
            "gating": False,
            "rtol": None,
        },
        "rtol": None,
        "values_not_reproduced": False,
        "agreement_minimum": None,
    }
    assert data["top1_agreement_ci95"] == data["outputs"]["p"]["agreement_ci95"]
    assert data["top1_agreement_ci95"][0] == pytest.approx(500 / (500 + 1.959964**2))
    assert data["top1_agreement_ci95"][1] == 1.0 and data["confidence"] == 0.95
    assert set(data["checks"][0]) == {
        "name",
        "passed",
        "detail",
        "output",
        "gating",
        "inconclusive",
    }
    assert data["accuracy_drop"] == 0.0 and data["passed"] is True
    assert data["verdict"] == "passed" and data["labels_output"] == "p"


def test_the_report_reads_back_as_itself() -> None:
    """A manifest's `validation` block is read back typed: same checks, same derived figures."""
    probs = _probabilities()
    flipped = probs[:, ::-1].copy()
    report = compare({"p": probs}, {"p": flipped}, rules("fp16"), probs.argmax(axis=1))
    report.precision, report.machine = "fp16", ValidatingMachine("x", "x86-vnni")
    report.batch_size, report.device = 32, "cpu"
    document = json.loads(json.dumps(report.to_json()))
    assert list(document)[-4:] == ["precision", "machine", "batch_size", "device"]
    again = ValidationReport.from_json(document)
    assert again == report and again.to_json() == document
    assert again.failures() == report.failures() and "p top-1 agreement" in again.failures()
    assert (again.verdict, again.passed) == ("failed", False)
    assert again.accuracy_drop == report.accuracy_drop and again.top1_agreement < 0.5


def test_validate_result_keeps_the_validate_document() -> None:
    """`trtconv validate --json` prints the header, the report's keys, then the warnings, in
    today's order; the result reads back as a ValidateResult."""
    probs = _probabilities()
    report = compare({"p": probs}, {"p": probs}, rules("int8"), probs.argmax(axis=1), "u")
    machine = ValidatingMachine("x", "x86-vnni")
    report.precision, report.machine, report.batch_size, report.device = "int8", machine, 32, "cpu"
    result = ValidateResult(
        **vars(report),
        artifact=Path("models/a"),
        reference=Path("models/m/saved_model"),
        backend="ort",
        manifest_status="passed",
        data_contract=DataContract(data="u"),
        warnings=["w"],
    )
    document = json.loads(json.dumps(result.to_json()))
    assert list(document) == [
        "schema_version",
        "artifact",
        "reference",
        "backend",
        "precision",
        "manifest_status",
        "data_contract",
        *REPORT_KEYS,
        "machine",
        "batch_size",
        "device",
        "warnings",
    ]
    assert document["artifact"] == "models/a" and document["precision"] == "int8"
    again = ValidateResult.from_json(document)
    assert again == result and again.to_json() == document
    assert again.passed and again.verdict == "passed" and again.artifact == Path("models/a")


def test_validation_batches_lie_inside_the_built_range() -> None:
    from trtconv.outputs.compare import validation_batches

    assert validation_batches(None) == (32, 1)  # ONNX Runtime, TensorFlow: any batch
    assert validation_batches((1, 8)) == (8, 1)  # an engine built for 1..8: never 32
    assert validation_batches((64, 128)) == (64, 64)  # smaller batches are padded to 64
    assert validation_batches((4, 64)) == (32, 4)
