"""Dense outputs end to end, on Keras models built in tests/helpers/roles_fixtures.py and
converted for real: per-frame sigmoid maps judged by the F1 of their positives per sample, a
proposal net's box map judged by default (and gated by its score map), the same judge for ONNX
Runtime and OpenVINO. Every verdict is checked against plain TensorFlow + numpy + scipy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.roles_fixtures import (
    frame_map_model,
    frames,
    frames_npz,
    proposal_images,
    proposal_model,
    proposal_npz,
)
from trtconv import api
from trtconv.calib.purposes import fitted_indices
from trtconv.core.data_contract import DataContract
from trtconv.core.errors import AccuracyError
from trtconv.core.judging_options import Judging
from trtconv.options.convert import ConvertOptions
from trtconv.options.validate import ValidateOptions

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow]  # converts real models

MIN_F1, MIN_RATE = 0.9, 0.97  # the documented per-sample F1 bound and int8's minimum rate


def _held_out(x: np.ndarray, result: dict) -> np.ndarray:
    """The samples convert validates on (and validate, which drops the fitted ones): every
    sample of the file but those its manifest says calibration was fitted to."""
    contract = DataContract.from_json(result["manifest"]["data_contract"])
    assert contract.purposes is not None and contract.data is not None
    fitted = fitted_indices(contract.purposes, contract.data)
    assert 0 < len(fitted) < len(x)
    return x[[index for index in range(len(x)) if index not in fitted]]


def _native(saved_model: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    import tensorflow as tf

    serve = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    return {name: value.numpy() for name, value in serve(tf.constant(x)).items()}


def _ort(model: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    found = session.run(None, {session.get_inputs()[0].name: x})
    return {out.name: value for out, value in zip(session.get_outputs(), found, strict=True)}


def _openvino(model: Path, x: np.ndarray) -> dict[str, np.ndarray]:
    import openvino as ov

    # f32 as trtconv's runner pins for int8 (the plugin's default is bf16 on a CPU with bf16).
    compiled = ov.Core().compile_model(str(model), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    results = compiled(x)
    return {port.get_any_name(): np.asarray(results[port]) for port in compiled.outputs}


def _f1_rate(want: np.ndarray, got: np.ndarray) -> tuple[float, int]:
    """Independently: (share of samples whose F1 of the positives at 0.5 is >= 0.9, n)."""
    rates = []
    for reference, candidate in zip(want > 0.5, got > 0.5, strict=True):
        both, total = np.sum(reference & candidate), reference.sum() + candidate.sum()
        rates.append(1.0 if total == 0 else 2 * both / total)
    return float(np.mean(np.array(rates) >= MIN_F1)), len(rates)


def _wilson_low(rate: float, samples: int) -> float:
    from scipy.stats import binomtest

    found = binomtest(round(rate * samples), samples).proportion_ci(0.95, "wilson")
    return float(found.low)


def _convert(model: Path, data: Path, backend: str, output: Path, **more: Any) -> dict:
    """convert's JSON document, also when validation fails (AccuracyError carries it)."""
    options = ConvertOptions(
        model, "int8", backend=backend, output=output, calib_data=str(data), **more
    )
    try:
        return api.convert(options).to_json()
    except AccuracyError as failed:
        assert failed.result is not None
        return failed.result.to_json()  # type: ignore[union-attr]


def _check(validation: dict, name: str) -> dict:
    return next(check for check in validation["checks"] if check["name"] == name)


ONSET_CHECK = "onset sample F1 >= 0.9 at 0.5"


@pytest.fixture(scope="module")
def good_frames(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict]]:
    """The good frame-map model converted with ort and with openvino."""
    root = tmp_path_factory.mktemp("frames")
    converted = {}
    for backend in ("ort", "openvino"):
        artifact = root / backend
        result = _convert(frame_map_model(), frames_npz(), backend, artifact)
        converted[backend] = (artifact, result)
    return converted


def test_a_good_int8_of_sparse_frame_maps_passes_counting_windows(good_frames: dict) -> None:
    artifact, result = good_frames["ort"]
    validation = result["validation"]
    onset = validation["outputs"]["onset"]
    assert onset["role"] == "binary" and "Sigmoid" in onset["role_source"]
    assert validation["verdict"] == "passed"
    x = _held_out(frames(), result)
    rate, samples = _f1_rate(
        _native(frame_map_model(), x)["onset"], _ort(artifact / "model.onnx", x)["onset"]
    )
    assert validation["samples"] == samples == len(x) > 500  # windows validated
    assert onset["agreement"] == pytest.approx(rate) and rate == 1.0
    assert f"n={samples};" in _check(validation, ONSET_CHECK)["detail"]  # windows, not elements


