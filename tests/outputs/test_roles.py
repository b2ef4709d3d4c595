"""Output roles: inferred from the graph's last op, dtype, shape and values, or set; each role
judged by its own checks, and no verdict of "passed" without a check that could fail."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.core.errors import AccuracyError, UsageError
from trtconv.core.judging_options import (
    BINARY,
    CLASSES,
    REGRESSION,
    TENSOR,
    OutputRole,
    ToleranceOptions,
    parse_role_options,
    parse_tolerance_options,
)
from trtconv.outputs.compare import compare, raise_if_failed
from trtconv.outputs.roles import infer_role, resolve_roles

RNG = np.random.default_rng(0)


def _softmax(logits: np.ndarray) -> np.ndarray:
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)


# 500 samples: enough for outputs that agree everywhere to show fp32's 0.99 (381 would).
def _box_label(samples: int = 500) -> dict[str, np.ndarray]:
    """A detector's two heads: boxes in [0, 1] (bottom/right largest) and 3-class scores."""
    top_left = RNG.uniform(0.0, 0.3, (samples, 2))
    bottom_right = RNG.uniform(0.7, 1.0, (samples, 2))
    box = np.concatenate([top_left, bottom_right], axis=1).astype(np.float32)
    return {"box": box, "label": _softmax(RNG.normal(size=(samples, 3)) * 4)}


def test_the_graph_end_decides_first() -> None:
    scores = RNG.normal(size=(10, 3)).astype(np.float32)
    assert infer_role(scores, "Softmax").role == CLASSES
    sigmoid = infer_role(RNG.uniform(size=(10, 1)).astype(np.float32), "Sigmoid")
    assert (sigmoid.role, sigmoid.threshold) == (BINARY, 0.5)
    assert "Sigmoid at the end of the graph" in sigmoid.source


@pytest.mark.parametrize(
    ("array", "marked", "role"),
    [
        (RNG.uniform(size=(10, 1)).astype(np.float32), (), BINARY),  # one probability
        (RNG.normal(size=(10, 1)).astype(np.float32) * 5, (), REGRESSION),  # one value
        (_softmax(RNG.normal(size=(10, 4))), (), CLASSES),  # rows sum to 1
        (RNG.normal(size=(10, 4)).astype(np.float32), (), CLASSES),  # logits, said so
        (RNG.normal(size=(10, 4)).astype(np.float32), ("label",), REGRESSION),
        (np.arange(10, dtype=np.int64), (), CLASSES),  # class ids
        (RNG.normal(size=(10, 5, 7)).astype(np.float32), (), TENSOR),
    ],
)
def test_values_and_shape_decide_without_a_graph(
    array: np.ndarray, marked: tuple[str, ...], role: str
) -> None:
    assert infer_role(array, "", marked).role == role


