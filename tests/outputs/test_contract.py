"""The judging contract resolved, recorded and read back: what it holds does not move with this
trtconv's defaults."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import RELEASE_CONFIG, OutputRole, ToleranceOptions
from trtconv.outputs.contract import (
    ContractRecord,
    Stated,
    export_rules,
    from_earlier,
    from_record,
    resolve,
)
from trtconv.outputs.roles import JudgingRecord
from trtconv.outputs.tolerance import TOLERANCES
from trtconv.outputs.validation_result import OutputComparison, ValidationReport

ROLES = {"probabilities": OutputRole("classes", "inferred: softmax")}


def _read_back(record: ContractRecord) -> ContractRecord:
    """The record as a manifest holds it: through its JSON."""
    return ContractRecord.from_json(record.to_json())


def test_defaults_are_the_tables_and_stated_values_say_who_stated_them() -> None:
    contract = resolve("int8")
    assert contract.sources == {} and contract.note is None
    assert contract.tolerance.min_top1_agreement == TOLERANCES["int8"].min_top1_agreement
    stated = Stated(
        ToleranceOptions(atols={"probabilities": 0.2}, source=RELEASE_CONFIG),
        min_top1_agreement=0.99,
    )
    ruled = resolve("int8", stated)
    assert ruled.sources == {
        "output_atol.probabilities": RELEASE_CONFIG,
        "min_top1_agreement": RELEASE_CONFIG,
    }
    [rules] = ruled.record(ROLES).outputs.values()
    assert (rules.atol.value, rules.atol.source) == (0.2, RELEASE_CONFIG)
    assert (rules.max_accuracy_drop.value, rules.max_accuracy_drop.source) == (0.02, "default")
    assert rules.role == "classes" and rules.role_source == "inferred: softmax"


def test_a_recorded_contract_keeps_every_rule_when_the_defaults_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """fp32's own table and fp16's (the budget fp32's decision outputs fall back to) both
    change after the conversion; the recorded rules are read back exactly."""
    stated = Stated(ToleranceOptions(atol=3e-3, rtol=1e-4))
    record = _read_back(resolve("fp32", stated).record(ROLES))
    converted = resolve("fp32", stated).tolerance
    monkeypatch.setitem(TOLERANCES, "fp32", replace(TOLERANCES["fp32"], atol=1e-9, rtol=0.0))
    monkeypatch.setitem(TOLERANCES, "fp16", replace(TOLERANCES["fp16"], min_top1_agreement=0.5))
    again = resolve("fp32", None, from_record(record))
    assert again.tolerance == converted
    assert again.tolerance.for_decisions().min_top1_agreement == 0.98  # fp16's at conversion
    assert again.sources["atol"] == "manifest (option)"
    assert resolve("fp32").tolerance.atol == 1e-9  # today's rules: what --current-rules reads


def test_what_is_stated_now_applies_over_the_recorded_rules() -> None:
    record = _read_back(resolve("int8", Stated(confidence=0.9)).record(ROLES))
    now = Stated(ToleranceOptions(atols={"probabilities": 0.1}))
    again = resolve("int8", now, from_record(record))
    assert again.tolerance.confidence == 0.9 and again.tolerance.atol_for("probabilities") == 0.1
    assert again.sources["output_atol.probabilities"] == "option"


def test_an_earlier_manifest_keeps_what_it_records_and_says_so() -> None:
    """No contract block: each output's validated atol and rtol, the validation's budget and
    confidence are kept; the rest is today's; one line says which."""
    output = OutputComparison(
        max_abs_error=1e-3,
        max_rel_error=None,
        atol=3e-3,
        passed=True,
        shape_matches=True,
        rtol=1e-4,
    )
    report = ValidationReport(200, "digits", 0.9, 0.005, {"p": output}, confidence=0.99)
    contract = from_earlier("fp32", JudgingRecord(), report)
    tolerance = contract.tolerance
    assert tolerance.atol_for("p") == 3e-3 and tolerance.rtol_for("p") == 1e-4
    assert (tolerance.min_top1_agreement, tolerance.confidence) == (0.9, 0.99)
    assert not tolerance.values_decide  # its own limit, as convert's option made it
    assert contract.note is not None and "earlier trtconv" in contract.note
    assert "output_atol" in contract.note and "fp32 defaults" in contract.note


def test_the_export_check_is_loosened_never_tightened() -> None:
    fp32 = TOLERANCES["fp32"]
    assert export_rules(Stated(ToleranceOptions(atol=1e-9))).atol == fp32.atol
    assert export_rules(Stated(ToleranceOptions(atol=0.05))).atol == 0.05


def test_bad_rules_are_refused_in_one_sentence() -> None:
    with pytest.raises(UsageError, match="Unknown precision 'int4'"):
        resolve("int4")
    with pytest.raises(UsageError, match="--min-top1-agreement must be between 0 and 1"):
        resolve("int8", Stated(min_top1_agreement=1.5))
    with pytest.raises(UsageError, match="must be positive"):
        resolve("fp32", Stated(ToleranceOptions(atol=0.0)))
