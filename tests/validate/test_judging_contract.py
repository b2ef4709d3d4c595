"""An artifact keeps the rules it was judged by: the judging contract convert records whole is
what validate and the shadow check read back, whatever this trtconv's defaults have become."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from trtconv import api
from trtconv.artifact.manifest import read_manifest
from trtconv.backends import registry
from trtconv.core.errors import AccuracyError
from trtconv.core.judging_options import ToleranceOptions
from trtconv.options.convert import ConvertOptions
from trtconv.options.validate import ValidateOptions
from trtconv.outputs.compare import run_batched
from trtconv.outputs.tolerance import TOLERANCES
from trtconv.serving.server.shadow.judge import ShadowJudge
from trtconv.serving.server.shadow.verdict import HOLDING, LiveVerdict

pytestmark = pytest.mark.tensorflow

SAMPLES = 400


@pytest.fixture(scope="module")
def digits_int8(digits_saved_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """digits int8 (ONNX Runtime), converted under this trtconv's defaults, one output's atol
    stated: the manifest records its contract."""
    output = tmp_path_factory.mktemp("contract") / "digits-int8"
    stated = ToleranceOptions(atols={"probabilities": 0.2})
    options = ConvertOptions(
        digits_saved_model,
        "int8",
        backend="ort",
        output=output,
        tolerance=stated,
        validate_samples=SAMPLES,
        fallback=False,
    )
    assert api.convert(options).validation.verdict == "passed"
    return output


def _live_state(artifact: Path, native: Any, held_out: Any) -> str:
    """The shadow check's verdict on `held_out`: its judge's counts, decided as the live
    verdict decides them."""
    judge = ShadowJudge(read_manifest(artifact))
    with registry.open_runner(artifact) as candidate:
        served = run_batched(candidate, held_out)
    reference = run_batched(native, held_out)
    verdict = LiveVerdict(judge.confidence)
    verdict.add(judge.counts(reference, served, held_out.inputs))
    return verdict.state


def test_the_manifest_holds_the_whole_contract_and_where_each_rule_came_from(
    digits_int8: Path,
) -> None:
    document = json.loads((digits_int8 / "manifest.json").read_text())
    contract = document["contract"]
    assert contract["precision"] == "int8" and contract["trtconv_version"]
    rules = contract["rules"]
    table = TOLERANCES["int8"]
    assert rules["min_top1_agreement"] == table.min_top1_agreement
    assert rules["output_atol"] == {"probabilities": 0.2} and rules["confidence"] == 0.95
    assert contract["sources"] == {"output_atol.probabilities": "option"}
    output = contract["outputs"]["probabilities"]
    assert output["role"] == "classes" and output["role_source"].startswith("inferred")
    assert output["atol"] == {"value": 0.2, "source": "option"}
    assert output["min_top1_agreement"] == {"value": table.min_top1_agreement, "source": "default"}


def test_validate_and_the_shadow_check_keep_the_verdict_when_the_defaults_change(
    digits_int8: Path,
    digits_native: Any,
    digits_held_out: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Converted with int8's top-1 budget at 0.97; a later trtconv asking 0.9999 (no sample
    count here can show it) judges the artifact as it was judged: passed, by validate and by the
    shadow check alike. --current-rules re-judges it by today's."""
    held_out = digits_held_out.head(SAMPLES)
    before = api.validate(ValidateOptions(digits_int8, samples=SAMPLES))
    live_before = _live_state(digits_int8, digits_native, held_out)
    assert before.verdict == "passed" and live_before == HOLDING

    stricter = replace(TOLERANCES["int8"], min_top1_agreement=0.9999)
    monkeypatch.setitem(TOLERANCES, "int8", stricter)
    after = api.validate(ValidateOptions(digits_int8, samples=SAMPLES))
    assert after.verdict == before.verdict and after.min_top1_agreement == 0.97
    assert after.outputs["probabilities"].atol == 0.2  # the stated atol, read back
    assert _live_state(digits_int8, digits_native, held_out) == live_before
    with pytest.raises(AccuracyError) as today:
        api.validate(ValidateOptions(digits_int8, samples=SAMPLES, current_rules=True))
    assert today.value.result is not None
    assert today.value.result.min_top1_agreement == 0.9999


def test_an_earlier_manifest_is_judged_by_what_it_records_said_in_one_line(
    digits_int8: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A manifest without the contract (an earlier trtconv's): its validation's bounds and the
    atol each output was validated at are kept; the result says so in one line."""
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    for path in digits_int8.iterdir():
        (earlier / path.name).write_bytes(path.read_bytes())
    document = json.loads((earlier / "manifest.json").read_text())
    del document["contract"]
    (earlier / "manifest.json").write_text(json.dumps(document))
    result = api.validate(ValidateOptions(earlier, samples=SAMPLES))
    assert result.outputs["probabilities"].atol == 0.2
    [line] = [w for w in result.warnings if "holds no judging contract" in w]
    assert "output_atol" in line and "min_top1_agreement" in line and "int8 defaults" in line
