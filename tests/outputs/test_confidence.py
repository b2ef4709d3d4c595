"""The statistics verdicts rest on (trtconv.outputs.confidence) and the three-valued rule in the
comparison: synthetic counts, every interval checked against scipy itself. Pure, not timed."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest, bootstrap

from tests.helpers.rules import rules
from trtconv.core.errors import AccuracyError, UsageError
from trtconv.options.convert import ConvertOptions
from trtconv.options.shared import DEFAULT_CONFIDENCE
from trtconv.options.validate import ValidateOptions
from trtconv.outputs import confidence
from trtconv.outputs.compare import compare, raise_if_failed
from trtconv.outputs.confidence import (
    FAILED,
    INCONCLUSIVE,
    PASSED,
    Rate,
    at_least,
    at_most,
    interval_text,
    paired_difference_interval,
    proportion_interval,
    samples_needed,
    samples_to_show,
)
from trtconv.outputs.contract import Stated, resolve
from trtconv.outputs.validation_result import ValidationReport


def _wilson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    found = binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
    return found.low, found.high


@pytest.mark.parametrize("k, n", [(7, 7), (51, 52), (0, 5), (450, 450), (443, 450), (1, 1)])
def test_a_rate_interval_is_scipys_wilson_interval(k: int, n: int) -> None:
    assert proportion_interval(k, n) == pytest.approx(_wilson(k, n))
    assert proportion_interval(k, n, 0.99) == pytest.approx(_wilson(k, n, 0.99))
    assert proportion_interval(0, 0) is None


def test_the_closed_form_gives_scipys_wilson_interval_to_the_last_bit() -> None:
    """No verdict moves: the same figures as binomtest's, without its p-value's cost."""
    for n in (1, 2, 7, 59, 125, 360, 1000):
        for k in sorted({0, 1, n // 2, n - 1, n} - {-1}):
            for level in (0.9, 0.95, 0.99):
                assert proportion_interval(k, n, level) == _wilson(k, n, level), (k, n, level)


def test_the_issues_cases() -> None:
    """7 of 7 cannot show 0.97 (lower bound about 0.65); 51 of 52 spans about 0.90-1.00."""
    low, high = proportion_interval(7, 7) or (0.0, 0.0)
    assert low == pytest.approx(0.6457, abs=1e-4) and high == 1.0
    low, high = proportion_interval(51, 52) or (0.0, 0.0)
    assert (round(low, 2), round(high, 2)) == (0.90, 1.00)
    assert Rate(7, 7).decide(0.97, 0.95) == INCONCLUSIVE
    assert Rate(51, 52).decide(0.97, 0.95) == INCONCLUSIVE
    assert Rate(51, 52).decide(0.97, 0.0) == PASSED  # the point rule, as before intervals


def test_the_rule_is_three_valued() -> None:
    assert at_least(0.99, (0.975, 0.995), 0.97) == PASSED
    assert at_least(0.95, (0.93, 0.965), 0.97) == FAILED
    assert at_least(0.98, (0.95, 0.99), 0.97) == INCONCLUSIVE
    assert at_least(0.98, None, 0.97) == PASSED and at_least(0.96, None, 0.97) == FAILED
    assert at_most(0.01, (-0.01, 0.015), 0.02) == PASSED
    assert at_most(0.05, (0.03, 0.07), 0.02) == FAILED
    assert at_most(0.01, (-0.01, 0.03), 0.02) == INCONCLUSIVE
    assert at_most(0.03, None, 0.02) == FAILED
    assert Rate(900, 1000).decide(0.97, 0.95) == FAILED  # 0.90: the interval misses 0.97


def test_samples_needed_is_the_fewest_whose_wilson_bound_clears_the_budget() -> None:
    needed = samples_needed(0.99, 0.97)
    assert needed is not None
    # Counts are rounded against the decision (down to pass, up to fail).
    assert _wilson(math.floor(0.99 * needed), needed)[0] >= 0.97
    assert _wilson(math.floor(0.99 * (needed - 1)), needed - 1)[0] < 0.97
    below = samples_needed(0.95, 0.97)  # a rate under the budget: the samples that fail it
    assert below is not None and _wilson(math.ceil(0.95 * below), below)[1] < 0.97
    assert samples_needed(0.97, 0.97) is None
    # 6 of 7 (0.857) straddles 0.97; rounding to 3 of 4 must not make 4 samples "decide" it.
    assert _wilson(6, 7)[1] > 0.97 and (samples_needed(6 / 7, 0.97) or 0) > 7


def test_the_fewest_samples_that_can_ever_show_a_budget() -> None:
    """n of n must clear it: z^2 / (n + z^2) <= 1 - minimum for the Wilson bound."""
    for minimum in (0.9, 0.97, 0.99):
        fewest = samples_to_show(minimum)
        assert fewest is not None
        assert _wilson(fewest, fewest)[0] >= minimum > _wilson(fewest - 1, fewest - 1)[0]
    assert samples_to_show(0.97) == 125 and samples_to_show(0.99) == 381
    assert samples_to_show(1.0) is None and samples_to_show(0.0) == 1


def _paired(n: int, worse: int, better: int, wrong: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Correctness of a reference and a candidate over n samples: the candidate is wrong on
    `worse` samples the reference gets right, right on `better` it gets wrong, and both are
    wrong on `wrong` more."""
    reference, candidate = np.ones(n), np.ones(n)
    candidate[:worse] = 0
    reference[worse : worse + better] = 0
    reference[worse + better : worse + better + wrong] = 0
    candidate[worse + better : worse + better + wrong] = 0
    return reference, candidate