def test_an_int8_that_loses_the_positives_fails(tmp_path: Path) -> None:
    """Before: 'decision agreement at 0.5: 0.96 (n=153600)', passed; the F1 of the positives
    was 0. Full int8 (no ladder) rounds every note's logit to 0 or below."""
    result = _convert(
        frame_map_model(lost=True), frames_npz(), "ort", tmp_path / "lost", fallback=False
    )
    validation = result["validation"]
    assert validation["verdict"] == "failed"
    x = _held_out(frames(), result)
    want = _native(frame_map_model(lost=True), x)["onset"]
    got = _ort(tmp_path / "lost" / "model.onnx", x)["onset"]
    rate, samples = _f1_rate(want, got)
    both, total = np.sum((want > 0.5) & (got > 0.5)), (want > 0.5).sum() + (got > 0.5).sum()
    assert 2 * both / total < MIN_F1  # the positives are lost
    assert ((want > 0.5) == (got > 0.5)).mean() > 0.95  # what element agreement said
    onset = validation["outputs"]["onset"]
    assert onset["agreement"] == pytest.approx(rate) and rate < MIN_RATE
    assert f"n={samples};" in _check(validation, ONSET_CHECK)["detail"]


def test_ort_and_openvino_report_the_same_figure_for_the_same_output(good_frames: dict) -> None:
    """One judge for every backend: the same check, figure, interval and samples, each equal
    to the independent check on that backend's own outputs."""
    x = _held_out(frames(), good_frames["ort"][1])
    want = _native(frame_map_model(), x)["onset"]
    runs = {"ort": (_ort, "model.onnx"), "openvino": (_openvino, "model.xml")}
    checks = {}
    for backend, (run, payload) in runs.items():
        artifact, result = good_frames[backend]
        validation = result["validation"]
        rate, _ = _f1_rate(want, run(artifact / payload, x)["onset"])
        assert validation["outputs"]["onset"]["agreement"] == pytest.approx(rate)
        checks[backend] = _check(validation, ONSET_CHECK)
    assert checks["ort"]["detail"] == checks["openvino"]["detail"]
    assert checks["ort"]["passed"] and checks["openvino"]["passed"]


@pytest.fixture(scope="module")
def proposals(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The proposal net converted to ort int8, its outputs' roles inferred."""
    artifact = tmp_path_factory.mktemp("proposals") / "int8"
    return artifact, _convert(proposal_model(), proposal_npz(), "ort", artifact)


def _within_rate(want: np.ndarray, got: np.ndarray, gate: np.ndarray | None) -> tuple[float, int]:
    """Independently: the share of samples with >= 95% of their (gated) values within 0.1 x
    the reference's standard deviation (over the gated values), and the samples counted."""
    mask = np.ones(want.shape, bool) if gate is None else gate
    bound = 0.1 * want[mask].std()
    shares = []
    for reference, candidate, where in zip(want, got, mask, strict=True):
        if where.any():
            shares.append(np.mean(np.abs(candidate - reference)[where] <= bound))
    return float(np.mean(np.array(shares) >= 0.95)), len(shares)


def test_a_box_map_is_judged_by_default(proposals: tuple) -> None:
    """Before: 'tensor (not one row per sample)' and exit 4 'not judged'."""
    artifact, result = proposals
    validation = result["validation"]
    bbox = validation["outputs"]["bbox"]
    assert bbox["role"] == "regression" and "face_prob ends in one" in bbox["role_source"]
    x = _held_out(proposal_images(), result)
    want = _native(proposal_model(), x)["bbox"]
    rate, samples = _within_rate(want, _ort(artifact / "model.onnx", x)["bbox"], None)
    assert bbox["agreement"] == pytest.approx(rate, abs=1 / samples)
    independent = _wilson_low(rate, samples) >= MIN_RATE
    assert _check(validation, "bbox within tolerance")["passed"] == independent
    assert f"n={samples};" in _check(validation, "bbox within tolerance")["detail"]


def test_a_gated_box_map_is_judged_where_the_score_map_sees_a_face(proposals: tuple) -> None:
    """validate --output-role bbox=regression:where=face_prob: only images with a face count,
    and only the positions where the native score map sees one."""
    artifact, result = proposals
    judging = Judging.build({"bbox": "regression:where=face_prob"})
    try:
        validation = api.validate(ValidateOptions(artifact, judging=judging)).to_json()
    except AccuracyError as failed:  # face_prob's own verdict does not matter here
        validation = failed.result.to_json()  # type: ignore[union-attr]
    x = _held_out(proposal_images(), result)
    native = _native(proposal_model(), x)
    faces = np.broadcast_to(native["face_prob"] > 0.5, native["bbox"].shape)
    got = _ort(artifact / "model.onnx", x)["bbox"]
    rate, samples = _within_rate(native["bbox"], got, faces)
    assert 0 < samples < len(x)  # images without a face are not counted
    check = _check(validation, "bbox within tolerance")
    assert f"n={samples};" in check["detail"] and "where face_prob says" in check["detail"]
    assert validation["outputs"]["bbox"]["agreement"] == pytest.approx(rate, abs=1 / samples)
    assert check["passed"] == (_wilson_low(rate, samples) >= MIN_RATE)
