"""Dense class maps (segmentation, `[N, H, W, K]`) and roles that cannot fit an output."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import CLASS_MAP, OutputRole
from trtconv.outputs.compare import compare
from trtconv.outputs.decisions import mean_iou
from trtconv.outputs.roles import fitting_roles, infer_role, resolve_roles
from trtconv.release.gates import Measures, evaluate_gates
from trtconv.release.settings import GateSettings

RNG = np.random.default_rng(0)


def _maps(samples: int = 20) -> np.ndarray:
    logits = RNG.normal(size=(samples, 6, 6, 3)) * 3
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return (exp / exp.sum(axis=-1, keepdims=True)).astype(np.float32)


def test_a_softmax_over_the_last_axis_of_a_map_is_a_class_map() -> None:
    role = infer_role(_maps(), "Softmax")
    assert role.role == CLASS_MAP and "Softmax over the last axis" in role.source
    assert CLASS_MAP in fitting_roles(_maps()) and CLASS_MAP not in fitting_roles(_maps()[..., :1])


def test_a_class_map_is_judged_per_element_with_pixel_accuracy_and_mean_iou() -> None:
    want = _maps(200)
    got = want.copy()
    got[0, 0, 0] = got[0, 0, 0][::-1]  # at most one pixel of 7,200 changes class
    labels = want.argmax(-1)
    roles = resolve_roles({"mask": want}, {"mask": "Softmax"})
    report = compare({"mask": want}, {"mask": got}, rules("int8"), labels, "", roles)
    mask = report.outputs["mask"]
    assert report.verdict == "passed" and report.labels_output == "mask"
    assert mask.agreement is not None and mask.agreement >= 1 - 1 / 7200
    assert report.accuracy_reference == 1.0 and report.top1_agreement == mask.agreement
    # The interval counts images, not pixels (before: n=7200, as wide as 7,200 images').
    agreement = next(c for c in report.checks if c.name == "mask per-element top-1 agreement")
    assert "n=200;" in agreement.detail
    iou = next(check for check in report.checks if check.name == "mask mean IoU")
    assert not iou.gating and iou.detail.startswith("1.0000 -> ")


def test_mean_iou_averages_the_classes_present() -> None:
    predicted, truth = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 1])
    assert mean_iou(predicted, truth, 3) == pytest.approx((1 / 2 + 2 / 3) / 2)


def test_a_role_that_cannot_fit_names_the_output_and_the_roles_that_fit() -> None:
    chosen = {"mask": OutputRole("classes", "release config")}
    with pytest.raises(UsageError) as caught:
        resolve_roles({"mask": _maps()}, {}, chosen)
    message = str(caught.value)
    assert "'mask'" in message and "cannot be judged as classes" in message
    assert "binary, class_map, embedding, regression, tensor" in message
    assert "[outputs] roles" in message  # the key to set in a release


def test_decision_gates_on_a_model_that_decides_nothing_are_not_applicable() -> None:
    settings = GateSettings(max_accuracy_drop=0.01, min_top1_agreement=0.99)
    measures = Measures(validation_passed=True, decides=False, agrees=False)
    gates = {gate.name: gate for gate in evaluate_gates(settings, measures)}
    assert all(gate.passed for gate in gates.values())
    assert gates["min_top1_agreement"].detail.startswith("not applicable")
    assert gates["min_top1_agreement"].measured is None
    # A model that decides but was not measured (no labels) still fails its accuracy gate.
    decides = Measures(validation_passed=True, decides=True, agrees=True)
    unmeasured = evaluate_gates(settings, decides)
    assert not next(g for g in unmeasured if g.name == "max_accuracy_drop").passed
