"""The ladder's pure parts: search slice, variants, step counts, TF origins, errors, budget."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.calib.sources import ArraySet
from trtconv.core.errors import UsageError
from trtconv.onnxlib.tf_names import TfOrigin, tf_origin
from trtconv.quantize.ladder import describe, doubling, scheme_variants
from trtconv.quantize.ladder_result import SpeedRow
from trtconv.quantize.qdq import QdqOptions
from trtconv.quantize.search import (
    CALIBRATION_SAMPLES,
    CALIBRATION_SPARE,
    HELD_OUT_SPARE,
    MIN_SEARCH_SAMPLES,
    SEARCH_SAMPLES,
    Score,
    output_error,
    resolution_note,
    settles,
    split_for_search,
    unshowable,
)
from trtconv.quantize.speed import bench_no_gain_warnings, no_gain_notes


class Row(NamedTuple):
    """What the bench warnings read of a result row."""

    label: str
    batch_size: int
    throughput_per_s: float
    device: str | None = "cpu"


def _part(count: int, name: str) -> ArraySet:
    return ArraySet({"x": np.arange(count, dtype=np.float32)[:, None]}, None, name)


def test_search_prefers_held_out_samples_beyond_those_validated_on() -> None:
    split = split_for_search(_part(1000, "c"), 500, _part(700, "v"), 300)
    assert (len(split.calibration), len(split.held_out)) == (500, 300)
    assert split.drawn_from == HELD_OUT_SPARE and split.search.source == "v[300:700]"
    assert split.search.x[0, 0] == 300 and len(split.search) == 400


def test_search_then_takes_spare_calibration_data_without_overlap() -> None:
    split = split_for_search(_part(2000, "c"), 500, _part(400, "v"), 400 - MIN_SEARCH_SAMPLES + 1)
    assert (
        split.drawn_from == CALIBRATION_SPARE
        and split.search.source == f"c[500:{500 + SEARCH_SAMPLES}]"
    )
    assert split.search.x[0, 0] == 500 and len(split.search) == SEARCH_SAMPLES


def test_with_nothing_to_spare_the_search_scores_on_the_calibration_samples() -> None:
    split = split_for_search(_part(520, "c"), 500, _part(100, "v"), 100)
    assert split.drawn_from == CALIBRATION_SAMPLES and len(split.calibration) == 500
    assert np.array_equal(split.search.x, split.calibration.x[:SEARCH_SAMPLES])


def test_a_search_slice_too_small_for_the_budget_says_so() -> None:
    """At 95% confidence 124 samples can never show 0.97 (125 of 125 can); with point decisions
    (confidence 0) the old caveat: too few disagreements allowed to resolve a step."""
    assert resolution_note(512, rules("int8")) is None
    assert resolution_note(125, rules("int8")) is None
    note = resolution_note(124, rules("int8"))
    assert note is not None and note.startswith("124 search samples cannot show a top-1 agreement")
    assert "at least 125 samples can" in note
    assert unshowable(124, rules("int8")) and not unshowable(124, rules("int8", confidence=0))
    point = resolution_note(120, rules("int8", min_top1_agreement=0.99, confidence=0.0))
    assert point is not None and point.startswith(
        "120 search samples allow 1.2 top-1 disagreements"
    )


def test_a_step_settles_when_it_meets_the_budget_or_when_the_slice_cannot_show_it() -> None:
    """A step whose interval straddles the budget does not meet it; on a slice that can never
    show the budget, the ladder stops at the first step not shown to miss it."""
    inconclusive = Score(0.99, None, None, 0.1, passed=False, verdict="inconclusive")
    failed = Score(0.5, None, None, 0.9, passed=False, verdict="failed")
    passed = Score(0.995, None, None, 0.05, passed=True, verdict="passed")
    assert not settles(inconclusive, False) and settles(inconclusive, True)
    assert not settles(failed, True) and settles(passed, False)
    assert max([failed, passed, inconclusive], key=Score.key) is passed
    assert max([failed, inconclusive], key=Score.key) is inconclusive


def test_scheme_variants_change_one_thing_each() -> None:
    base = QdqOptions("u8s8", "entropy")
    changes = [change for change, _ in scheme_variants(base)]
    assert changes == [
        "7-bit weights (reduce_range)",
        "per-tensor weights",
        "minmax calibration",
        "percentile calibration",
    ]
    for _, options in scheme_variants(base):
        differences = [
            f
            for f in ("reduce_range", "per_channel", "method")
            if getattr(options, f) != getattr(base, f)
        ]
        assert len(differences) == 1
    # Weights already 7-bit (no VNNI, or portable), or TensorRT's S8S8: no range variant.
    for options in (QdqOptions("u8s8", reduce_range=True), QdqOptions("s8s8")):
        assert not any(c.startswith("7-bit") for c, _ in scheme_variants(options))
    assert describe(QdqOptions("s8s8", "minmax", per_channel=False)) == (
        "s8s8, minmax, per-tensor 8-bit weights"
    )


@pytest.mark.parametrize(
    ("most", "counts"),
    [(1, [1]), (2, [1, 2]), (3, [1, 2, 3]), (8, [1, 2, 4, 8]), (33, [1, 2, 4, 8, 16, 32, 33])],
)
def test_float_layer_steps_double_up_to_the_cap(most: int, counts: list[int]) -> None:
    assert doubling(most) == counts


def test_tf_origin_of_tf2onnx_and_ort_names() -> None:
    fused = "StatefulPartitionedCall/functional_1/hidden_1/MatMul/MatMulAddFusion"
    assert tf_origin(fused) == TfOrigin("functional_1/hidden_1/MatMul", "functional_1/hidden_1")
    assert tf_origin("StatefulPartitionedCall/model/conv_1/BiasAdd__6") == TfOrigin(
        "model/conv_1/BiasAdd", "model/conv_1"
    )
    assert tf_origin("Transpose__22") == TfOrigin(None, None)
    # A convolution tf2onnx renamed: placed by its weight (dequantised, as the Q/DQ model has it).
    weight = "StatefulPartitionedCall/mnv2_1/Conv1_1/convolution/merged_input:0"
    activation = "StatefulPartitionedCall/mnv2_1/bn_1/batchnorm/mul_1__6:0"
    renamed = tf_origin(
        "Conv__339", (weight + "_DequantizeLinear_Output", "Conv__339:0", activation)
    )
    assert renamed == TfOrigin("mnv2_1/Conv1_1/convolution", "mnv2_1/Conv1_1")


def test_output_error_is_relative_and_summed_over_outputs() -> None:
    reference = {"a": np.array([[3.0, 4.0]]), "b": np.array([[1.0]])}
    assert output_error(reference, reference) == 0.0
    shifted = {"a": np.array([[3.0, 4.0]]), "b": np.array([[1.5]])}
    assert output_error(reference, shifted) == pytest.approx(0.25)
    scaled = {"a": np.array([[6.0, 8.0]]), "b": np.array([[1.0]])}
    assert output_error(reference, scaled) == pytest.approx(1.0)


def test_budget_replaces_the_precision_limits() -> None:
    default = rules("int8")
    assert (default.atol, default.min_top1_agreement, default.max_accuracy_drop) == (
        None,
        0.97,
        0.02,
    )
    strict = rules("int8", atol=1e-3, min_top1_agreement=0.99, max_accuracy_drop=0.005)
    assert (strict.atol, strict.min_top1_agreement, strict.max_accuracy_drop) == (1e-3, 0.99, 0.005)
    with pytest.raises(UsageError, match="--min-top1-agreement must be between 0 and 1"):
        rules("int8", min_top1_agreement=1.5)


def test_int8_that_buys_nothing_is_named_per_batch_size() -> None:
    rows = [
        SpeedRow(
            batch_size=size,
            fp32_latency_ms=1.0,
            full_int8_latency_ms=1.0 / speedup,
            speedup_vs_fp32=speedup,
            full_int8_speedup_vs_fp32=speedup,
            slowdown_vs_full_int8=1.0,
        )
        for size, speedup in ((1, 1.26), (8, 1.0), (32, 0.7))
    ]
    [note] = no_gain_notes(rows)
    assert "batch 8 (1.00x fp32), 32 (0.70x fp32) in" in note and "batch 1 " not in note
    assert no_gain_notes(rows[:1]) == []


def test_bench_names_int8_artifacts_that_buy_nothing_over_fp32() -> None:
    from pathlib import Path

    from trtconv.bench.models import ModelEntry
    from trtconv.core.model_io import ModelSignature
    from trtconv.model.paths import ARTIFACT

    signature = ModelSignature((), ())

    def entry(label: str, precision: str, source: str, backend: str = "ort") -> ModelEntry:
        return ModelEntry(
            label=label,
            path=Path(label),
            kind=ARTIFACT,
            backend=backend,
            precision=precision,
            signature=signature,
            source_model=Path(source),
        )

    models = [
        entry("m-fp32", "fp32", "m"),
        entry("m-int8", "int8", "m"),
        entry("other-int8", "int8", "other"),  # another source model: no pair
    ]
    speeds = {"m-fp32": (100.0, 400.0), "m-int8": (150.0, 410.0), "other-int8": (1.0, 1.0)}
    rows = [
        Row(label, size, value)
        for label, values in speeds.items()
        for size, value in zip((1, 8), values, strict=True)
    ]
    assert bench_no_gain_warnings(models, rows) == [
        "m-int8: int8 buys nothing over m-fp32 on this CPU at batch 8 (1.02x) its throughput: "
        "the fp32 artifact is as good there."
    ]
    # On a GPU the line names the device the rows ran on, not the CPU.
    on_cuda = [row._replace(device="cuda") for row in rows]
    assert bench_no_gain_warnings(models, on_cuda)[0].startswith(
        "m-int8: int8 buys nothing over m-fp32 on device cuda at batch 8 (1.02x)"
    )
