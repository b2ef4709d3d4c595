"""The int8 precision ladder for OpenVINO: NNCF's int8, then NNCF's own accuracy control.

1. full int8 with NNCF's defaults (7-bit weights where the int8 target needs them), scored on
   the search slice (trtconv.quantize.search: samples never validated on) against the native
   TensorFlow model's outputs there, with the budget validation uses;
2. when it misses the budget, `nncf.quantize_with_accuracy_control` on the same slice: its
   metric is the top-1 agreement with the native model (the float model scores ~1.0), its
   maximum absolute drop 1 - the minimum agreement. NNCF ranks groups of quantised operations
   by how much reverting each to float restores and reverts the worst, one group an iteration,
   until the drop is within it; at most as many groups as half the int8 weighted operations
   (past that int8 is not worth it, as in trtconv.quantize.ladder), and the metric stops the
   search once the time limit is spent (the full int8 model is kept then).

The chosen model is scored on the slice as validation judges it (agreement, accuracy with
labels) and then validated once on the held-out data like any artifact. The ONNX Runtime
ladder's scheme variants are not tried here: NNCF's defaults are what OpenVINO users get.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from trtconv.backends.openvino.quantize import (
    AccuracyControl,
    NncfOptions,
    NncfSummary,
    StopAccuracyControl,
    quantize_model,
    quantize_with_accuracy_control,
    weighted_ops,
)
from trtconv.backends.openvino.rules import int8_float_parts
from trtconv.backends.openvino.runner import DEVICE, compile_config
from trtconv.core.judging_options import EMBEDDING
from trtconv.core.lazy import require
from trtconv.core.model_io import CalibrationFeed, Feeds, collapse_scalars
from trtconv.facts import probe_cpu
from trtconv.onnxlib.tf_names import tf_origin
from trtconv.outputs.compare import compare, rate_words
from trtconv.outputs.confidence import rate_to_show
from trtconv.outputs.cosine import sample_agrees
from trtconv.outputs.decisions import decisions
from trtconv.outputs.maps import sample_scores
from trtconv.outputs.roles import resolve_roles
from trtconv.outputs.tokens import InputEvidence, valid_positions
from trtconv.protocol.request import ConversionRequest, SearchSlice
from trtconv.quantize.isa import cpu_weight_range
from trtconv.quantize.ladder import MAX_FLOAT_SHARE
from trtconv.quantize.ladder_result import (
    AccuracyControlSettings,
    FloatNode,
    LadderStep,
    NncfLadderRecord,
    float_node,
)
from trtconv.quantize.search import (
    Score,
    budget_and_search_data,
    output_error,
    resolution_note,
    settles,
    step_words,
    unshowable,
)
from trtconv.quantize.time_limit import CALIBRATE, PROBE, TimeLimit

log = logging.getLogger(__name__)

FULL, CONTROL = "full int8", "accuracy control"
# NNCF ranks each group of quantised operations on this many of the worst-scored samples.
RANKING_SAMPLES = 128
SCORE_BATCH = 32
# NNCF judges reverted operations in f32 (its evaluator compiles with f32 inference precision);
# the full int8 model's float parts may run in bf16 (rules.int8_float_parts). A model with
# operations kept in float pins f32 (the conversion's `inference_precision`, read by the runner).
PINNED = "f32"
METRIC = "top-1 agreement with the native model"  # what accuracy control scores


def quantize_int8(model: Any, request: ConversionRequest) -> tuple[Any, NncfSummary]:
    """(the int8 `ov.Model`, its quantisation summary with the `ladder` record) for `model`.

    Without `request.search` (--no-fallback) NNCF's int8 as it comes, `ladder` None. The
    summary's `inference_precision` is the OpenVINO precision the artifact's float parts run
    in: the int8 target's (rules.int8_float_parts: bf16 on a CPU that computes it natively, as
    OpenVINO's own default there), f32 (PINNED) once ops are kept in float. The weight range
    follows the request's int8 target (7-bit weights for CPUs without VNNI), recorded with the
    summary. Raises ConversionError when NNCF fails.
    """
    assert request.calibration is not None  # the converter checks it
    choice = cpu_weight_range(request.int8_target)
    options = NncfOptions(reduce_range=choice.reduce_range)
    parts = int8_float_parts(request.int8_target, probe_cpu().features)
    if request.search is None:
        quantized, summary = quantize_model(model, request.calibration, options)
        return quantized, replace(summary, inference_precision=parts).with_weights(choice)
    ladder = NncfLadder(request.search, request.calibration, options, parts)
    quantized, summary = ladder.climb(model)
    return quantized, summary.with_weights(choice)


class SliceScorer:
    """Runs OpenVINO models on the search slice and compares them with the native outputs."""

    def __init__(self, search: SearchSlice) -> None:

        self.search = search
        feeds = search.data.inputs
        self.roles = search.roles or resolve_roles(search.reference, evidence=InputEvidence(feeds))
        # What each deciding output decides per sample, natively, and (a sequence's) where.
        self.reference_decisions = {
            name: found
            for name, role in self.roles.items()
            if name in search.reference
            and (found := decisions(name, role, search.reference[name])) is not None
        }
        self.valid = {
            name: valid_positions(name, role, search.reference[name], feeds)
            for name, role in self.roles.items()
            if name in search.reference
        }

    def outputs(self, compiled: Any, indices: np.ndarray) -> dict[str, np.ndarray]:
        """The compiled model's outputs on the slice's samples `indices`, in batches."""
        parts: dict[str, list[np.ndarray]] = {name: [] for name in self.search.reference}
        fixed = fixed_batch(compiled)
        step = fixed or SCORE_BATCH
        for start in range(0, len(indices), step):
            chosen = indices[start : start + step]
            rows = np.resize(chosen, step) if fixed else chosen  # a short last batch: padded
            data = self.search.data  # a rank-0 input (a flag) gets its one value
            feeds = collapse_scalars({k: v[rows] for k, v in data.inputs.items()}, data.scalars)
            results = compiled(feeds)
            for name, found in parts.items():
                found.append(np.asarray(results[name])[: len(chosen)])
        return {name: np.concatenate(found) for name, found in parts.items()}

    def agreement(self, compiled: Any, items: Iterable[int]) -> tuple[float, list[float]]:
        """(top-1 agreement with the native model, per sample) on the samples `items`: a sample
        scores the lowest share of its decisions (1 for one per sample) made as natively over
        the deciding outputs."""

        indices = np.fromiter(items, dtype=np.int64)
        outputs = self.outputs(compiled, indices)
        agree = np.ones(len(indices))
        for name, want in self.reference_decisions.items():
            found = np.asarray(decisions(name, self.roles[name], outputs[name]))
            # Per sample as validation judges it: a decision map's F1 of the positives, a class
            # map's share of agreeing elements (of its valid tokens), one decision's 0 or 1.
            valid = self.valid[name]
            mine = None if valid is None else valid[indices]
            scores = sample_scores(self.roles[name], want[indices], found, mine)
            agree = np.minimum(agree, scores)
        for name, role in self.roles.items():
            if role.role == EMBEDDING and name in outputs:
                # 1 where the sample's cosine reaches the bound, as validation counts it.
                bound = role.threshold or self.search.tolerance.min_cosine
                valid = self.valid[name]
                mine = None if valid is None else valid[indices]
                want = self.search.reference[name][indices]
                agree = np.minimum(agree, sample_agrees(want, outputs[name], bound, mine))
        return float(agree.mean()), [float(value) for value in agree]

    def score(self, model: Any, inference_precision: str | None = None) -> Score:
        """`model` on the whole slice, compiled as the int8 runner compiles it (with OpenVINO's
        `inference_precision` when pinned), judged as validation judges it."""

        ov = require("openvino")
        config = compile_config("int8", inference_precision=inference_precision)
        compiled = ov.Core().compile_model(model, DEVICE, config)
        data, reference = self.search.data, self.search.reference
        candidate = self.outputs(compiled, np.arange(len(data)))
        tolerance = self.search.tolerance
        report = compare(
            reference, candidate, tolerance, data.labels, data.source, self.roles, feeds=data.inputs
        )
        return Score(
            top1_agreement=report.top1_agreement,
            accuracy=report.accuracy_candidate,
            accuracy_drop=report.accuracy_drop,
            output_error=output_error(reference, candidate),
            passed=report.passed,
            verdict=report.verdict,
            deciding=step_words(report),
        )


def fixed_batch(compiled: Any) -> int | None:
    """The batch size the compiled model's inputs fix (`[1, 32, 32, 3]`: 1), None for any."""
    for port in compiled.inputs:
        shape = port.get_partial_shape()
        if shape.rank.is_static and len(shape) and shape[0].is_static:
            return int(shape[0].get_length())
    return None


