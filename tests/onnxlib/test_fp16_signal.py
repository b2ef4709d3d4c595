"""Mixed float16 on signal models: an audio front end whose spectral powers a plain
float16 copy loses by underflow converts as mixed float16 and passes, checked against TensorFlow
by an emulation written independently of trtconv's (tests/helpers/fp16_check.py); and the nodes
kept in float32 of a model nesting a revived Keras 2 model are named by their Keras layer."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from tests.helpers.convert_fixtures import work_dir
from tests.helpers.fp16_check import independent_emulation
from tests.helpers.model_cache import export_onnx_once
from tests.helpers.signal_fixtures import audio_model, audio_npz, framed_signal, nested_keras2_model
from trtconv.backends.tf_native import SavedModelRunner
from trtconv.cli import main
from trtconv.cli._fp16 import kept_by_layer, render_fp16
from trtconv.convert.convert_result import ConvertResult
from trtconv.model.savedmodel import load_saved_model
from trtconv.onnxlib.export import to_float16
from trtconv.onnxlib.fp16 import emulate_float16, emulation_session, load_model
from trtconv.onnxlib.fp16_analysis import analyse, analysis_batches
from trtconv.onnxlib.fp16_model import kept_float32
from trtconv.quantize.ladder_result import float_node
from trtconv.quantize.ladder_text import kept_text
from trtconv.quantize.sensitivity import QuantizedNode

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # trains the models, exports them with tf2onnx, converts


def held_out() -> tuple[np.ndarray, np.ndarray]:
    """Frames the conversion never saw and TensorFlow's note probabilities on them."""
    frames, _ = framed_signal(200, seed=7)
    with SavedModelRunner(audio_model()) as native:
        return frames, native.infer({"frames": frames})["notes"]


def max_error(session: Any, frames: np.ndarray, reference: np.ndarray) -> float:
    """The largest |session's notes - reference|, inf where a value is not finite."""
    got = session.run(["notes"], {"frames": frames})[0]
    return float(np.where(np.isfinite(got), np.abs(got - reference), np.inf).max())


def test_a_plain_float16_copy_of_the_audio_front_end_underflows() -> None:
    saved_model = audio_model()
    export, plain = work_dir() / "audio.onnx", work_dir() / "audio.plain-fp16.onnx"
    export_onnx_once(saved_model, export, load_saved_model(saved_model).signature)
    to_float16(export, plain)
    frames, reference = held_out()
    trtconv_emulation = emulation_session(emulate_float16(load_model(plain)))
    assert max_error(trtconv_emulation, frames, reference) > 0.5
    assert max_error(independent_emulation(plain), frames, reference) > 0.5


@pytest.mark.no_gpu
@pytest.mark.converts("ort")
def test_ort_fp16_keeps_the_audio_front_end_in_float32_and_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(audio_model()), "--backend", "ort", "--precision", "fp16"]
    argv += ["--calib-data", str(audio_npz()), "--output", str(tmp_path / "fp16"), "--json"]
    with pytest.raises(SystemExit) as stopped:
        main(["convert", *argv])
    out, err = capsys.readouterr()
    assert stopped.value.code in (0, None), err
    document = json.loads(out)
    assert document["validation"]["verdict"] == "passed"
    block = document["manifest"]["conversion_summary"]["fp16"]
    why = {node["tf_layer"].split("/")[1]: node["why"] for node in block["kept_float32"]}
    assert {"stft_1", "power_1", "magnitude_1", "log_1", "norm_1"} <= why.keys()
    assert why["log_1"].startswith("underflow") and "conv_1" not in why
    assert block["float16_nodes"] > 0 and block["tiny_limit"] == 2.0**-14
    plain, mixed = (block["emulated_outputs"][k]["notes"] for k in ("plain_float16", "mixed"))
    assert plain["max_abs_error"] > 0.5 and mixed["max_abs_error"] < 0.01
    frames, reference = held_out()
    artifact = independent_emulation(tmp_path / "fp16" / "model.onnx")
    assert max_error(artifact, frames, reference) < 0.01
    text = io.StringIO()
    render_fp16(ConvertResult.from_json(document).fp16, Console(file=text, width=200))
    assert "/log_1: Add, Log (underflow: 100% of its input below" in text.getvalue()


def test_kept_nodes_of_a_nested_revived_model_are_named_by_their_keras_layer() -> None:
    saved_model = nested_keras2_model()
    export = work_dir() / "nested.onnx"
    export_onnx_once(saved_model, export, load_saved_model(saved_model).signature)
    model = load_model(export)
    names = [node.name for node in model.graph.node]
    assert any("cqt/StatefulPartitionedCall/StatefulPartitionedCall/" in name for name in names)
    frames, _ = framed_signal(64, seed=3)
    batches = list(analysis_batches([{"x": frames.reshape(-1, frames.shape[-1])}], 256, 64))
    kept = kept_float32(model, analyse(model, batches).kept)
    assert {node.op_type for node in kept} >= {"MatMul", "Log"}
    assert {node.tf_layer for node in kept} == {"model/front/cqt"}
    line = "model/front/cqt: MatMul, Mul, Add, Log (underflow: 100% of its input below"
    assert kept_by_layer(kept)[0].startswith(line)
    matmul = next(node for node in model.graph.node if node.op_type == "MatMul")
    quantized = QuantizedNode(matmul.name, matmul.op_type, tuple(matmul.input))
    kept = float_node(quantized.name, quantized.op_type, quantized.origin, None)
    assert kept_text(kept) == "model/front/cqt (MatMul)"
