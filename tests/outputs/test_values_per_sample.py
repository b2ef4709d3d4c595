"""Values at a lossy precision are judged per sample, so more data sharpens a verdict and never
turns it: validated on 200, 1,000 and 5,000 samples, an artifact whose true share of samples
within tolerance is above the minimum is never failed (inconclusive, then passed), and one below
it is never passed. The single worst element over all samples, the rule before, grows with the
samples and failed the good artifact on the larger sets.

The model is trained in the tests (a box head and a 3-class softmax on 8x8 digits), converted
to ONNX Runtime int8 for real; the pool is 5,000 noisy digits nothing was fitted to. The true
rates are computed here independently (TensorFlow and ONNX Runtime run directly, numpy counts),
and the tolerances are chosen from them: the error bound 99.5% of the pool's samples meet (a
good artifact), and the one 90% meet (a bad one).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.verdict_fixtures import box_label_data, box_label_model, box_label_npz
from trtconv import api
from trtconv.core.errors import AccuracyError
from trtconv.core.judging_options import ToleranceOptions
from trtconv.options.convert import ConvertOptions
from trtconv.options.validate import ValidateOptions

pytestmark = [pytest.mark.slow, pytest.mark.tensorflow]  # converts and validates a real model

POOL = 5000
SIZES = (200, 1000, 5000)
GOOD, BAD = 0.995, 0.90  # the pool's share of samples within the bounds chosen below


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """5,000 digits 0-2 with Gaussian noise (seeded): data nothing was fitted to."""
    digits = box_label_data()
    rng = np.random.default_rng(7)
    picks = rng.integers(0, len(digits.x), POOL)
    images = digits.x[picks] + rng.normal(0, 0.08, (POOL, *digits.x.shape[1:]))
    path = tmp_path_factory.mktemp("pool") / "pool.npz"
    np.savez(path, x=np.clip(images, 0, 1).astype(np.float32))
    return path


@pytest.fixture(scope="module")
def int8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """box_label_model converted to ONNX Runtime int8, calibrated on its own data."""
    output = tmp_path_factory.mktemp("int8") / "box-int8"
    options = ConvertOptions(
        box_label_model(), "int8", backend="ort", output=output, calib_data=str(box_label_npz())
    )
    with contextlib.suppress(AccuracyError):  # the artifact is kept; judged on the pool here
        api.convert(options)
    return output


@pytest.fixture(scope="module")
def errors(pool: Path, int8: Path) -> dict[str, np.ndarray]:
    """Independently: each pool sample's largest absolute error per output (TensorFlow's
    SavedModel against ONNX Runtime's int8 model, each run directly)."""
    import onnxruntime as ort
    import tensorflow as tf

    x = np.load(pool)["x"]
    serve = tf.saved_model.load(str(box_label_model())).signatures["serving_default"]
    reference = {name: t.numpy() for name, t in serve(image=tf.constant(x)).items()}
    session = ort.InferenceSession(str(int8 / "model.onnx"), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    candidate = dict(zip(names, session.run(None, {session.get_inputs()[0].name: x}), strict=True))
    return {
        name: np.abs(candidate[name].astype(np.float64) - want).reshape(POOL, -1).max(axis=1)
        for name, want in reference.items()
    }


def _bound(errors: np.ndarray, share: float) -> float:
    """The error bound that `share` of the samples meet (a sample meets it with all 4 or 3
    of its values, fewer than 20: every value)."""
    return float(np.quantile(errors, share, method="higher"))


def _validate(artifact: Path, data: Path, samples: int, tolerances: dict[str, float]) -> dict:
    """validate's JSON document (also when its verdict is not passed)."""
    options = ValidateOptions(
        artifact, data=str(data), samples=samples, tolerance=ToleranceOptions(atols=tolerances)
    )
    try:
        return api.validate(options).to_json()
    except AccuracyError as failed:
        assert failed.result is not None
        return failed.result.to_json()  # type: ignore[union-attr]


def _verdicts(artifact: Path, pool: Path, output: str, bound: float) -> list[dict[str, Any]]:
    return [_validate(artifact, pool, n, {output: bound}) for n in SIZES]


@pytest.mark.parametrize("output", ["box", "label"])
def test_a_good_artifact_is_never_failed_and_more_data_decides_it(
    output: str, pool: Path, int8: Path, errors: dict[str, np.ndarray]
) -> None:
    bound = _bound(errors[output], GOOD)
    true_share = float(np.mean(errors[output] <= bound))
    assert true_share >= GOOD and errors[output].max() > bound  # some samples exceed it
    documents = _verdicts(int8, pool, output, bound)
    verdicts = [document["outputs"][output] for document in documents]
    checks = [_check(document, f"{output} within tolerance") for document in documents]
    assert all(
        check["gating"] and not (check["passed"] is False and not check["inconclusive"])
        for check in checks
    ), [check["detail"] for check in checks]
    assert [c["passed"] or c["inconclusive"] for c in checks] == [True, True, True]
    # On every sample of the pool the share is exactly what was counted independently,
    # and it decides: passed.
    whole = verdicts[-1]["within"]
    assert whole["samples"] == POOL and whole["share"] == pytest.approx(true_share)
    assert whole["minimum"] == 0.97 and whole["share_ci95"][0] > 0.97
    assert checks[-1]["passed"]
    # The rule before: the single worst element, which only grows with the samples, failed it;
    # it is reported now.
    largest = [verdict["max_abs_error"] for verdict in verdicts]
    assert largest == sorted(largest) and largest[-1] > bound
    assert not any(_check(document, f"{output} values")["gating"] for document in documents)
    # Nothing hidden: the detail names the worst samples and their errors.
    assert "the worst: " in checks[-1]["detail"]


@pytest.mark.parametrize("output", ["box", "label"])
def test_a_bad_artifact_is_never_passed(
    output: str, pool: Path, int8: Path, errors: dict[str, np.ndarray]
) -> None:
    bound = _bound(errors[output], BAD)
    assert float(np.mean(errors[output] <= bound)) < 0.97
    documents = _verdicts(int8, pool, output, bound)
    checks = [_check(document, f"{output} within tolerance") for document in documents]
    assert not any(check["passed"] for check in checks)
    assert all(document["verdict"] != "passed" for document in documents)
    assert not checks[-1]["inconclusive"]  # 5,000 samples decide it: failed


def test_a_minimum_share_is_set_per_output(pool: Path, int8: Path, errors: dict) -> None:
    """--tolerance box=X:MIN: the share the box's samples must reach is MIN, not the budget's."""
    bound = _bound(errors["box"], GOOD)
    options = ValidateOptions(
        int8,
        data=str(pool),
        samples=POOL,
        tolerance=ToleranceOptions(atols={"box": bound}, min_within={"box": 0.999}),
    )
    with pytest.raises(AccuracyError) as caught:
        api.validate(options)
    assert caught.value.result is not None
    document = caught.value.result.to_json()  # type: ignore[union-attr]
    assert document["outputs"]["box"]["within"]["minimum"] == 0.999
    assert "minimum 0.999" in _check(document, "box within tolerance")["detail"]


def _check(document: dict, name: str) -> dict:
    return next(check for check in document["checks"] if check["name"] == name)