class NncfLadder:
    """One climb: full int8, then NNCF's accuracy control when it misses the budget."""

    def __init__(
        self, search: SearchSlice, feed: CalibrationFeed, options: NncfOptions, parts: str
    ) -> None:
        self.search = search
        self.feed = feed
        self.options = options
        self.parts = parts  # the full int8 model's float parts (rules.int8_float_parts)
        self.scorer = SliceScorer(search)
        self.clock = TimeLimit(search.time_limit_s, started=search.started)
        self.started = time.perf_counter()  # the ladder's own seconds, recorded
        self.steps: list[LadderStep] = []
        self.outcome = ""
        self.kept_float: list[FloatNode] = []
        self.control: AccuracyControlSettings | None = None
        roles = {name: role.role for name, role in self.scorer.roles.items()}
        checked = rate_words(roles, search.tolerance)
        self.note = resolution_note(len(search.data), search.tolerance, checked)
        self.unshowable = unshowable(len(search.data), search.tolerance)
        if self.note:
            log.warning("int8 ladder: %s", self.note)

    def climb(self, model: Any) -> tuple[Any, NncfSummary]:
        """(the model to ship, its quantisation summary with the ladder record)."""
        step_started = time.perf_counter()
        full, summary = quantize_model(model, self.feed, self.options)
        change = f"full int8 (NNCF defaults, float parts in {self.parts})"
        score = self.add_step(FULL, change, self.scorer.score(full, self.parts), step_started)
        if settles(score, self.unshowable):
            self.outcome = f"full int8 {_reached(score)}"
            return full, self.summary(summary, score, 0)
        why = self.cannot_control()
        if why:
            return full, self.give_up(summary, score, why)
        step_started = time.perf_counter()
        try:
            restored, restored_summary = quantize_with_accuracy_control(
                model, self.feed, self.options, self.accuracy_control(full)
            )
        except StopAccuracyControl:
            self.add_step(
                CONTROL, "NNCF accuracy control: stopped at the time limit", None, step_started
            )
            return full, self.give_up(summary, score, "time limit reached during accuracy control")
        self.kept_float = reverted_ops(full, restored)
        change = f"NNCF accuracy control: {len(self.kept_float)} ops kept in float"
        restored_score = self.add_step(
            CONTROL, change, self.scorer.score(restored, PINNED), step_started
        )
        if restored_score.key() < score.key():
            self.kept_float = []
            return full, self.give_up(summary, score, "accuracy control did not improve on it")
        if settles(restored_score, self.unshowable):
            reached = _reached(restored_score, plural=True)
            self.outcome = f"{len(self.kept_float)} op(s) kept in float {reached}"
        else:
            self.outcome = "budget not met: NNCF's accuracy control stopped short of it"
            log.warning("int8 ladder: %s", self.outcome)
        return restored, self.summary(restored_summary, restored_score, 1)

    def cannot_control(self) -> str:
        """Why accuracy control cannot run ('' when it can)."""
        embeddings = [role for role in self.scorer.roles.values() if role.role == EMBEDDING]
        if not self.scorer.reference_decisions and not embeddings:
            return (
                "no output decides anything or is an embedding, and accuracy control scores "
                "agreement"
            )
        if not self.clock.affords(CALIBRATE):  # it quantises once more at the least
            return "time limit reached before accuracy control"
        return ""

    def accuracy_control(self, full: Any) -> AccuracyControl:
        """NNCF's settings: the slice, agreement as the metric, the drop the budget allows, at
        most half the int8 weighted ops' count of groups, and the time limit."""
        data = self.search.data
        int8_ops = sum(weighted_ops(full).values())
        iterations = max(1, math.ceil(int8_ops * MAX_FLOAT_SHARE))
        # NNCF compares the point agreement with max_drop: aim for the agreement whose interval
        # on this slice clears the budget (the rule the chosen model is judged by).
        tolerance = self.search.tolerance
        aim = rate_to_show(tolerance.min_top1_agreement, len(data), tolerance.confidence)
        max_drop = 1.0 - (
            aim if aim is not None and tolerance.confidence > 0 else tolerance.min_top1_agreement
        )
        ranking = min(RANKING_SAMPLES, len(data))
        self.control = AccuracyControlSettings(
            round(max_drop, 6), "absolute", iterations, ranking, METRIC
        )

        out_of_time = self.clock.steps_of(PROBE)  # each evaluation fits, or none starts

        def metric(compiled: Any, items: Iterable[Any]) -> tuple[float, list[float]]:
            if out_of_time():
                raise StopAccuracyControl
            return self.scorer.agreement(compiled, items)

        def sample(index: int) -> Feeds:
            feeds = {name: array[index : index + 1] for name, array in data.inputs.items()}
            return collapse_scalars(feeds, data.scalars)  # a rank-0 input: its one value

        items = list(range(len(data)))
        return AccuracyControl(
            items=items,
            transform=sample,
            metric=metric,
            max_drop=max_drop,
            max_iterations=iterations,
            ranking_items=ranking,
        )

    def add_step(self, stage: str, change: str, score: Score | None, started: float) -> Score:
        """Record a step (score None: it did not finish); returns its score."""
        seconds = time.perf_counter() - started
        self.clock.record(CALIBRATE, seconds)
        kept = len(self.kept_float) if stage == CONTROL else 0
        self.steps.append(step_record(len(self.steps), stage, change, score, seconds, kept))
        # The check that decides, by name (a regression output has no top-1 agreement).
        deciding = "did not finish" if score is None else score.deciding or "no check"
        log.info(
            "int8 ladder step %d (%s): %s (%.1f s)", len(self.steps) - 1, change, deciding, seconds
        )
        return score if score is not None else Score(None, None, None, math.inf, False)

    def give_up(self, summary: NncfSummary, score: Score, why: str) -> NncfSummary:
        """The full int8 model's summary, with why the ladder stopped short of the budget."""
        self.outcome = f"budget not met: {why}; kept full int8 (step 0)"
        log.warning("int8 ladder: %s", self.outcome)
        return self.summary(summary, score, 0)

    def summary(self, summary: NncfSummary, score: Score, chosen: int) -> NncfSummary:
        """`summary` with the ladder record and the precision its float parts are pinned at
        (PINNED once accuracy control kept ops in float: NNCF judged them in it)."""
        pinned = PINNED if chosen else self.parts
        return replace(summary, inference_precision=pinned, ladder=self.record(score, chosen))

    def record(self, chosen_score: Score, chosen_step: int) -> NncfLadderRecord:
        """The ladder for the manifest, in the ONNX Runtime ladder's shape (trtconv.quantize.
        ladder.Ladder.record): NNCF's ranking is not exposed (`sensitivity` None), and the
        artifact is timed by the bench (`speed` None)."""
        search = self.search
        reference = "the native TensorFlow model"
        budget, search_data = budget_and_search_data(
            search.tolerance, search.data, search.drawn_from, self.note, reference
        )
        return NncfLadderRecord(
            budget=budget,
            search_data=search_data,
            time_limit_s=self.search.time_limit_s,
            seconds=round(time.perf_counter() - self.started, 3),
            outcome=self.outcome,
            met_budget=chosen_score.passed,
            chosen_step=chosen_step,
            scheme=f"u8s8, NNCF defaults, overflow_fix {self.options.overflow_fix}",
            steps=self.steps,
            accuracy_control=self.control,
            kept_float=self.kept_float if chosen_step else [],
        )