@pytest.mark.parametrize("n, worse, better", [(450, 10, 3), (52, 2, 0), (450, 1, 1), (1000, 4, 9)])
def test_the_drop_interval_is_scipys_paired_bootstrap(n: int, worse: int, better: int) -> None:
    reference, candidate = _paired(n, worse, better, wrong=5)

    def drop(first: np.ndarray, second: np.ndarray, axis: int = -1) -> np.ndarray:
        return first.mean(axis=axis) - second.mean(axis=axis)

    expected = bootstrap(
        (reference, candidate),
        drop,
        paired=True,
        vectorized=True,
        method="BCa",
        n_resamples=confidence.BOOTSTRAP_RESAMPLES,
        batch=confidence.BOOTSTRAP_BATCH,
        rng=np.random.default_rng(confidence.BOOTSTRAP_SEED),
    ).confidence_interval
    found = paired_difference_interval(reference, candidate)
    assert found == pytest.approx((expected.low, expected.high))
    assert found is not None and found[0] <= (worse - better) / n <= found[1]
    assert paired_difference_interval(reference, candidate) == found  # seeded


def test_a_drop_with_no_differing_sample_is_that_value() -> None:
    assert paired_difference_interval(*_paired(200, 0, 0, wrong=9)) == (0.0, 0.0)
    assert paired_difference_interval(np.ones(3), np.zeros(3)) == (1.0, 1.0)
    assert paired_difference_interval(np.ones(0), np.ones(0)) is None


def test_the_human_figure() -> None:
    assert interval_text(51 / 52, proportion_interval(51, 52), 52) == "0.981 (0.898-0.997, n=52)"
    assert interval_text(0.01, (-0.0041, 0.0242), 450, signed=True) == (
        "+0.010 (-0.005 to +0.025, n=450)"
    )


def _agreeing(samples: int, disagreeing: int) -> tuple[dict[str, np.ndarray], ...]:
    """Class scores of `samples` samples and a candidate whose top-1 differs on `disagreeing`."""
    reference = np.eye(10, dtype=np.float32)[np.arange(samples) % 10] * 0.9 + 0.01
    candidate = reference.copy()
    candidate[:disagreeing] = np.roll(candidate[:disagreeing], 1, axis=1)
    return {"p": reference}, {"p": candidate}


