"""Embeddings judged by cosine similarity per sample: the verdict matches a count made here with
numpy, a sequence of vectors is judged per token over its valid tokens, the bound is the
precision's (or the role's) and travels into the manifest, and every consumer of a verdict
(the agreement bench reports, the release gates, the shadow check's counts) reads it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import EMBEDDING, Judging, OutputRole, parse_role_options
from trtconv.outputs.compare import compare
from trtconv.outputs.cosine import cosines
from trtconv.outputs.exact import samples_to_decide
from trtconv.outputs.roles import judging_record, resolve_roles
from trtconv.outputs.tokens import InputEvidence
from trtconv.outputs.tolerance import MIN_COSINE, TOLERANCES
from trtconv.outputs.validation_result import roles_of
from trtconv.release.gates import Measures, evaluate_gates
from trtconv.release.settings import GateSettings
from trtconv.release.verdict import measures_for
from trtconv.serving.server.shadow.judge import figures

RNG = np.random.default_rng(1)


def _numpy_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a64 * b64).sum(-1) / (np.linalg.norm(a64, axis=-1) * np.linalg.norm(b64, axis=-1))


def _noisy(want: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    noise = RNG.normal(size=want.shape) * np.asarray(scale)
    return (want + noise * np.abs(want).mean()).astype(np.float32)


def test_cosines_are_numpys_and_zero_or_broken_vectors_are_decided() -> None:
    want = RNG.normal(size=(50, 16)).astype(np.float32)
    got = _noisy(want, 0.1)
    np.testing.assert_allclose(cosines(want, got), _numpy_cosine(want, got), rtol=1e-12)
    zeros, broken = np.zeros((1, 4)), np.array([[np.nan, 1.0, 0.0, 0.0]])
    assert cosines(zeros, zeros).tolist() == [1.0]  # both nothing: the same
    assert cosines(np.ones((1, 4)), zeros).tolist() == [0.0]  # no direction shared
    assert cosines(np.ones((1, 4)), broken).tolist() == [0.0]  # NaN never agrees


def test_a_pooled_embedding_verdict_matches_numpys_count() -> None:
    """Most samples barely moved, 8 of 300 turned by more than the bound allows."""
    want = np.tanh(RNG.normal(size=(300, 64))).astype(np.float32)
    scale = np.where(np.arange(300)[:, None] < 8, 0.5, 0.01)
    got = _noisy(want, scale)
    roles = resolve_roles({"pooled_output": want}, {"pooled_output": "Tanh"})
    assert roles["pooled_output"].role == EMBEDDING
    report = compare({"pooled_output": want}, {"pooled_output": got}, rules("int8"), roles=roles)
    output = report.outputs["pooled_output"]
    within = _numpy_cosine(want, got) >= MIN_COSINE
    assert output.agreement == pytest.approx(within.mean()) and within.sum() == 292
    assert output.threshold == MIN_COSINE == TOLERANCES["int8"].min_cosine
    check = next(c for c in report.checks if c.name == "pooled_output cosine >= 0.99")
    assert check.gating and "8 sample(s) below, the worst:" in check.detail
    # 292 of 300 (0.973) against int8's 0.97: its interval straddles the bound
    assert report.verdict == "inconclusive" and report.top1_agreement == output.agreement
    needed = samples_to_decide(report)  # what would decide it, as for any rate
    assert needed is not None and needed > 300
    # a bound of its own, stated with the role
    lenient = resolve_roles(
        {"pooled_output": want}, {}, parse_role_options(["pooled_output=embedding:0.5"])
    )
    passed = compare({"pooled_output": want}, {"pooled_output": got}, rules("int8"), roles=lenient)
    assert passed.verdict == "passed" and passed.outputs["pooled_output"].threshold == 0.5


def test_a_sequence_of_vectors_is_judged_per_token_over_valid_tokens() -> None:
    """[batch, seq, D]: a sample agrees when 95% of its valid tokens reach the bound. Padding
    turned at random moves nothing."""
    samples, seq, width = 120, 10, 16
    want = RNG.normal(size=(samples, seq, width)).astype(np.float32)
    mask = np.ones((samples, seq), np.int32)
    mask[::2, 6:] = 0
    got = _noisy(want, 0.01)
    got[mask == 0] = RNG.normal(size=(int((mask == 0).sum()), width))  # garbage in the padding
    got[3, 2] = -want[3, 2]  # one valid token of sample 3 turned around
    feeds = {"token_ids": np.ones((samples, seq), np.int32), "padding_mask": mask}
    roles = resolve_roles(
        {"sequence_output": want}, {}, None, InputEvidence(feeds, hidden_size=width)
    )
    assert roles["sequence_output"].role == EMBEDDING
    assert roles["sequence_output"].mask == "padding_mask"
    report = compare(
        {"sequence_output": want},
        {"sequence_output": got},
        rules("fp16"),
        roles=roles,
        feeds=feeds,
    )
    # numpy's count: per sample, the share of valid tokens with cosine >= 0.99, at least 0.95
    token = _numpy_cosine(want, got) >= MIN_COSINE
    valid = mask != 0
    agrees = [token[i][valid[i]].mean() >= 0.95 for i in range(samples)]
    output = report.outputs["sequence_output"]
    assert output.agreement == pytest.approx(np.mean(agrees)) and not agrees[3]
    check = next(c for c in report.checks if c.name == "sequence_output cosine >= 0.99")
    assert (
        "at 95% of their valid tokens (padding_mask marks 960 of 1,200 positions)" in check.detail
    )
    assert "3 (lowest token cosine -1.0000)" in check.detail
    # the values line and the share within fp16's atol see valid tokens only
    assert output.max_abs_error is not None and output.max_abs_error < 3 * float(np.abs(want).max())
    assert output.within is not None and not output.within.gating  # the cosine judges it


def test_a_mask_can_be_named_or_refused() -> None:
    with pytest.raises(UsageError, match="mask=INPUT marks the valid tokens"):
        parse_role_options(["pooled=classes:mask=padding_mask"])
    role = parse_role_options(["seq=embedding:0.995:mask=attention_mask"])["seq"]
    assert (role.role, role.threshold, role.mask) == (EMBEDDING, 0.995, "attention_mask")
    with pytest.raises(
        UsageError, match=r"cosine bound in 'seq=embedding:1.5'|must be in \(0, 1\]"
    ):
        parse_role_options(["seq=embedding:1.5"])


def test_the_bound_is_recorded_and_read_back_from_the_manifest() -> None:
    want = RNG.normal(size=(60, 32)).astype(np.float32)
    roles = {"embedding": OutputRole(EMBEDDING, "option")}
    report = compare({"embedding": want}, {"embedding": want}, rules("int8"), roles=roles)
    record = judging_record(Judging(), roles_of(report, roles))
    assert record.to_json()["roles"]["embedding"] == {
        "role": "embedding",
        "source": "option",
        "threshold": MIN_COSINE,
    }


def test_fp32_is_decided_by_its_values_and_the_cosine_is_reported() -> None:
    want = RNG.normal(size=(100, 32)).astype(np.float32)
    roles = {"embedding": OutputRole(EMBEDDING, "option")}
    report = compare({"embedding": want}, {"embedding": want + 1e-6}, rules("fp32"), roles=roles)
    cosine = next(c for c in report.checks if c.name == "embedding cosine >= 0.99")
    assert report.verdict == "passed" and not cosine.gating
    # past fp32's atol but finite: float32 not reproduced, the cosine judges it as at fp16
    moved = compare(
        {"embedding": want}, {"embedding": _noisy(want, 1e-3)}, rules("fp32"), roles=roles
    )
    output = moved.outputs["embedding"]
    assert output.values_not_reproduced and moved.verdict == "inconclusive"
    assert next(c for c in moved.checks if c.name == "embedding cosine >= 0.99").gating


def test_an_embedding_model_meets_the_agreement_gate_not_the_accuracy_drop() -> None:
    want = RNG.normal(size=(400, 32)).astype(np.float32)
    roles = {"embedding": OutputRole(EMBEDDING, "option")}
    report = compare(
        {"embedding": want}, {"embedding": _noisy(want, 0.01)}, rules("int8"), roles=roles
    )
    measures = measures_for(report, None, None)
    assert (measures.decides, measures.agrees) == (False, True)
    gates = {
        g.name: g
        for g in evaluate_gates(
            GateSettings(max_accuracy_drop=0.01, min_top1_agreement=0.97), measures
        )
    }
    assert gates["max_accuracy_drop"].detail.startswith("not applicable")
    assert gates["min_top1_agreement"].passed and gates["min_top1_agreement"].measured == 1.0
    unmeasured = evaluate_gates(
        GateSettings(min_top1_agreement=0.97), Measures(decides=False, agrees=False)
    )
    assert "classes, binary, class_map or embedding role" in unmeasured[-1].detail


def test_the_shadow_check_counts_an_embeddings_samples_reaching_its_bound() -> None:
    want = RNG.normal(size=(64, 32)).astype(np.float32)
    got = _noisy(want, np.where(np.arange(64)[:, None] < 4, 1.0, 0.001))
    roles = {"embedding": OutputRole(EMBEDDING, "manifest (option)", 0.99)}
    tolerance = rules("int8", confidence=0.0)
    report = compare({"embedding": want}, {"embedding": got}, tolerance, roles=roles)
    (count,) = figures("embedding", report.outputs["embedding"], report, values_decide=False)
    assert count.figure == "samples with cosine >= 0.99"
    assert (count.successes, count.samples, count.minimum) == (60, 64, 0.97)
