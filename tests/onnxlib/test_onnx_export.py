"""ONNX export with tf2onnx (a real subprocess) and its check against TensorFlow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.helpers.convert_fixtures import digits_onnx
from trtconv.backends.tf_native import SavedModelRunner
from trtconv.calib.readers import VALIDATION, read_model_data
from trtconv.core.errors import ConversionError
from trtconv.onnxlib.export import BATCH_DIM, OPSET, export_onnx, verify_export
from trtconv.outputs.compare import run_batched

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # trains digits-cnn (session fixture) and runs tf2onnx


def test_export_keeps_names_dynamic_batch_and_opset(digits_saved_model: Path) -> None:
    import onnx

    model = onnx.load(str(digits_onnx(digits_saved_model)))
    assert [value.name for value in model.graph.input] == ["image"]
    assert [value.name for value in model.graph.output] == ["probabilities"]
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == BATCH_DIM and [d.dim_value for d in dims[1:]] == [8, 8, 1]
    assert model.opset_import[0].version == OPSET
    onnx.checker.check_model(model)


def test_export_matches_tensorflow_and_a_wrong_reference_fails(digits_saved_model: Path) -> None:
    with SavedModelRunner(digits_saved_model) as native:
        held_out = read_model_data("digits", native.signature, role=VALIDATION, samples=128)
        reference = run_batched(native, held_out)
    onnx_path = digits_onnx(digits_saved_model)
    report = verify_export(onnx_path, held_out, reference)
    assert report.passed and report.top1_agreement == 1.0
    max_abs_error = report.outputs["probabilities"].max_abs_error
    assert max_abs_error is not None and max_abs_error < 1e-5
    # The same check on a reference from other inputs must fail, naming what is off.
    shifted = {name: np.roll(array, 1, axis=0) for name, array in reference.items()}
    with pytest.raises(ConversionError, match=r"disagrees with TensorFlow on 128 samples") as e:
        verify_export(onnx_path, held_out, shifted)
    # Past fp32's tolerance a decision output is judged by its decisions (float32 may not be
    # reproduced), which fail here: one failed check, on the sentence's own line.
    sentence, check = str(e.value).split("): ", 1)
    words = sentence.replace(str(onnx_path), "")  # the path is as long as the user's folders
    assert "--tolerance NAME=X" in sentence and len(words) < 160 and "\n" not in sentence
    assert check.startswith("probabilities top-1 agreement: 0.")


def test_export_failure_is_one_conversion_error(tmp_path: Path, digits_saved_model: Path) -> None:
    from trtconv.model.savedmodel import load_saved_model

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"\x00garbage")
    signature = load_saved_model(digits_saved_model).signature
    with pytest.raises(ConversionError, match=r"tf2onnx could not export .*broken to ONNX"):
        export_onnx(broken, tmp_path / "out.onnx", signature)
    assert not (tmp_path / "out.onnx").exists()
