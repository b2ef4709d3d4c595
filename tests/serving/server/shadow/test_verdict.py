"""The live verdict on streams of counts: when it holds, fails and stays undecided, checked
against Wilson's interval computed here from its formula."""

from __future__ import annotations

import math

from trtconv.serving.server.shadow.verdict import (
    FAILING,
    HOLDING,
    UNDECIDED,
    VALUES_FIGURE,
    Count,
    LiveVerdict,
    overall,
)

Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


def wilson(successes: int, samples: int) -> tuple[float, float]:
    """Wilson's score interval at 95%, from its formula."""
    p, z2 = successes / samples, Z95 * Z95
    centre = (p + z2 / (2 * samples)) / (1 + z2 / samples)
    half = Z95 / (1 + z2 / samples) * math.sqrt(p * (1 - p) / samples + z2 / (4 * samples**2))
    return centre - half, centre + half


def one(agrees: bool, minimum: float | None = 0.97) -> Count:
    return Count("probabilities", "top-1 agreement", minimum, float(agrees), 1)


def stream(pattern: list[bool], length: int) -> list[bool]:
    return [pattern[i % len(pattern)] for i in range(length)]


# The fewest samples that could show 0.97 at all: n of n clears it once n / (n + z^2) >= 0.97.
LEAST = math.ceil(0.97 * Z95 * Z95 / 0.03)


def first_decided(samples: list[bool], below: bool) -> int:
    """The first n, from LEAST on, at which Wilson's interval of the first n samples lies wholly
    below (or above) 0.97."""
    hits = 0
    for n, agrees in enumerate(samples, start=1):
        hits += agrees
        low, high = wilson(hits, n)
        if n >= LEAST and ((high < 0.97) if below else (low >= 0.97)):
            return n
    raise AssertionError("never decided")


def test_a_stream_below_the_bound_turns_failing_when_its_interval_clears_it() -> None:
    samples = stream([True, True, True, False], 400)  # 0.75 agreement
    verdict = LiveVerdict(0.95)
    said, states = [], []
    for agrees in samples:
        said += verdict.add([one(agrees)])
        states.append(verdict.state)
    failed_at = first_decided(samples, below=True)
    assert states.index(FAILING) + 1 == failed_at == LEAST == 125
    [figure] = verdict.snapshot()
    assert figure.state == FAILING and verdict.state == FAILING
    assert figure.changed_at_samples == failed_at
    assert len(said) == 1 and said[0].startswith("shadow: probabilities top-1 agreement failing: ")
    assert "minimum 0.97" in said[0]


def test_one_disagreement_among_the_first_samples_does_not_decide_a_stream() -> None:
    verdict = LiveVerdict(0.95)
    verdict.add([one(True), one(False)])  # 1 of 2: Wilson's interval 0.09-0.91 is below 0.97
    assert verdict.state == UNDECIDED
    [figure] = verdict.snapshot()
    assert figure.samples_needed == LEAST - 2  # what could show the bound at all
    for _ in range(LEAST * 3):
        verdict.add([one(True)])
    assert verdict.state == HOLDING  # the early miss was one in hundreds


def test_a_stream_above_the_bound_holds_once_its_interval_clears_it() -> None:
    samples = stream([True] * 199 + [False], 300)  # 0.995 agreement
    verdict = LiveVerdict(0.95)
    states = []
    for agrees in samples:
        verdict.add([one(agrees)])
        states.append(verdict.state)
    held_at = first_decided(samples, below=False)
    assert set(states[: held_at - 1]) == {UNDECIDED}
    assert states[held_at - 1] == HOLDING and verdict.state == HOLDING
    [figure] = verdict.snapshot()
    assert figure.samples_needed == 0 and figure.share_ci95 is not None
    assert abs(figure.share_ci95[0] - wilson(int(figure.successes), figure.samples)[0]) < 1e-9


def test_an_undecided_figure_says_how_many_more_samples_would_decide_it() -> None:
    verdict = LiveVerdict(0.95)
    verdict.add([Count("p", "top-1 agreement", 0.97, 190.0, 200)])  # 0.95 on 200 samples
    [figure] = verdict.snapshot()
    assert figure.state == UNDECIDED and figure.samples_needed is not None
    needed = 200 + figure.samples_needed
    # at that rate, that many samples decide it, a tenth fewer do not
    assert wilson(math.floor(0.95 * needed), needed)[1] < 0.97
    fewer = int(needed * 0.9)
    assert wilson(math.ceil(0.95 * fewer), fewer)[1] >= 0.97
    assert "more samples would decide it" in figure.line(0.95)


def test_the_values_rule_fails_at_the_first_sample_outside_and_holds_at_59() -> None:
    verdict = LiveVerdict(0.95)
    for n in range(1, 59):
        verdict.add([Count("y", VALUES_FIGURE, None, 1.0, 1)])
        assert verdict.state == UNDECIDED, n
    verdict.add([Count("y", VALUES_FIGURE, None, 1.0, 1)])
    assert verdict.state == HOLDING  # 59 of 59: under 5% of inputs exceed it, at 95%
    said = verdict.add([Count("y", VALUES_FIGURE, None, 0.0, 1)])
    assert verdict.state == FAILING and said and "every sample within" in said[0]


def test_the_overall_state_is_the_worst_figures() -> None:
    assert overall([HOLDING, HOLDING]) == HOLDING
    assert overall([HOLDING, UNDECIDED]) == UNDECIDED
    assert overall([UNDECIDED, FAILING, HOLDING]) == FAILING
    assert overall([]) == UNDECIDED  # nothing compared yet


def test_a_class_maps_fractional_counts_are_judged_as_a_mean() -> None:
    verdict = LiveVerdict(0.95)
    for _ in range(200):  # every sample's map 60% agreeing
        verdict.add([Count("mask", "per-element top-1 agreement", 0.97, 0.6, 1)])
    [figure] = verdict.snapshot()
    assert figure.state == FAILING and abs(figure.share - 0.6) < 1e-9
