"""The int8 precision ladder on a model that full int8 breaks on any CPU (precision_fixtures).

The outlier model's hidden activation carries a huge offset on three channels: quantised with
one scale, its other channels vanish, so full int8 misses the budget whatever the scheme, and
keeping the two layers that quantise that activation (hidden, logits) in float restores it.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from tests.helpers.precision_fixtures import OUTLIER_LAYERS, outlier_model
from trtconv import api
from trtconv.artifact.manifest import read_manifest
from trtconv.cli import main
from trtconv.cli.convert import render_conversion
from trtconv.convert import ConvertResult
from trtconv.core.errors import AccuracyError
from trtconv.options.convert import CALIB_METHODS, DEFAULT_CALIB_METHOD, ConvertOptions
from trtconv.quantize.search import CALIBRATION_SPARE

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # trains a tiny model, runs tf2onnx and ONNX Runtime


def _ladder(result: dict[str, Any]) -> dict[str, Any]:
    return result["manifest"]["conversion_summary"]["quantization"]["ladder"]


def _graph(path: Path) -> Any:
    import onnx

    return onnx.load(str(path)).graph


def _dequantized(graph: Any) -> set[str]:
    """Tensors produced by DequantizeLinear nodes."""
    return {out for node in graph.node if node.op_type == "DequantizeLinear" for out in node.output}


def _layer_of(node: dict[str, Any]) -> str:
    # Keras 3 traces layer "hidden" under the name scope "hidden_1".
    return str(node["tf_layer"]).rsplit("/", 1)[-1].removesuffix("_1")


def _check_kept_float(model: Path, kept: list[dict[str, Any]]) -> None:
    """Kept nodes use float weights and nothing quantises the tensor between them; the
    convolution is still int8."""
    graph = _graph(model)
    dequantized = _dequantized(graph)
    initializers = {init.name: init for init in graph.initializer}
    nodes = {_layer_of(entry): entry["node"] for entry in kept}
    by_name = {node.name: node for node in graph.node}
    hidden, logits = (by_name[nodes[layer]] for layer in OUTLIER_LAYERS)
    for node in (hidden, logits):
        weight = node.input[1]
        assert weight not in dequantized and initializers[weight].data_type == 1  # float32
    between = set(hidden.output) | {
        out for node in graph.node if set(node.input) & set(hidden.output) for out in node.output
    }
    assert not set(logits.input) & dequantized
    assert not [n for n in graph.node if n.op_type == "QuantizeLinear" and n.input[0] in between]
    conv = next(node for node in graph.node if node.op_type == "Conv")
    assert set(conv.input[:2]) <= dequantized


@pytest.fixture(scope="module")
def climbed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[tuple]]:
    """api.convert of the outlier model to ort int8, and the progress calls it made."""
    calls: list[tuple] = []
    output = tmp_path_factory.mktemp("ladder") / "outlier-int8"
    result = api.convert(
        ConvertOptions(
            outlier_model(),
            "int8",
            backend="ort",
            output=output,
            calib_data="digits",
            batch_sizes=(1, 8),
        ),
        progress=lambda done, total, label: calls.append((done, total, label)),
    ).to_json()
    return result, calls


def test_full_int8_misses_and_the_ladder_keeps_the_outlier_layers_in_float(
    climbed: tuple[dict[str, Any], list[tuple]],
) -> None:
    result, _ = climbed
    ladder = _ladder(result)
    steps = ladder["steps"]
    full, *rest = steps
    assert full["stage"] == "full int8" and not full["meets_budget"]
    assert full["top1_agreement"] < 0.9  # the quantisation error itself, on any CPU
    schemes = [s for s in steps if s["stage"] == "scheme"]
    others = {f"{m} calibration" for m in CALIB_METHODS if m != DEFAULT_CALIB_METHOD}
    assert {s["change"] for s in schemes} >= others
    assert not any(s["meets_budget"] for s in schemes)
    assert rest[len(schemes)]["stage"] == "sensitivity"
    chosen = steps[ladder["chosen_step"]]
    assert chosen["stage"] == "float layers" and chosen["meets_budget"] and ladder["met_budget"]
    assert all(
        not s["meets_budget"]
        for s in steps[: ladder["chosen_step"]]
        if s["meets_budget"] is not None
    )
    kept = ladder["kept_float"]
    assert sorted(_layer_of(node) for node in kept) == sorted(OUTLIER_LAYERS)
    assert all(node["op_type"] == "Gemm" and node["tf_op"].endswith("/MatMul") for node in kept)
    # Ranked first by the probe: the two nodes that quantise the offset activation.
    assert {n["node"] for n in ladder["sensitivity"][:2]} == {n["node"] for n in kept}
    quantization = result["manifest"]["conversion_summary"]["quantization"]
    assert set(quantization["kept_float"]) >= {node["node"] for node in kept}
    _check_kept_float(Path(result["artifact"]) / "model.onnx", kept)
    # Validated once, on held-out data the search never saw.
    validation = result["validation"]
    assert validation["passed"] and validation["top1_agreement"] >= 0.97
    assert read_manifest(Path(result["artifact"])).status == "passed"
    search = ladder["search_data"]
    # digits[test] is all validated on (450 < --validate-samples 1000): spare training data.
    assert search["part"] == "digits[train][500:1012]" and search["drawn_from"] == CALIBRATION_SPARE
    assert validation["data_source"] == "digits[test]" and validation["samples"] == 450
    assert search["note"] is None  # 512 samples resolve 0.97 (15 disagreements allowed)
    assert ladder["budget"] == {"min_top1_agreement": 0.97, "max_accuracy_drop": 0.02, "atol": None}


def test_the_ladder_records_speed_and_reports_progress_and_renders(
    climbed: tuple[dict[str, Any], list[tuple]],
) -> None:
    result, calls = climbed
    ladder = _ladder(result)
    speed = ladder["speed"]
    assert [row["batch_size"] for row in speed["rows"]] == [1, 8]
    assert {"fp32_latency_ms", "full_int8_latency_ms", "chosen_latency_ms"} <= set(speed["rows"][0])
    # The ladder's steps show within convert's "quantizing to int8 and converting" step.
    step = "quantizing to int8 and converting with ort: "
    ladder_calls = [call for call in calls if call[2].startswith(step)]
    labels = [label.removeprefix(step) for _, _, label in ladder_calls]
    assert labels[0].startswith("full int8") and any(x.startswith("sensitivity") for x in labels)
    assert len({done for done, _, _ in ladder_calls}) == 1  # one step of convert's
    assert all(0 <= done < total for done, total, _ in calls[:-1])
    assert calls[-1][:2] == (calls[-1][1], calls[-1][1])  # then convert is done
    json.dumps(result)  # --json prints this document
    console = Console(file=io.StringIO(), width=200)
    render_conversion(ConvertResult.from_json(result), console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "int8 ladder: 2 node(s) kept in float meet the budget" in text
    assert "kept in float: " in text and "hidden_1 (Gemm)" in text
    assert f"{len(ladder['steps']) - 1}  float layers" in text and "✓ chosen" in text


def test_no_fallback_is_the_old_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    output = tmp_path / "outlier-int8"
    args = ["convert", str(outlier_model()), "--precision", "int8", "--backend", "ort"]
    args += ["--calib-data", "digits", "--output", str(output), "--no-fallback", "--json"]
    with pytest.raises(SystemExit) as stopped:
        main(args)
    out, _ = capsys.readouterr()
    assert stopped.value.code == 4
    result = json.loads(out)
    assert _ladder(result) is None and not result["validation"]["passed"]
    assert result["validation"]["top1_agreement"] < 0.9
    assert read_manifest(output).status == "failed"
    # No search slice read: calibration is the whole of --calib-samples, as before the ladder.
    assert result["manifest"]["calibration"]["samples"] == 480


@pytest.mark.vnni  # met_budget: the S8S8 model's accuracy on ONNX Runtime's VNNI kernels
def test_trt_s8s8_model_gets_the_same_exclusions(
    climbed: tuple[dict[str, Any], list[tuple]], tmp_path: Path
) -> None:
    """The trt backend's Q/DQ model comes from the same hook (TensorRT itself cannot run here)."""
    from trtconv.backends import registry
    from trtconv.backends.trt.builder import build_plan
    from trtconv.backends.trt.converter import source_onnx
    from trtconv.convert.data import read_data
    from trtconv.convert.plan import ConversionPlan
    from trtconv.convert.workspace import checked_export, conversion_request, open_workspace
    from trtconv.core.progress import Steps
    from trtconv.protocol.runner import RunOptions
    from trtconv.quantize.checks import tensorrt_qdq_problems

    # 500 calibration and 300 validation samples leave 150 held-out samples: too few to show the
    # budget (300 are needed), so the search scores spare calibration samples, as the ORT
    # ladder's does (every held-out digit validated on).
    options = ConvertOptions(
        outlier_model(),
        "int8",
        backend="trt",
        calib_data="digits",
        calib_samples=500,
        validate_samples=300,
        batch_sizes=(1,),
        calib_method="entropy",
    )
    plan = ConversionPlan(options, registry.get("trt"), "int8", tmp_path / "unused", "test")
    steps = Steps(None, 1)
    with registry.native().runner(outlier_model(), None, RunOptions()) as native:
        data = read_data(options, native, int8=True)
        assert data.search is not None and data.search.source == "digits[train][500:1012]"
        assert len(data.held_out) == 300
        space = open_workspace(plan, native, data, tmp_path)
        request = conversion_request(plan, space, tmp_path / "out", steps)
        request.onnx_path, _ = checked_export(plan, space, steps)
        # The trt backend's own path to its S8S8 model, up to TensorRT (absent here).
        qdq, summary = source_onnx(request, build_plan(11, "int8"), tmp_path)
    assert summary is not None
    quantization = summary.to_json()  # the block the manifest records
    assert quantization["scheme"] == "s8s8" and quantization["int8_target"] is None
    ladder = quantization["ladder"]
    assert ladder["met_budget"] and ladder["speed"] is None  # TensorRT's speed is the engine's
    assert not any(s["change"].startswith("7-bit") for s in ladder["steps"])
    ort_kept = {node["node"] for node in _ladder(climbed[0])["kept_float"]}
    assert {node["node"] for node in ladder["kept_float"]} == ort_kept
    graph = _graph(qdq)
    zero_points = {init.name: init for init in graph.initializer}
    q_nodes = [node for node in graph.node if node.op_type == "QuantizeLinear"]
    assert all(zero_points[node.input[2]].data_type == 3 for node in q_nodes)  # int8: S8S8
    _check_kept_float(qdq, ladder["kept_float"])
    assert tensorrt_qdq_problems(qdq) == []  # what TensorRT would build


def test_the_time_limit_stops_the_climb(tmp_path: Path) -> None:
    """Out of time after full int8: the best model so far, the budget not met, exit 4."""
    with pytest.raises(AccuracyError) as failed:
        api.convert(
            ConvertOptions(
                outlier_model(),
                "int8",
                backend="ort",
                output=tmp_path / "limited",
                calib_data="digits",
                batch_sizes=(1,),
                fallback_time_limit_s=1e-3,
            )
        )
    assert isinstance(failed.value.result, ConvertResult)
    result = failed.value.result.to_json()
    ladder = _ladder(result)
    assert [s["stage"] for s in ladder["steps"]] == ["full int8"]
    assert not ladder["met_budget"] and "time limit" in ladder["outcome"]
    assert not result["validation"]["passed"]
    assert np.isclose(ladder["time_limit_s"], 1e-3)
