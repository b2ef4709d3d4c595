"""`convert --precision fp16` from ONNX end to end: a model whose activations overflow float16 and
the digits CNN, converted here (no GPU needed), checked by a float16 emulation written in this
file (independent of trtconv's) against TensorFlow."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.helpers.convert_fixtures import work_dir
from tests.helpers.fp16_check import independent_emulation
from tests.helpers.model_cache import export_onnx_once
from tests.helpers.precision_fixtures import OVERFLOW_LAYERS, overflow_model
from trtconv.backends import registry
from trtconv.backends.tf_native import SavedModelRunner
from trtconv.calib.sources import load_digits
from trtconv.cli import main
from trtconv.cli._fp16 import render_fp16
from trtconv.convert.convert_result import ConvertResult
from trtconv.model.savedmodel import load_saved_model
from trtconv.onnxlib.export import to_float16
from trtconv.onnxlib.fp16 import Float16EmulationRunner
from trtconv.onnxlib.session import OrtRunner
from trtconv.protocol.runner import RunOptions

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # trains the models, exports them with tf2onnx, converts


def agreement(session: Any, saved_model: Path) -> float:
    """Top-1 agreement of `session` with TensorFlow on the held-out digits."""
    images = load_digits("test").x
    with SavedModelRunner(saved_model) as native:
        reference = native.infer({"image": images})["probabilities"]
    probabilities = session.run(["probabilities"], {"image": images})[0]
    return float((probabilities.argmax(1) == reference.argmax(1)).mean())


def convert_fp16(saved_model: Path, output: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    """`trtconv convert --backend ort --precision fp16 --calib-data digits --json`: its document."""
    argv = [str(saved_model), "--backend", "ort", "--precision", "fp16", "--calib-data", "digits"]
    with pytest.raises(SystemExit) as stopped:
        main(["convert", *argv, "--output", str(output), "--json"])
    out, err = capsys.readouterr()
    assert stopped.value.code in (0, None), err
    return json.loads(out)


def test_a_plain_float16_copy_overflows_and_the_cpu_provider_hides_it() -> None:
    import onnxruntime as ort

    saved_model = overflow_model()
    export, plain = work_dir() / "overflow.onnx", work_dir() / "overflow.plain-fp16.onnx"
    export_onnx_once(saved_model, export, load_saved_model(saved_model).signature)
    to_float16(export, plain)
    assert agreement(independent_emulation(plain), saved_model) < 0.5
    cpu = ort.InferenceSession(str(plain), providers=["CPUExecutionProvider"])
    assert agreement(cpu, saved_model) > 0.99  # float16 nodes computed in float32 by the CPU


@pytest.mark.no_gpu
@pytest.mark.converts("ort")
def test_ort_fp16_keeps_the_overflow_in_float32_and_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved_model = overflow_model()
    document = convert_fp16(saved_model, tmp_path / "fp16", capsys)
    assert document["validation"]["verdict"] == "passed"
    assert document["validation"]["device"] == "cpu (float16 emulation)"
    summary = document["manifest"]["conversion_summary"]
    assert summary["providers"] == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    block = summary["fp16"]
    assert block["validated_by"] == "float16 emulation on CPU"
    layers = {node["tf_layer"].split("/")[1] for node in block["kept_float32"]}
    assert layers == {f"{name}_1" for name in OVERFLOW_LAYERS}  # Keras 3 scopes end in "_1"
    ops = {(n["tf_layer"].split("/")[1], n["op_type"]) for n in block["kept_float32"]}
    assert {("wide_1", "MatMul"), ("norm_1", "ReduceMean")} <= ops
    assert block["float16_nodes"] > block["float32_nodes"]
    plain, mixed = (
        block["emulated_outputs"][k]["probabilities"] for k in ("plain_float16", "mixed")
    )
    assert plain["top1_agreement"] < 0.5 and mixed["top1_agreement"] >= 0.99
    artifact = tmp_path / "fp16" / "model.onnx"
    assert agreement(independent_emulation(artifact), saved_model) >= 0.99
    text = io.StringIO()
    fp16 = ConvertResult.from_json(document).fp16
    assert fp16 is not None and fp16.to_json() == block  # the record reads back as written
    render_fp16(fp16, Console(file=text, width=200))
    assert "kept float32" in text.getvalue() and "wide_1: MatMul, Add, Relu" in text.getvalue()


@pytest.mark.no_gpu
def test_an_fp16_artifact_runs_by_emulation_on_the_cpu_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    convert_fp16(overflow_model(), tmp_path / "fp16", capsys)
    for device in ("auto", "cpu"):
        runner = registry.open_runner(tmp_path / "fp16", RunOptions(device=device))
        assert isinstance(runner, Float16EmulationRunner)
        assert "float16 emulation" in runner.warnings[0]
    cuda = registry.open_runner(tmp_path / "fp16", RunOptions(device="cuda"))
    assert type(cuda) is OrtRunner and cuda.device == "cuda"


@pytest.mark.converts("ort")
def test_the_digits_cnn_stays_float16(
    digits_saved_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = convert_fp16(digits_saved_model, tmp_path / "digits", capsys)
    assert document["validation"]["verdict"] == "passed"
    block = document["manifest"]["conversion_summary"]["fp16"]
    assert block["float16_share"] >= 0.95 and block["kept_float32"] == []
    mixed = block["emulated_outputs"]["mixed"]["probabilities"]
    assert mixed["top1_agreement"] == 1.0
    session = independent_emulation(tmp_path / "digits" / "model.onnx")
    assert agreement(session, digits_saved_model) >= 0.99