def _reached(score: Score, plural: bool = False) -> str:
    """'meet(s) the budget', or on a slice that cannot show it, 'is (are) not shown to miss
    it' (as trtconv.quantize.ladder.Ladder.reached)."""
    if score.passed:
        return "meet the budget" if plural else "meets the budget"
    verb = "are" if plural else "is"
    return f"{verb} not shown to miss the budget (the slice cannot show it)"


def reverted_ops(full: Any, restored: Any) -> list[FloatNode]:
    """The weighted ops with int8 weights in `full` and float weights in `restored`, each as
    {node, op_type, tf_op, tf_layer, output_error} (the TensorFlow op and layer its name comes
    from; output_error None: NNCF ranks groups of quantisers and does not expose the scores)."""

    before, after = weighted_ops(full), weighted_ops(restored)
    types = {op.get_friendly_name(): op.get_type_name() for op in restored.get_ordered_ops()}
    return [
        float_node(name, types[name], tf_origin(name), None)
        for name, int8 in before.items()
        if int8 and after.get(name) is False
    ]


def step_record(
    step: int, stage: str, change: str, score: Score | None, seconds: float, kept: int = 0
) -> LadderStep:
    """One step as the ONNX Runtime ladder records it (figures None: the step did not finish)."""
    if score is None:
        return LadderStep(step, stage, change, kept, seconds=round(seconds, 3))
    return LadderStep(
        step,
        stage,
        change,
        kept,
        top1_agreement=score.top1_agreement,
        accuracy=score.accuracy,
        accuracy_drop=score.accuracy_drop,
        output_error=float(f"{score.output_error:.4g}"),
        meets_budget=score.passed,
        verdict=score.verdict,
        seconds=round(seconds, 3),
    )
