"""Outputs that are not one row of class scores per sample, end to end on models
built for it (tests/helpers/roles_fixtures.py): a per-pixel softmax judged as a class map, an int64
class id judged as labels. Each verdict is checked against plain TensorFlow + ONNX Runtime."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.cli_runner import run_cli
from tests.helpers.model_cache import export_onnx_once
from tests.helpers.roles_fixtures import (
    class_id_model,
    digits_npz,
    float16_model,
    mask_npz,
    unet_model,
)
from trtconv import api
from trtconv.core.errors import AccuracyError, ConversionError, UsageError
from trtconv.core.judging_options import Judging, ToleranceOptions
from trtconv.model.savedmodel import load_saved_model
from trtconv.options.convert import ConvertOptions
from trtconv.options.validate import ValidateOptions

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow]  # trains, converts and releases real models


def _native_and_onnx(saved_model: Path, onnx_model: Path, x: np.ndarray, name: str) -> tuple:
    """(TensorFlow's, ONNX Runtime's) output `name` on `x`, run without trtconv."""
    import onnxruntime as ort
    import tensorflow as tf

    serve = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    native = serve(tf.constant(x))[name].numpy()
    session = ort.InferenceSession(str(onnx_model), providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x}
    index = [o.name for o in session.get_outputs()].index(name)
    return native, session.run(None, feed)[index]


@pytest.fixture(scope="module")
def unet_int8(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The UNet converted to ort int8 on its masks, and convert's JSON document."""
    artifact = tmp_path_factory.mktemp("unet") / "unet-int8"
    options = ConvertOptions(
        unet_model(), "int8", backend="ort", output=artifact, calib_data=str(mask_npz())
    )
    return artifact, api.convert(options).to_json()


def test_a_per_pixel_softmax_is_judged_per_pixel(unet_int8: tuple[Path, dict]) -> None:
    """Before: trtconv inferred `classes` from the Softmax, then refused its own inference
    (exit 2: "the classes role needs [batch, classes > 1]")."""
    artifact, result = unet_int8
    validation = result["validation"]
    mask = validation["outputs"]["mask"]
    assert mask["role"] == "class_map" and "Softmax" in mask["role_source"]
    assert validation["verdict"] == "passed" and validation["labels_output"] == "mask"
    assert validation["accuracy_reference"] > 0.9  # pixel accuracy
    names = [check["name"] for check in validation["checks"]]
    assert "mask per-element top-1 agreement" in names and "mask mean IoU" in names
    # The same agreement, measured without trtconv on the data it validated on.
    data = np.load(mask_npz())
    native, onnx = _native_and_onnx(unet_model(), artifact / "model.onnx", data["x"], "mask")
    agreement = float((native.argmax(-1) == onnx.argmax(-1)).mean())
    assert agreement > 0.97
    assert mask["agreement"] == pytest.approx(agreement, abs=0.01)
    assert validation["accuracy_candidate"] == pytest.approx(
        float((onnx.argmax(-1) == data["y"]).mean()), abs=0.01
    )


def test_a_role_that_cannot_fit_names_the_output_and_the_roles_that_do(tmp_path: Path) -> None:
    options = ConvertOptions(
        unet_model(),
        "int8",
        backend="ort",
        output=tmp_path / "classes",
        calib_data=str(mask_npz()),
        judging=Judging.build({"mask": "classes"}),
    )
    with pytest.raises(UsageError, match=r"'mask'.*cannot be judged as classes.*class_map"):
        api.convert(options)


def test_the_ladder_does_not_climb_on_a_metric_it_cannot_compute(tmp_path: Path) -> None:
    """Before: with `mask=tensor` the ladder climbed 10 steps reading "agreement n/a"."""
    options = ConvertOptions(
        unet_model(),
        "int8",
        backend="ort",
        output=tmp_path / "tensor",
        calib_data=str(mask_npz()),
        judging=Judging.build({"mask": "tensor"}),
    )
    with pytest.raises(AccuracyError) as caught:
        api.convert(options)
    summary = caught.value.result.to_json()["manifest"]["conversion_summary"]
    ladder = summary["quantization"]["ladder"]
    assert len(ladder["steps"]) == 1
    assert ladder["outcome"].startswith("not climbed: no output is judged at int8 (mask")


def test_a_release_of_a_segmenter_recommends_an_artifact(tmp_path: Path) -> None:
    """Before: exit 2 (the inferred role refused); with `roles = {mask = "tensor"}` the
    accuracy gates read "not measured" and failed even for an exact fp32 artifact."""
    config = tmp_path / "release.toml"
    config.write_text(_release_config("", ("fp32", "int8")))
    document = _release(config, tmp_path / "release")
    assert document["exit_code"] == 0 and document["recommendation"]["target"]
    int8 = next(t for t in document["targets"] if t["precision"] == "int8")
    assert int8["passed"] and int8["validation"]["outputs"]["mask"]["role"] == ("class_map")
    # Tensors only: the decision gates apply to no output and say so; they do not fail.
    config.write_text(_release_config('[outputs]\nroles = {mask = "tensor"}\n', ("fp32",)))
    document = _release(config, tmp_path / "tensor")
    fp32 = document["targets"][0]
    gates = {gate["name"]: gate for gate in fp32["gates"]}
    assert gates["min_top1_agreement"]["detail"].startswith("not applicable")
    assert gates["min_top1_agreement"]["passed"] and gates["max_accuracy_drop"]["passed"]
    assert fp32["passed"] and document["exit_code"] == 0


