"""The data contract is typed between modules and written as the JSON it always was: the blocks
below are what convert (a manifest's), validate and bench (without evaluation data) wrote when the
contract was a dict, byte for byte."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from trtconv.calib.judged_data import has_image_input, record_contract, scale_warning
from trtconv.calib.preprocessing import Preprocessing
from trtconv.calib.purposes import entry
from trtconv.calib.readers import describe
from trtconv.calib.sources import ArraySet
from trtconv.core.data_contract import DataContract
from trtconv.core.model_io import ModelSignature, TensorSpec

SOURCES = {
    "scale": "option",
    "offset": "default",
    "mean": "manifest (option)",
    "std": "default",
    "layout": "model signature",
}
CONVERTED = (
    '{"data_from": "option", "data": "digits", "split": "held-out", "preprocessing": {"scale": '
    '1.0, "offset": 0.0, "mean": [0.5], "std": null, "layout": "NHWC", "sources": {"scale": '
    '"option", "offset": "default", "mean": "manifest (option)", "std": "default", "layout": '
    '"model signature"}, "summary": "(x * 1 + 0 - [0.5]) / [1] (option, default, manifest '
    '(option))"}, "preprocessing_applied": true, "purposes": [{"purpose": "calibration", '
    '"source": "digits", "part": "calibration", "start": 0, "stop": 64, "samples": 64, "total": '
    '1347}, {"purpose": "validation", "source": "digits", "part": "held-out", "start": 0, '
    '"stop": 450, "samples": 450, "total": null}]}'
)
VALIDATED = (
    '{"data": "x.npz", "split": "all", "preprocessing": {"scale": 0.00392156862745098, "offset": '
    '0.0, "mean": null, "std": null, "layout": "NHWC", "sources": {}, "summary": "none applied '
    '(arrays fed as given; raw pixels would be x * 0.00392157 + 0 (default))"}, '
    '"preprocessing_applied": false, "data_from": "manifest", "split_from": "default (x)", '
    '"fitted_samples_excluded": 12}'
)
BENCHED = (
    '{"preprocessing": {"scale": 0.00392156862745098, "offset": 0.0, "mean": null, "std": null, '
    '"layout": "NHWC", "sources": {}, "summary": "x * 0.00392157 + 0 (default)"}}'
)


def test_contracts_are_written_as_they_always_were() -> None:
    prep = Preprocessing(scale=1.0, mean=(0.5,), sources=SOURCES)
    converted = replace(record_contract("digits", "held-out", prep), data_from="option")
    converted = converted.with_purposes(
        (
            entry("calibration", "digits", "calibration", (0, 64), 1347),
            entry("validation", "digits", "held-out", (0, 450), None),
        )
    )
    validated = replace(
        record_contract("x.npz", "all", Preprocessing(), applied=False),
        data_from="manifest",
        split_from="default (x)",
        fitted_samples_excluded=12,
    )
    benched = DataContract(preprocessing=Preprocessing())
    for contract, written in ((converted, CONVERTED), (validated, VALIDATED), (benched, BENCHED)):
        assert json.dumps(contract.to_json()) == written


def test_a_written_contract_reads_back_as_the_same_contract() -> None:
    for written in (CONVERTED, VALIDATED, BENCHED):
        contract = DataContract.from_json(json.loads(written))
        assert json.dumps(contract.to_json()) == written
        assert DataContract.from_json(contract.to_json()) == contract
    converted = DataContract.from_json(json.loads(CONVERTED))
    assert converted.purposes is not None and converted.purposes[0].total == 1347
    assert converted.preprocessing.mean == (0.5,) and converted.summary.startswith("(x * 1")
    # No purposes recorded and an empty list of them are different manifests (judged_data).
    assert DataContract.from_json(json.loads(VALIDATED)).purposes is None


def test_data_on_another_scale_than_the_calibration_data_is_warned_about() -> None:
    pixels = np.random.default_rng(0).integers(0, 256, (64, 4)).astype(np.float32)
    calibrated = describe(ArraySet({"x": pixels / 255.0}, None, "cal.npz"), "cal.npz")
    assert calibrated.input_stats["x"].std == pytest.approx(float((pixels / 255.0).std()))
    raw = ArraySet({"x": pixels}, None, "raw.npz")  # the 1/255 left out: 255 times the spread
    warning = scale_warning(calibrated, raw, "artifact")
    assert warning is not None and "raw.npz spreads" in warning and "(255x)" in warning
    assert scale_warning(calibrated, ArraySet({"x": pixels / 255.0}, None, "v.npz"), "a") is None
    assert scale_warning(calibrated, ArraySet({"y": pixels}, None, "other.npz"), "a") is None
    assert scale_warning(None, raw, "artifact") is None


def test_a_model_without_an_image_input_is_told_of_no_pixels() -> None:
    """Token ids (a text model's int32 [batch, seq]) are fed as given, and its contract says
    that without a word of pixels; a model with an image input keeps the pixel line."""
    text = ModelSignature(
        (
            TensorSpec("token_ids", (None, None), "int32"),
            TensorSpec("padding_mask", (None, None), "int32"),
        ),
        (TensorSpec("output_0", (None, None, 300), "float32"),),
    )
    image = ModelSignature(
        (TensorSpec("image", (None, 8, 8, 1), "float32"),),
        (TensorSpec("p", (None, 10), "float32"),),
    )
    assert not has_image_input(text) and has_image_input(image)
    tokens = record_contract("tokens.npz", "all", Preprocessing(), False, has_image_input(text))
    assert tokens.summary == "fed as given (no input is an image)"
    assert tokens.line == "inputs fed as given (no input is an image)"
    assert "pixel" not in json.dumps(tokens.to_json()) and "0.00392" not in tokens.line
    assert DataContract.from_json(tokens.to_json()) == tokens
    pixels = record_contract("x.npz", "all", Preprocessing(), False, has_image_input(image))
    assert pixels.line.startswith("raw pixels -> none applied (arrays fed as given; raw pixels")
    assert "image_inputs" not in pixels.to_json()  # as image models' contracts always were