def test_few_samples_make_an_int8_verdict_inconclusive_with_the_samples_it_needs() -> None:
    reference, candidate = _agreeing(7, 0)
    report = compare(reference, candidate, rules("int8"), None, "seven")
    assert report.verdict == INCONCLUSIVE and not report.passed
    check = next(c for c in report.checks if c.name == "p top-1 agreement")
    assert check.inconclusive and not check.passed and "n=7" in check.detail
    assert "on 7 samples; about 125 at this rate would decide it" in check.detail
    with pytest.raises(AccuracyError, match="inconclusive") as caught:
        raise_if_failed(report, "the int8 artifact")
    assert caught.value.exit_code == 4
    point = compare(reference, candidate, rules("int8", confidence=0.0), None, "seven")
    assert point.verdict == PASSED and "point decision" in point.checks[-1].detail


def test_many_samples_decide_and_a_failure_stays_a_failure() -> None:
    reference, candidate = _agreeing(1000, 5)  # 0.995 agreement
    report = compare(reference, candidate, rules("int8"), None, "many")
    assert report.verdict == PASSED
    low, high = report.top1_agreement_ci95 or (0.0, 0.0)
    assert high - low < 0.05 and (low, high) == pytest.approx(_wilson(995, 1000))
    reference, candidate = _agreeing(1000, 100)  # 0.90: the whole interval is below 0.97
    assert compare(reference, candidate, rules("int8")).verdict == FAILED


def test_a_failed_check_outranks_an_inconclusive_one_and_both_outrank_not_judged() -> None:
    reference, candidate = _agreeing(52, 1)
    unjudged = {**reference, "t": np.zeros((52, 2, 2), np.float32)}
    report = compare(
        unjudged, {**candidate, "t": unjudged["t"]}, rules("int8"), allow_unjudged=True
    )
    assert report.unjudged == ["t"] and report.verdict == INCONCLUSIVE and not report.passed
    labels = np.arange(52) % 10
    bad = {"p": np.roll(reference["p"], 1, axis=1)}
    assert compare(reference, bad, rules("int8"), labels).verdict == FAILED


def test_a_confidence_other_than_95_decides_on_its_own_interval() -> None:
    reference, candidate = _agreeing(300, 2)  # 0.9933: passes 0.97 at 95%, not at 99.9%
    assert compare(reference, candidate, rules("int8")).verdict == PASSED
    strict = compare(reference, candidate, rules("int8", confidence=0.999))
    assert strict.verdict == INCONCLUSIVE
    check = strict.checks[-1].detail
    assert "decided on the 100% interval" not in check and "99.9%" in check
    low, _ = _wilson(298, 300)
    assert strict.top1_agreement_ci95 == pytest.approx((low, 1.0), abs=0.01)  # still the 95%


def test_the_report_reads_back_with_its_intervals_and_confidence() -> None:
    reference, candidate = _agreeing(52, 1)
    labels = np.arange(52) % 10
    report = compare(reference, candidate, rules("int8"), labels, "u")
    again = ValidationReport.from_json(report.to_json())
    assert again == report and again.verdict == INCONCLUSIVE and again.confidence == 0.95
    assert again.to_json()["accuracy_drop_ci95"] == list(report.outputs["p"].accuracy_drop_ci95)


def test_confidence_must_be_0_or_a_level_below_1(tmp_path: object) -> None:
    for wrong in (1.0, -0.1, 95.0):
        with pytest.raises(UsageError, match="--confidence"):
            ConvertOptions("model", "int8", confidence=wrong)
        with pytest.raises(UsageError, match="--confidence"):
            ValidateOptions("artifact", confidence=wrong)
    assert ConvertOptions("model", "int8").confidence is None  # the contract's default
    assert resolve("int8", Stated()).tolerance.confidence == DEFAULT_CONFIDENCE == 0.95
    assert ValidateOptions("artifact").confidence is None  # the manifest's
