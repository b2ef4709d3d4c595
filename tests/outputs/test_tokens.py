"""Text models' outputs: the padding mask found by its documented rule (or named), per-token
class scores judged over valid tokens only, and the roles the token inputs and the hidden size
infer."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import (
    CLASS_MAP,
    CLASSES,
    EMBEDDING,
    NO_MASK,
    TENSOR,
    Judging,
    OutputRole,
    parse_role_options,
)
from trtconv.outputs.compare import compare
from trtconv.outputs.roles import judging_record, over_recorded, resolve_roles
from trtconv.outputs.tokens import InputEvidence, find_mask, hidden_size, sample_shares

RNG = np.random.default_rng(0)
SAMPLES, SEQ, VOCAB = 400, 12, 40


def _tokens(samples: int = SAMPLES, padded_half: bool = True) -> dict[str, np.ndarray]:
    """keras-hub's inputs: token ids and a padding mask; the second half of the batch padded
    after 5 tokens (the first half full)."""
    ids = RNG.integers(1, VOCAB, (samples, SEQ)).astype(np.int32)
    mask = np.ones((samples, SEQ), np.int32)
    if padded_half:
        mask[samples // 2 :, 5:] = 0
        ids[mask == 0] = 0
    return {"token_ids": ids, "padding_mask": mask}


def _logits(samples: int = SAMPLES) -> np.ndarray:
    return (RNG.normal(size=(samples, SEQ, VOCAB)) * 3).astype(np.float32)


def _flip(logits: np.ndarray, where: np.ndarray) -> np.ndarray:
    """`logits` with the top class moved to another class at the positions `where` marks."""
    flipped = logits.copy()
    top = logits.argmax(-1)
    rows, cols = np.nonzero(where)
    flipped[rows, cols, (top[rows, cols] + 1) % VOCAB] = logits[rows, cols].max() + 1.0
    return flipped


def test_the_padding_mask_is_found_by_its_name_shape_and_dtype() -> None:
    feeds = _tokens(10)
    role = OutputRole(CLASS_MAP, "option")
    assert find_mask("logits", role, _logits(10), feeds) == "padding_mask"
    # attention_mask is preferred to a name that only ends in _mask
    both = {**feeds, "attention_mask": feeds["padding_mask"], "segment_mask": feeds["token_ids"]}
    assert find_mask("logits", role, _logits(10), both) == "padding_mask"
    del both["padding_mask"]
    assert find_mask("logits", role, _logits(10), both) == "attention_mask"
    # a float input, another length, or a [batch, D] output: no mask
    floats = {"padding_mask": feeds["padding_mask"].astype(np.float32)}
    assert find_mask("logits", role, _logits(10), floats) is None
    assert find_mask("logits", role, _logits(10)[:, :4], feeds) is None
    assert find_mask("pooled", OutputRole(EMBEDDING, "x"), _logits(10)[:, 0], feeds) is None
    # roles judged whole never take one; mask=none keeps every position
    assert find_mask("logits", OutputRole(TENSOR, "x"), _logits(10), feeds) is None
    none = OutputRole(CLASS_MAP, "option", mask=NO_MASK)
    assert find_mask("logits", none, _logits(10), feeds) == NO_MASK


def test_a_named_mask_that_does_not_fit_is_refused_in_one_sentence() -> None:
    feeds = _tokens(10)
    for text, words in (
        ("class_map:mask=attention_mask", "the model's inputs are padding_mask, token_ids"),
        ("class_map:mask=token_ids", None),  # an integer [batch, seq]: it fits
    ):
        role = parse_role_options([f"logits={text}"])["logits"]
        if words is None:
            assert find_mask("logits", role, _logits(10), feeds) == "token_ids"
            continue
        with pytest.raises(UsageError, match=words):
            find_mask("logits", role, _logits(10), feeds)
    pooled = parse_role_options(["pooled=embedding:mask=padding_mask"])["pooled"]
    with pytest.raises(UsageError, match="has no positions for mask=padding_mask"):
        find_mask("pooled", pooled, _logits(10)[:, 0], feeds)
    wrong = {**feeds, "padding_mask": feeds["padding_mask"][:, :3]}
    role = parse_role_options(["logits=class_map:mask=padding_mask"])["logits"]
    with pytest.raises(UsageError, match=r"a mask is integer or boolean \[batch, seq\]"):
        find_mask("logits", role, _logits(10), wrong)


def test_padded_positions_do_not_move_a_per_token_verdict() -> None:
    """Half the batch padded after 5 of 12 tokens. The converted model's top-1 is wrong on
    every padded position and on 1 valid token in 200: the verdict counts valid tokens only,
    and matches a count done here with numpy over them."""
    feeds, want = _tokens(), _logits()
    valid = feeds["padding_mask"] != 0
    wrong_valid = valid & (RNG.uniform(size=valid.shape) < 0.005)
    got = _flip(want, ~valid | wrong_valid)
    roles = resolve_roles({"logits": want}, {}, parse_role_options(["logits=class_map"]))
    assert roles["logits"].mask is None  # no feeds: no mask found
    evidence = InputEvidence(feeds)
    roles = resolve_roles({"logits": want}, {}, parse_role_options(["logits=class_map"]), evidence)
    assert roles["logits"].mask == "padding_mask"
    report = compare({"logits": want}, {"logits": got}, rules("int8"), roles=roles, feeds=feeds)
    # the independent count: per sample, the share of its valid tokens whose top-1 agrees
    agree = want.argmax(-1) == got.argmax(-1)
    shares = [agree[i][valid[i]].mean() for i in range(SAMPLES)]
    output = report.outputs["logits"]
    assert output.agreement == pytest.approx(float(np.mean(shares)))
    assert report.verdict == "passed" and output.agreement > 0.97
    # counting every position, the padding alone (7 of 12 positions of half the batch) fails
    unmasked = resolve_roles(
        {"logits": want}, {}, parse_role_options(["logits=class_map:mask=none"]), evidence
    )
    whole = compare({"logits": want}, {"logits": got}, rules("int8"), roles=unmasked, feeds=feeds)
    assert whole.verdict == "failed" and whole.outputs["logits"].agreement < 0.8
    check = next(c for c in report.checks if c.name == "logits per-element top-1 agreement")
    assert "over valid tokens (3,400 of 4,800 positions)" in check.detail


def test_garbage_in_padding_changes_nothing_of_a_per_token_report() -> None:
    feeds, want = _tokens(), _logits()
    valid = feeds["padding_mask"] != 0
    got = want + RNG.normal(scale=1e-3, size=want.shape).astype(np.float32)
    garbage = np.where(valid[..., None], got, RNG.normal(size=want.shape) * 100).astype(np.float32)
    roles = resolve_roles(
        {"logits": want}, {}, parse_role_options(["logits=class_map"]), InputEvidence(feeds)
    )
    reports = [
        compare({"logits": want}, {"logits": g}, rules("fp16"), roles=roles, feeds=feeds)
        for g in (got, garbage)
    ]
    assert reports[0].to_json() == reports[1].to_json()  # values, shares and verdict alike
    assert reports[0].outputs["logits"].max_abs_error < 0.01


def test_a_role_with_a_mask_needs_the_inputs() -> None:
    roles = {"logits": OutputRole(CLASS_MAP, "option", mask="padding_mask")}
    with pytest.raises(UsageError, match="the inputs were not given"):
        compare({"logits": _logits(4)}, {"logits": _logits(4)}, rules("int8"), roles=roles)


def test_samples_without_a_valid_token_are_not_counted() -> None:
    hits = np.array([[True, False, True], [True, True, True], [False, False, False]])
    valid = np.array([[True, True, False], [False, False, False], [True, True, True]])
    shares, counted = sample_shares(hits, valid)
    assert shares.tolist() == [0.5, 0.0] and counted.tolist() == [True, False, True]


def test_the_hidden_size_is_the_commonest_length_of_one_dimensional_weights() -> None:
    shapes = [(300, 32), (32,), (32,), (64,), (32, 64), (32,), (2,)]
    assert hidden_size(shapes) == 32
    assert hidden_size([(10, 4), (4,)]) is None  # one alone says nothing
    assert hidden_size([]) is None


@pytest.mark.parametrize(
    ("name", "shape", "op", "hidden", "role"),
    [
        ("output_0", (4, SEQ, 300), "MatMul", 32, CLASS_MAP),  # a vocabulary: 300 >= 4 x 32
        ("output_0", (4, SEQ, 32), "AddV2", 32, EMBEDDING),  # the hidden size: vectors
        ("output_0", (4, SEQ, 9), "BiasAdd", 32, TENSOR),  # 9 tags or a projection: not said
        ("output_0", (4, SEQ, 300), "MatMul", None, TENSOR),  # no hidden size known
        ("token_logits", (4, SEQ, 9), "BiasAdd", None, CLASS_MAP),  # the name says it
        ("sequence_output", (4, SEQ, 9), "AddV2", None, EMBEDDING),
        ("pooled_output", (4, 32), "Tanh", None, EMBEDDING),
        ("output_0", (4, 32), "Tanh", None, EMBEDDING),  # a Tanh vector
        ("output_0", (4, 8), "Tanh", None, CLASSES),  # 8 scores, as before
        ("embedding", (4, 8), "BiasAdd", None, EMBEDDING),
    ],
)
def test_text_outputs_take_their_role_from_shape_inputs_and_names(
    name: str, shape: tuple[int, ...], op: str, hidden: int | None, role: str
) -> None:
    array = RNG.normal(size=shape).astype(np.float32)
    evidence = InputEvidence(_tokens(4, padded_half=False), hidden)
    found = resolve_roles({name: array}, {name: op}, None, evidence)[name]
    assert found.role == role, found.source
    if role == CLASS_MAP and len(shape) == 3:
        assert found.mask == "padding_mask"


def test_unit_length_rows_are_an_embedding() -> None:
    vectors = RNG.normal(size=(20, 64))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    found = resolve_roles({"output_0": vectors.astype(np.float32)})["output_0"]
    assert found.role == EMBEDDING and "unit length" in found.source


def test_an_unjudged_sequence_names_class_map_and_embedding_by_its_shape() -> None:
    want = _logits(10)
    report = compare({"output_0": want}, {"output_0": want}, rules("int8"), feeds=_tokens(10))
    reason = next(c for c in report.checks if c.name == "output_0 not judged").detail
    assert f"--output-role output_0=class_map if its [batch, {SEQ}, {VOCAB}] holds" in reason
    assert "output_0=embedding if a vector per position" in reason


def test_the_mask_travels_with_the_role_into_the_manifest_and_back() -> None:
    roles = resolve_roles(
        {"logits": _logits(4)},
        {},
        parse_role_options(["logits=class_map"]),
        InputEvidence(_tokens(4)),
    )
    record = judging_record(Judging(), roles)
    assert record.to_json()["roles"]["logits"]["mask"] == "padding_mask"
    again = over_recorded(Judging(), type(record).from_json(record.to_json()))
    assert again.roles["logits"].mask == "padding_mask"
    assert again.roles["logits"].source == "manifest (option)"