def test_set_roles_win_and_a_binary_threshold_follows_the_values() -> None:
    logits = RNG.normal(size=(10, 1)).astype(np.float32) * 4
    chosen = parse_role_options(["score=binary", "other=binary:0.3"])
    roles = resolve_roles({"score": logits, "other": logits}, {}, chosen)
    assert roles["score"] == OutputRole(BINARY, "option", 0.0)  # logits: decide at 0
    assert roles["other"].threshold == 0.3


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["box"], "--output-role takes NAME=VALUE"),
        (
            ["box=boxes"],
            "expected one of classes, binary, class_map, embedding, regression, tensor",
        ),
        (["box=regression:0.3"], "expected one of"),
        (["score=binary:high"], "is not a number"),
    ],
)
def test_bad_roles_are_usage_errors(items: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_role_options(items)


def test_tolerances_global_and_per_output() -> None:
    found = parse_tolerance_options(["1e-3", "box=0.05"])
    assert found == ToleranceOptions(1e-3, None, {"box": 0.05})
    found = parse_tolerance_options(["box=0.05:0.99"])
    assert found == ToleranceOptions(atols={"box": 0.05}, min_within={"box": 0.99})
    # the relative part: ATOL,RTOL for every output or one, with or without a minimum share
    found = parse_tolerance_options(["1e-4,1e-5", "price=0.01,1e-6:0.99", "box=0.05,0"])
    assert (found.atol, found.rtol) == (1e-4, 1e-5)
    assert found.atols == {"price": 0.01, "box": 0.05}
    assert found.rtols == {"price": 1e-6, "box": 0.0} and found.min_within == {"price": 0.99}
    bad_values = (["box=-1"], ["x"], ["1", "2"], ["box=0.05:0"], ["box=0.05:1.5"], ["0.1:0.9"])
    bad_values += (["box=0.05,-1"], ["0.1,x"], ["box=0.05,"], ["0.1,0.1,0.1"])
    for bad in bad_values:
        with pytest.raises(UsageError):
            parse_tolerance_options(bad)
    with pytest.raises(UsageError, match=r"names output.*boxes.*outputs are box, label"):
        ToleranceOptions(atols={"boxes": 0.1}).check_names(["box", "label"])


def test_box_and_label_are_each_judged_for_what_they_are() -> None:
    """Before: the alphabetically first 2-D output with >1 column (box) was judged as class
    scores and the labels scored its argmax."""
    reference = _box_label()
    labels = reference["label"].argmax(axis=1)
    candidate = {
        "box": reference["box"] + RNG.normal(0, 0.01, reference["box"].shape).astype(np.float32),
        "label": reference["label"],
    }
    roles = resolve_roles(reference, {"box": "BiasAdd", "label": "Softmax"})
    report = compare(reference, candidate, rules("int8"), labels, "unit", roles)
    assert report.outputs["box"].role == REGRESSION and report.outputs["label"].role == CLASSES
    assert report.labels_output == "label" and report.accuracy_candidate == 1.0
    assert [c.name for c in report.checks if c.output == "box"] == [
        "box values",
        "box within tolerance",
    ]
    assert report.passed and report.verdict == "passed"


def test_a_sigmoid_output_is_judged_by_its_decisions() -> None:
    """Before: a [N, 1] output had no gating check at int8, so any values 'passed'."""
    reference = {"score": RNG.uniform(size=(300, 1)).astype(np.float32)}
    labels = (reference["score"][:, 0] > 0.5).astype(np.int64)
    flipped = {"score": 1.0 - reference["score"]}
    report = compare(reference, flipped, rules("int8"), labels, "unit")
    assert report.outputs["score"].role == BINARY
    assert report.top1_agreement is not None and report.top1_agreement < 0.1
    assert report.accuracy_reference == 1.0 and report.verdict == "failed"
    with pytest.raises(AccuracyError, match=r"score decision agreement at 0\.5"):
        raise_if_failed(report, "the artifact")


def test_an_output_nothing_judges_is_not_passed() -> None:
    features = {"features": RNG.normal(size=(20, 4, 4)).astype(np.float32)}
    report = compare(features, features, rules("int8"))
    assert report.verdict == "not judged" and report.unjudged == ["features"]
    assert not report.passed
    with pytest.raises(AccuracyError, match=r"features not judged.*--tolerance features=X"):
        raise_if_failed(report, "the artifact")
    allowed = compare(features, features, rules("int8"), allow_unjudged=True)
    assert allowed.passed and allowed.verdict == "not judged"
    own = rules("int8", atols={"features": 1e-3})
    # A tolerance judges the share of samples within it: 20 of 20 cannot show 0.97, 200 can.
    assert compare(features, features, own).verdict == "inconclusive"
    many = {"features": RNG.normal(size=(200, 4, 4)).astype(np.float32)}
    assert compare(many, many, own).verdict == "passed"


def test_a_per_output_tolerance_judges_that_output_only() -> None:
    reference = _box_label()
    candidate = {**reference, "box": reference["box"] + np.float32(0.02)}
    roles = resolve_roles(reference, {"box": "BiasAdd", "label": "Softmax"})
    loose = compare(reference, candidate, rules("fp32", atols={"box": 0.05}), None, "", roles)
    assert (
        loose.passed and loose.outputs["box"].atol == 0.05 and loose.outputs["label"].atol == 1e-4
    )
    strict = compare(reference, candidate, rules("fp32"), None, "", roles)
    # fp32 is decided by its values: the share within tolerance is reported beside them.
    assert [c.name for c in strict.checks if not c.passed] == ["box values"]
    within = next(c for c in strict.checks if c.name == "box within tolerance")
    assert not within.gating and "as a gate: failed" in within.detail


def test_classes_on_one_column_is_a_usage_error() -> None:
    one = {"score": RNG.uniform(size=(10, 1)).astype(np.float32)}
    roles = {"score": OutputRole(CLASSES, "option")}
    with pytest.raises(UsageError, match="one score per sample is --output-role NAME=binary"):
        compare(one, one, rules("int8"), None, "", roles)
