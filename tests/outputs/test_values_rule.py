"""Which rule judges an output's values at each precision (trtconv.outputs.judge): per sample at
fp16, bf16 and int8, every element at fp32 and tf32."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.fp32_fixtures import cancelling_weights
from tests.helpers.rules import rules
from trtconv.core.judging_options import OutputRole
from trtconv.outputs.compare import compare

RNG = np.random.default_rng(3)


def _probabilities(samples: int, classes: int = 10) -> np.ndarray:
    """Rows summing to 1 with a clear top class (margin >= 0.3): no perturbation below flips it."""
    rows = RNG.dirichlet(np.ones(classes), samples) * 0.3
    rows[np.arange(samples), RNG.integers(0, classes, samples)] += 0.7
    return (rows / rows.sum(axis=1, keepdims=True)).astype(np.float32)


def _moved(probs: np.ndarray, samples: list[int], moves: list[float]) -> np.ndarray:
    """`probs` with a probability moved between the two smallest classes of each of `samples`
    (by its entry of `moves`): the decisions stay, one value moves."""
    moved = probs.copy()
    for sample, by in zip(samples, moves, strict=True):
        low, next_low = np.argsort(probs[sample])[:2]
        moved[sample, low] += by
        moved[sample, next_low] -= min(by, float(probs[sample, next_low]))
    return moved


def _check(report: object, name: str) -> object:
    return next(check for check in report.checks if check.name == name)  # type: ignore[attr-defined]


def test_an_fp16_classifier_is_decided_by_its_decisions_on_any_number_of_samples() -> None:
    """The counterexample: one probability moved by 0.03 on a few samples, no decision changed.
    The largest error grows with the samples, and the verdict only gets surer."""
    probs = _probabilities(653)
    candidate = _moved(probs, [100, 300, 600], [0.02, 0.025, 0.0314])
    verdicts, largest = [], []
    for samples in (60, 200, 397, 653):
        report = compare({"p": probs[:samples]}, {"p": candidate[:samples]}, rules("fp16"))
        verdicts.append(report.verdict)
        largest.append(report.outputs["p"].max_abs_error)
        values = _check(report, "p values")
        assert not values.gating and "judged per sample" in values.detail  # type: ignore[attr-defined]
    assert verdicts == ["inconclusive", "passed", "passed", "passed"]
    assert largest[0] < 0.01 < largest[-1]  # the rule before failed from 200 samples on
    within = report.outputs["p"].within
    assert within is not None and not within.gating
    assert (within.samples_within, within.samples) == (650, 653) and within.minimum == 0.98
    reported = _check(report, "p within tolerance")
    assert not reported.gating and "reported: its decisions judge it" in reported.detail  # type: ignore[attr-defined]
    assert "3 sample(s) beyond 0.01, the worst: 600 (max abs error 0.0314)" in reported.detail  # type: ignore[attr-defined]


def test_a_tolerance_the_user_gives_a_decision_output_gates_its_share_of_samples() -> None:
    probs = _probabilities(653)
    candidate = _moved(probs, [100, 300, 600], [0.02, 0.025, 0.0314])
    stated = rules("fp16", atols={"p": 0.01})
    report = compare({"p": probs}, {"p": candidate}, stated)
    check = _check(report, "p within tolerance")
    assert check.gating and check.passed  # type: ignore[attr-defined]
    assert "0.995 (0.986-0.999, n=653; minimum 0.98)" in check.detail  # type: ignore[attr-defined]
    stricter = rules("fp16", atols={"p": 0.01}, min_within={"p": 0.999})
    assert compare({"p": probs}, {"p": candidate}, stricter).verdict == "failed"


def test_a_tensor_at_a_lossy_precision_is_judged_by_its_share_of_samples() -> None:
    features = RNG.normal(size=(1000, 16)).astype(np.float32)
    few, many = features.copy(), features.copy()
    few[:4, 0] += np.float32(0.06)  # beyond bf16's atol 0.05 on 4 samples of 1,000
    many[:100, 0] += np.float32(0.06)  # ... on 100
    tensor = {"f": OutputRole("tensor", "option")}
    report = compare({"f": features}, {"f": few}, rules("bf16"), roles=tensor)
    within = report.outputs["f"].within
    assert within is not None and within.gating and within.samples_within == 996
    assert report.verdict == "passed" and report.outputs["f"].agreement == pytest.approx(0.996)
    bad = compare({"f": features}, {"f": many}, rules("bf16"), roles=tensor)
    assert bad.verdict == "failed"


def test_fp32_keeps_the_exact_rule_and_says_how_many_samples_exceeded() -> None:
    """A tensor's values are what it gives: beyond fp32's tolerance it fails (a decision
    output would be judged by its decisions: tests/outputs/test_compare.py)."""
    probs = _probabilities(100)
    candidate = probs.copy()
    candidate[[17, 40, 41]] += np.float32(2e-3)
    candidate[40] += np.float32(1e-3)
    tensor = {"p": OutputRole("tensor", "option")}
    report = compare({"p": probs}, {"p": candidate}, rules("fp32"), roles=tensor)
    values = _check(report, "p values")
    assert values.gating and not values.passed and report.verdict == "failed"  # type: ignore[attr-defined]
    assert "3 of 100 samples exceed it, the worst: 40 (max abs error 0.003), 17 (0.002)" in (
        values.detail  # type: ignore[attr-defined]
    )
    within = report.outputs["p"].within
    assert within is not None and within.minimum is None and within.samples_within == 97


def test_nan_in_a_converted_output_fails_at_every_precision() -> None:
    probs = _probabilities(300)
    broken = probs.copy()
    broken[5, 0] = np.nan
    for precision in ("fp16", "bf16", "int8", "fp32"):
        report = compare({"p": probs}, {"p": broken}, rules(precision))
        assert report.verdict == "failed", precision
        assert "NaN/Inf" in _check(report, "p values").detail  # type: ignore[attr-defined]


def test_a_decision_map_whose_float32_is_not_reproduced_is_judged_by_its_decisions() -> None:
    """Two float32 runtimes summing the same cancelling terms (about 100 each, to logits of
    about 3) in other orders: onset probabilities differ by about 1e-3, past fp32's tolerance,
    no decision changes. A decision map is then judged by its decisions, as at fp16; the same
    values as a tensor, or with a tolerance the user gave them, keep the values rule."""
    w1, w2 = cancelling_weights()
    x = RNG.normal(size=(300, 32, 16)).astype(np.float32)
    hidden = x @ w1
    one_order = hidden @ w2  # BLAS, blocked
    other_order = np.zeros_like(one_order)
    for term in reversed(range(w2.shape[0])):  # one term at a time, last first, in float32
        other_order += hidden[..., term, None] * w2[term]
    reference, candidate = (1 / (1 + np.exp(-logits)) for logits in (one_order, other_order))
    error = float(np.abs(reference - candidate).max())
    assert 1e-4 < error < 1e-2
    onset = {"onset": OutputRole("binary", "option", 0.5)}
    fp32 = compare({"onset": reference}, {"onset": candidate}, rules("fp32"), roles=onset)
    values = _check(fp32, "onset values")
    assert not values.gating and "float32 is not reproduced" in values.detail  # type: ignore[attr-defined]
    decided = _check(fp32, "onset sample F1 >= 0.9 at 0.5")
    assert decided.gating and "minimum 0.98" in decided.detail  # type: ignore[attr-defined]
    assert fp32.verdict == "passed"
    tensor = {"onset": OutputRole("tensor", "option")}
    assert compare({"onset": reference}, {"onset": candidate}, rules("fp32"),
                   roles=tensor).verdict == "failed"  # fmt: skip
    stated = rules("fp32", atols={"onset": 1e-4})
    assert compare({"onset": reference}, {"onset": candidate}, stated, roles=onset).verdict == (
        "failed"
    )
