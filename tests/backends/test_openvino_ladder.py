"""The int8 ladder on OpenVINO: NNCF's int8 first, NNCF's accuracy control when it misses.

The outlier model (precision_fixtures) loses top-1 agreement to int8 on any CPU: its hidden
activation carries a huge offset on three channels, so one int8 scale erases the others.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.helpers.precision_fixtures import OUTLIER_LAYERS, outlier_model
from trtconv import api
from trtconv.backends import registry
from trtconv.cli.convert import render_conversion
from trtconv.convert import ConvertResult
from trtconv.core.errors import AccuracyError
from trtconv.options.convert import ConvertOptions
from trtconv.outputs.confidence import rate_to_show
from trtconv.quantize.ladder_result import NncfLadderRecord
from trtconv.release.markdown import _ladder_lines
from trtconv.release.schema import release_schema

pytestmark = [pytest.mark.slow, pytest.mark.converts("openvino"), pytest.mark.tensorflow]


def _convert(output: Path, **settings: Any) -> dict[str, Any]:
    """api.convert of the outlier model to openvino int8; the result even when it fails."""
    try:
        options = ConvertOptions(
            outlier_model(),
            "int8",
            backend="openvino",
            output=output,
            calib_data="digits",
            batch_sizes=(1, 8),
            **settings,
        )
        return api.convert(options).to_json()
    except AccuracyError as exc:
        assert exc.exit_code == 4 and isinstance(exc.result, ConvertResult)
        return {**exc.result.to_json(), "raised": True}


def _quantization(result: dict[str, Any]) -> dict[str, Any]:
    quantization: dict[str, Any] = result["manifest"]["conversion_summary"]["quantization"]
    return quantization


def _rendered(result: dict[str, Any]) -> tuple[str, str]:
    """What `convert` prints and the release report's ladder section, for `result` (whose
    ladder record fits release.json's schema)."""
    import jsonschema

    console = Console(file=io.StringIO(), width=200)
    render_conversion(ConvertResult.from_json(result), console)
    ladder = _quantization(result)["ladder"]
    schema = release_schema()
    jsonschema.validate(ladder, {**schema["$defs"]["ladder"], "$defs": schema["$defs"]})
    record = NncfLadderRecord.from_json(ladder)
    assert json.dumps(record.to_json()) == json.dumps(ladder)  # writes the block it read
    markdown = "\n".join(_ladder_lines("ov-int8", record))
    return console.file.getvalue(), markdown  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def restored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _convert(tmp_path_factory.mktemp("ov-ladder") / "outlier-openvino-int8")


def test_without_fallback_nncf_int8_misses_the_budget(tmp_path: Path) -> None:
    result = _convert(tmp_path / "out", fallback=False)
    assert result.get("raised") and not result["validation"]["passed"]
    assert result["validation"]["top1_agreement"] < 0.97
    assert _quantization(result)["ladder"] is None
    assert _quantization(result)["float_weight_ops"] == []


def test_accuracy_control_keeps_the_outlier_layers_ops_in_float(restored: dict[str, Any]) -> None:
    import openvino as ov

    from trtconv.backends.openvino.quantize import weighted_ops

    assert not restored.get("raised") and restored["validation"]["passed"]
    ladder = _quantization(restored)["ladder"]
    full, control = ladder["steps"]
    assert full["change"] == f"full int8 (NNCF defaults, float parts in {_parts()})"
    assert not full["meets_budget"]
    assert control["stage"] == "accuracy control" and control["meets_budget"]
    assert control["top1_agreement"] > full["top1_agreement"]
    assert (ladder["chosen_step"], ladder["met_budget"]) == (1, True)
    kept = ladder["kept_float"]
    assert kept and control["change"] == f"NNCF accuracy control: {len(kept)} ops kept in float"
    layers = {node["tf_layer"].rsplit("/", 1)[-1].removesuffix("_1") for node in kept}
    assert layers <= set(OUTLIER_LAYERS) and {node["op_type"] for node in kept} == {"MatMul"}
    # NNCF aims for the agreement whose 95% interval on the 512-sample slice clears 0.97
    # (0.9863: 505 of 512), not for 0.97 itself, which the rule would call inconclusive.
    slice_samples = ladder["search_data"]["samples"]
    aim = rate_to_show(0.97, slice_samples)
    assert slice_samples == 512 and aim is not None
    assert ladder["accuracy_control"]["max_drop"] == pytest.approx(1 - aim, abs=1e-6)
    # The saved IR: the kept ops have float weights, the convolution is still int8.
    model = ov.Core().read_model(str(Path(restored["artifact"]) / "model.xml"))
    weights = weighted_ops(model)
    assert all(weights[node["node"]] is False for node in kept)
    assert [int8 for name, int8 in weights.items() if name not in {n["node"] for n in kept}]
    assert all(int8 for name, int8 in weights.items() if name not in {n["node"] for n in kept})
    assert _quantization(restored)["float_weight_ops"] == sorted(n["node"] for n in kept)
    # Kept ops compute in f32, as NNCF judged them, also where OpenVINO would pick bf16.
    assert restored["manifest"]["conversion_summary"]["inference_precision"] == "f32"
    json.dumps(restored)
    text, markdown = _rendered(restored)
    assert "1  accuracy control" in text and "✓ chosen" in text and "kept in float: " in text
    assert "NNCF accuracy control" in markdown and "Kept in float: " in markdown


def test_int8_that_meets_the_budget_records_one_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_accuracy_control(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("accuracy control ran although full int8 met the budget")

    target = "trtconv.backends.openvino.ladder.quantize_with_accuracy_control"
    monkeypatch.setattr(target, no_accuracy_control)
    result = _convert(tmp_path / "out", min_top1_agreement=0.8, max_accuracy_drop=0.2)
    assert result["validation"]["passed"]
    ladder = _quantization(result)["ladder"]
    assert [step["stage"] for step in ladder["steps"]] == ["full int8"]
    assert (ladder["chosen_step"], ladder["met_budget"], ladder["kept_float"]) == (0, True, [])
    assert ladder["outcome"] == "full int8 meets the budget"
    assert ladder["budget"]["min_top1_agreement"] == 0.8
    # Its float parts are pinned where they were scored and validated: bf16 on a CPU that
    # computes it natively (OpenVINO's own default there), else f32; the runner compiles so.
    assert result["manifest"]["conversion_summary"]["inference_precision"] == _parts()
    with registry.open_runner(Path(result["artifact"])) as runner:
        assert runner.runtime_properties().inference_precision_hint == _parts()
    _rendered(result)


def _parts() -> str:
    """The float parts of a full int8 artifact made here for this CPU."""
    from trtconv.backends.openvino.rules import int8_float_parts
    from trtconv.facts import probe_cpu

    return int8_float_parts("auto", probe_cpu().features)


def test_time_limit_spent_keeps_full_int8(tmp_path: Path) -> None:
    result = _convert(tmp_path / "out", fallback_time_limit_s=1e-6)
    assert result.get("raised")
    ladder = _quantization(result)["ladder"]
    assert len(ladder["steps"]) == 1 and not ladder["met_budget"]
    assert "time limit reached before accuracy control" in ladder["outcome"]
    text, markdown = _rendered(result)
    assert "budget not met" in text and "not timed by the ladder" in markdown
