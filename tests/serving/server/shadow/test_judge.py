"""The shadow check judges by the artifact's manifest, through trtconv's own comparison: its
counts are checked against figures computed here in numpy."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.shadow_fixtures import shadow_manifest
from trtconv.outputs.validation_result import OutputComparison
from trtconv.serving.server.shadow.judge import WITHIN_FIGURE, ShadowJudge
from trtconv.serving.server.shadow.verdict import VALUES_FIGURE


def scores(rows: int, seed: int) -> np.ndarray:
    found = np.random.default_rng(seed).random((rows, 10)).astype(np.float32)
    return found / found.sum(axis=1, keepdims=True)


def test_class_scores_count_their_top1_agreement_and_name_the_samples_that_disagree() -> None:
    judge = ShadowJudge(shadow_manifest("int8"))
    native = scores(50, 0)
    served = native.copy()
    flipped = [3, 17, 18, 44]
    for row in flipped:  # the runner-up wins: another decision
        served[row] = np.roll(native[row], 1)
    served[:, :] += 0.001  # values moved everywhere else: int8 is judged by its decisions
    independent = int((native.argmax(1) == served.argmax(1)).sum())
    [count] = judge.counts({"probabilities": native}, {"probabilities": served})
    assert (count.figure, count.minimum) == ("top-1 agreement", 0.97)
    assert (count.successes, count.samples) == (independent, 50)
    disagreeing = np.flatnonzero(native.argmax(1) != served.argmax(1)).tolist()
    assert judge.disagreeing({"probabilities": native}, {"probabilities": served}) == disagreeing
    assert judge.confidence == 0.95


def test_fp32_counts_the_samples_every_element_of_which_lies_within_atol() -> None:
    judge = ShadowJudge(shadow_manifest("fp32"))
    native = scores(30, 1)
    served = native.copy()
    served[7, 2] += 5e-4  # beyond fp32's 1e-4, the decision unchanged
    [count] = judge.counts({"probabilities": native}, {"probabilities": served})
    assert (count.figure, count.minimum) == (VALUES_FIGURE, None)  # the values decide fp32
    assert (count.successes, count.samples) == (29, 30)


def test_a_regression_output_keeps_the_bound_its_validation_derived() -> None:
    recorded = OutputComparison(
        max_abs_error=0.2,
        max_rel_error=0.1,
        atol=None,
        passed=True,
        shape_matches=True,
        role="regression",
        tolerance=0.05,
    )
    manifest = shadow_manifest("int8", {"box": "regression"}, outputs={"box": recorded})
    judge = ShadowJudge(manifest)
    rng = np.random.default_rng(2)
    native = rng.normal(0, 10, (40, 10)).astype(np.float32)  # a spread of 10: 0.1 x it is 1
    served = native + rng.uniform(-0.04, 0.04, native.shape).astype(np.float32)
    served[[5, 9]] += 0.2  # these two beyond 0.05 (far within 1)
    [count] = judge.counts({"box": native}, {"box": served})
    assert (count.figure, count.minimum) == (WITHIN_FIGURE, 0.97)
    assert (count.successes, count.samples) == (38, 40)


def test_the_bounds_convert_validated_against_are_the_live_ones() -> None:
    """From the recorded contract, and from an earlier trtconv's manifest (its validation's
    bounds, said in one line)."""
    for contract in (True, False):
        manifest = shadow_manifest("fp32", minimum=0.9, contract=contract)  # convert's limit
        judge = ShadowJudge(manifest)
        assert judge.tolerance.min_top1_agreement == 0.9 and not judge.tolerance.values_decide
        assert (judge.note is None) == contract
        plain = ShadowJudge(shadow_manifest("fp32", contract=contract)).tolerance
        assert plain.values_decide and plain.atol == 1e-4  # the table's: fp32 decided by values


def test_per_token_scores_count_valid_tokens_and_an_embedding_its_cosine() -> None:
    """A language model's logits [N, 6, 8] over the tokens padding_mask marks (half the batch
    padded after 2 tokens, the served model wrong on every padded position and on 3 valid
    tokens), and an embedding's samples reaching its recorded cosine bound."""
    roles = {"logits": "class_map:mask=padding_mask", "pooled": "embedding:0.99"}
    judge = ShadowJudge(shadow_manifest("int8", roles))
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(40, 6, 8)).astype(np.float32)
    mask = np.ones((40, 6), np.int32)
    mask[20:, 2:] = 0
    served = logits.copy()
    wrong = (mask == 0) | np.isin(np.arange(40 * 6).reshape(40, 6), [0, 7, 13])
    served[wrong] = np.roll(logits[wrong], 1, axis=-1)
    pooled = rng.normal(size=(40, 32)).astype(np.float32)
    turned = pooled.copy()
    turned[[4, 30]] = -turned[[4, 30]]  # two samples point the other way
    feeds = {"token_ids": np.ones((40, 6), np.int32), "padding_mask": mask}
    native, mine = {"logits": logits, "pooled": pooled}, {"logits": served, "pooled": turned}
    counts = {count.output: count for count in judge.counts(native, mine, feeds)}
    agree = (logits.argmax(-1) == served.argmax(-1)) & (mask != 0)
    independent = (agree.sum(axis=1) / (mask != 0).sum(axis=1)).sum()
    assert counts["logits"].figure == "per-element top-1 agreement"
    assert (
        counts["logits"].successes == pytest.approx(independent) and counts["logits"].samples == 40
    )
    assert counts["pooled"].figure == "samples with cosine >= 0.99"
    assert (counts["pooled"].successes, counts["pooled"].samples) == (38, 40)
    assert judge.disagreeing(native, mine, feeds) == [0, 1, 2, 4, 30]