def _release_config(outputs: str, precisions: tuple[str, ...]) -> str:
    targets = "".join(f'[[targets]]\nbackend = "ort"\nprecision = "{p}"\n\n' for p in precisions)
    return f"""[model]
path = "{unet_model()}"

{targets}{outputs}
[calibration]
data = "{mask_npz()}"
samples = 128

[eval]
data = "{mask_npz()}"
samples = 200

[bench]
batch_sizes = [1, 8]
iterations = 20
warmup = 3

[gates]
max_accuracy_drop = 0.05
min_top1_agreement = 0.9
"""


def _release(config: Path, output: Path, *extra: str) -> dict:
    """`trtconv release CONFIG --json` in this process (tests/helpers/cli_runner.py)."""
    completed = run_cli("release", config, "--output", output, *extra, "--json")
    assert completed.stdout, completed.stderr
    return json.loads(completed.stdout)  # type: ignore[no-any-return]


def test_an_int64_class_id_is_judged_by_its_agreement(tmp_path: Path) -> None:
    """Before: `class_id` was judged at atol 0 ("max abs error 9"): exit 4 with --no-fallback,
    else a ladder that missed the budget at every step and kept layers in float; accuracy was
    never computed ("labels fit several outputs", said 13 times)."""
    artifact = tmp_path / "class-id-int8"
    completed = run_cli(
        "convert", class_id_model(), "--precision", "int8", "--backend", "ort",
        "--calib-data", digits_npz(), "--output", artifact, "--no-fallback", "--json",
    )  # flags beside values # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr.count("labels fit several outputs") == 1
    validation = json.loads(completed.stdout)["validation"]
    class_id = validation["outputs"]["class_id"]
    assert class_id["role"] == "classes" and class_id["atol"] is None
    assert class_id["max_abs_error"] > 0  # some ids flipped: reported, not judged at atol 0
    assert validation["verdict"] == "passed" and validation["labels_output"] is None
    data = np.load(digits_npz())
    native, onnx = _native_and_onnx(
        class_id_model(), artifact / "model.onnx", data["x"], "class_id"
    )
    agreement = float((native == onnx).mean())
    assert 0.97 <= agreement < 1.0
    assert class_id["agreement"] == pytest.approx(agreement, abs=0.01)

    # Named, the labels score it: accuracy, with the class scores' budget.
    options = ConvertOptions(
        class_id_model(),
        "int8",
        backend="ort",
        output=tmp_path / "labelled",
        calib_data=str(digits_npz()),
        judging=Judging.build(labels_output="class_id"),
    )
    labelled = api.convert(options).to_json()
    assert labelled["validation"]["labels_output"] == "class_id"
    assert labelled["validation"]["accuracy_drop"] is not None
    assert labelled["manifest"]["judging"]["labels_output"] == "class_id"
    validated = api.validate(ValidateOptions(tmp_path / "labelled", split="all"))
    assert validated.passed and validated.labels_output == "class_id"


@pytest.mark.parametrize("backend", ["ort", "openvino"])
def test_a_float16_output_is_judged_at_float16_resolution(tmp_path: Path, backend: str) -> None:
    """Before: ort refused the export ("ONNX export /tmp/tmpXXXX/model.fp32.onnx disagrees with
    TensorFlow: max abs error 0.00146 (atol 0.0001)", exit 1) at fp32 and int8; openvino fp32
    FAILED on 0.00195 while its int8 passed."""
    verdicts = {}
    for precision in ("fp32", "int8"):
        artifact = tmp_path / f"{backend}-{precision}"
        options = ConvertOptions(
            float16_model(),
            precision,
            backend=backend,
            output=artifact,
            calib_data=str(digits_npz()),
            confidence=0.0,  # 360 samples cannot show 0.99 at 95%
        )
        validation = api.convert(options).to_json()["validation"]
        verdicts[precision] = validation["verdict"]
        if precision == "fp32":
            probabilities = validation["outputs"]["probabilities"]
            # 4 float16 steps at the largest probability (about 1): 4 x 2^-10.
            assert probabilities["atol"] == pytest.approx(4 * 2.0**-10, rel=0.01)
            assert 1e-4 < probabilities["max_abs_error"] <= probabilities["atol"]
    assert verdicts == {"fp32": "passed", "int8": "passed"}


def test_the_export_check_takes_tolerance_and_names_the_users_model(tmp_path: Path) -> None:
    x = np.load(digits_npz())["x"][:256]
    native, _ = _native_and_onnx(float16_model(), _export(tmp_path), x, "probabilities")
    assert native.dtype == np.float16  # the model's own output dtype
    options = ConvertOptions(
        float16_model(),
        "fp32",
        backend="ort",
        output=tmp_path / "tight",
        calib_data=str(digits_npz()),
        tolerance=ToleranceOptions(atols={"probabilities": 1e-5}),
    )
    with pytest.raises(ConversionError) as caught:
        api.convert(options)
    message = str(caught.value)
    assert f"The ONNX export of {float16_model()}" in message and "probabilities" in message
    assert "atol 0.0001" in message and ".onnx" not in message  # never tightened below fp32


def _export(tmp_path: Path) -> Path:
    path = tmp_path / "float16.onnx"
    export_onnx_once(float16_model(), path, load_saved_model(float16_model()).signature)
    return path
