"""Dense outputs judged per sample: decision maps by the F1 of their positives, maps
rated over samples (never elements), regression heads gated by a score output."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import BINARY, REGRESSION, Judging, OutputRole, parse_role_options
from trtconv.outputs.compare import compare, rate_words, undecidable_warning
from trtconv.outputs.maps import MIN_SAMPLE_F1, sample_f1
from trtconv.outputs.roles import infer_role, judging_record, over_recorded, resolve_roles
from trtconv.outputs.validation_result import roles_of
from trtconv.quantize.search import resolution_note, step_words

RNG = np.random.default_rng(0)
SAMPLES, FRAMES, BINS = 200, 40, 24


def _onsets(samples: int = SAMPLES) -> np.ndarray:
    """Sparse per-frame sigmoid maps [N, T, F]: about 1% of the elements above 0.5."""
    positive = RNG.random((samples, FRAMES, BINS)) < 0.01
    high, low = RNG.uniform(0.7, 1.0, positive.shape), RNG.uniform(0, 0.2, positive.shape)
    return np.where(positive, high, low).astype(np.float32)


def _judge(want: np.ndarray, got: np.ndarray) -> tuple:
    roles = resolve_roles({"onset": want}, {"onset": "Sigmoid"})
    report = compare({"onset": want}, {"onset": got}, rules("int8"), roles=roles)
    check = next(c for c in report.checks if c.name.startswith("onset sample F1"))
    return report, check


def test_an_all_zero_map_fails_although_it_agrees_on_almost_every_element() -> None:
    """Before: 'decision agreement at 0.5: 0.990 (0.989-0.991, n=192000)', passed. Predicting
    nothing agrees on every negative element; it finds none of the positives."""
    want = _onsets()
    zero = np.zeros_like(want)
    assert ((want > 0.5) == (zero > 0.5)).mean() > 0.98  # element agreement rewards nothing
    report, check = _judge(want, zero)
    assert report.verdict == "failed" and report.outputs["onset"].agreement == 0.0
    assert "n=200;" in check.detail  # samples, not 192,000 elements
    assert "pooled F1 0.000" in check.detail


def test_a_map_whose_positives_are_kept_passes_and_one_that_loses_them_fails() -> None:
    want = _onsets()
    report, check = _judge(want, want + np.float32(0.02))
    assert "n=200;" in check.detail
    assert report.verdict == "passed" and report.outputs["onset"].agreement == 1.0
    # Lose a third of each sample's positives: F1 0.8 on every sample holding three or more.
    lost = want.copy()
    for sample in lost:
        found = np.argwhere(sample > 0.5)
        for row, col in found[: len(found) // 3 + 1]:
            sample[row, col] = 0.1
    report, _ = _judge(want, lost)
    assert report.verdict == "failed"
    f1 = sample_f1(want > 0.5, lost > 0.5)
    assert report.outputs["onset"].agreement == pytest.approx(np.mean(f1 >= MIN_SAMPLE_F1))


def test_sample_f1_is_one_where_neither_holds_a_positive() -> None:
    want = np.array([[0, 0, 0], [1, 1, 0], [1, 0, 0]], bool)
    got = np.array([[0, 0, 0], [1, 0, 0], [0, 0, 1]], bool)
    assert list(sample_f1(want, got)) == [1.0, pytest.approx(2 / 3), 0.0]


def test_a_box_map_beside_a_sigmoid_map_is_regression_by_default() -> None:
    """Before: 'tensor (not one row per sample)', and int8 ended 'not judged'."""
    boxes = RNG.normal(size=(10, 6, 6, 4)).astype(np.float32)
    role = infer_role(boxes, "BiasAdd", ["face_prob"])
    assert role.role == REGRESSION and "face_prob ends in one" in role.source
    assert infer_role(boxes, "BiasAdd").role == "tensor"  # nothing says what it is


def _proposals(samples: int = 300) -> dict[str, np.ndarray]:
    """A score map [N, 6, 6, 1] with a few faces per image, most images holding one, and a box
    map [N, 6, 6, 4]."""
    face = (RNG.random((samples, 6, 6, 1)) < 0.05).astype(np.float32) * 0.9 + 0.05
    return {"face_prob": face, "bbox": RNG.normal(size=(samples, 6, 6, 4)).astype(np.float32)}


def test_a_gated_box_map_is_judged_only_where_the_score_says_a_face_is() -> None:
    want = _proposals()
    faces = want["face_prob"][..., 0] > 0.5
    got = {**want, "bbox": want["bbox"].copy()}
    got["bbox"][~faces] += 5.0  # wrong everywhere there is no face: must not count
    chosen = parse_role_options(["bbox=regression:where=face_prob"])
    roles = resolve_roles(want, {"face_prob": "Sigmoid", "bbox": "BiasAdd"}, chosen)
    assert roles["bbox"] == OutputRole(REGRESSION, "option", where="face_prob")
    report = compare(want, got, rules("int8"), roles=roles)
    bbox = report.outputs["bbox"]
    holding = int(faces.reshape(len(faces), -1).any(axis=1).sum())
    check = next(c for c in report.checks if c.name == "bbox within tolerance")
    assert check.passed and f"n={holding};" in check.detail and bbox.agreement == 1.0
    assert f"judged where face_prob says an object is there ({holding} of 300" in check.detail
    # Ungated, the same boxes fail: background positions are off by 5.
    everywhere = {**roles, "bbox": OutputRole(REGRESSION, "option")}
    ungated = compare(want, got, rules("int8"), roles=everywhere)
    assert ungated.outputs["bbox"].agreement == 0.0 and not ungated.passed
    # Where there is a face, an error beyond the bound fails the sample.
    got["bbox"][faces] += 1.0
    assert not compare(want, got, rules("int8"), roles=roles).passed
    # The manifest keeps the gate: validate judges the artifact the same way.
    recorded = judging_record(Judging(), roles_of(report, roles))
    assert recorded.roles["bbox"].where == "face_prob"
    assert recorded.to_json()["roles"]["bbox"]["where"] == "face_prob"
    assert over_recorded(Judging(), recorded).roles["bbox"].where == "face_prob"


def test_a_regression_map_counts_a_sample_within_when_95_percent_of_its_values_are() -> None:
    """Before: a sample passed only when every one of its values was within the bound."""
    want = _proposals()
    got = {**want, "bbox": want["bbox"].copy()}
    got["bbox"][:, 0, 0, 0] += 10.0  # one value of 144 per sample is off
    roles = resolve_roles(want, {"face_prob": "Sigmoid", "bbox": "BiasAdd"})
    report = compare(want, got, rules("int8"), roles=roles)
    assert report.outputs["bbox"].agreement == 1.0
    spread = float(want["bbox"].std())
    assert report.outputs["bbox"].tolerance == pytest.approx(0.1 * spread)
    check = next(c for c in report.checks if c.name == "bbox within tolerance")
    assert "95% of values within" in check.detail and "spread (std)" in check.detail


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["bbox=regression:where="], "names no output"),
        (["bbox=binary:where=face_prob"], "gates a regression output"),
    ],
)
def test_bad_gates_are_usage_errors(items: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_role_options(items)


def test_a_gate_must_name_an_output_that_decides() -> None:
    want = _proposals(20)
    with pytest.raises(UsageError, match=r"no output 'face'.*outputs are bbox, face_prob"):
        resolve_roles(want, {}, parse_role_options(["bbox=regression:where=face"]))
    with pytest.raises(UsageError, match="must be a binary score or class scores"):
        chosen = parse_role_options(["bbox=regression:where=face_prob", "face_prob=regression"])
        resolve_roles(want, {}, chosen)
    with pytest.raises(UsageError, match=r"names output\(s\) face;"):
        Judging.build({"bbox": "regression:where=face"}).check_names(["bbox", "face_prob"])


def test_budget_warnings_only_for_checks_that_exist() -> None:
    """Before: '7 samples cannot show a top-1 agreement' for a model that has no top-1 check."""
    budget = rules("int8")
    assert rate_words({"features": "tensor"}) is None
    assert rate_words({"features": "tensor"}, budget) is None  # int8 gives a tensor no atol
    within = "a rate (share of samples within tolerance of features)"
    assert rate_words({"features": "tensor"}, rules("fp16")) == within
    assert rate_words({"features": "tensor"}, rules("fp32")) is None  # exact rule
    assert undecidable_warning(7, budget, "x.npz", rate_words({"features": "tensor"})) is None
    assert resolution_note(7, budget, None) is None
    assert rate_words({"probabilities": "classes"}) == "a top-1 agreement"
    words = rate_words({"bbox": "regression", "onset": BINARY})
    assert words == (
        "a rate (share of samples within tolerance of bbox, decision agreement of onset)"
    )
    warning = undecidable_warning(7, budget, "x.npz", words)
    assert warning is not None and "cannot show a rate (share of samples" in warning
    assert "top-1" not in warning


def test_the_ladder_log_names_the_check_that_misses(caplog: pytest.LogCaptureFixture) -> None:
    """Before: a regression output missing the budget logged 'top-1 agreement 1.0000, misses
    the budget' (the label head's agreement)."""
    caplog.set_level(logging.INFO)
    want = _proposals()
    want["label"] = np.eye(2, dtype=np.float32)[RNG.integers(0, 2, len(want["bbox"]))]
    got = {**want, "bbox": want["bbox"] + np.float32(3.0)}
    roles = resolve_roles(want, {"face_prob": "Sigmoid", "label": "Softmax"})
    report = compare(want, got, rules("int8"), roles=roles)
    words = step_words(report)
    assert words.startswith("bbox within tolerance: 0.000 (") and "top-1" not in words
    passing = compare(want, want, rules("int8"), roles=roles)
    assert step_words(passing).split(":")[0] in {
        "bbox within tolerance",
        "face_prob sample F1 >= 0.9 at 0.5",
        "label top-1 agreement",
    }
