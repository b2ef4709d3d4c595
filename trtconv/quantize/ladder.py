"""The int8 precision ladder: when full int8 misses the accuracy budget, climb until it holds.

In order, within a time limit:

1. full int8 with the scheme the backend asked for (trtconv.quantize.build.qdq_model);
2. scheme variants, one change each: 7-bit weights, per-tensor (or per-channel) weights, the
   other calibration methods;
3. per-layer sensitivity (trtconv.quantize.sensitivity), then the worst nodes kept in float a
   few at a time: 1, 2, 4, ... (at most half the quantised nodes), then a bisection back down to
   the fewest that meet the budget.

Every step is scored on the *search slice* (trtconv.quantize.search): spare samples, never those
`convert` validates and reports on. The chosen model is validated once, on the held-out samples,
like any artifact. The reference is the float ONNX export (checked against TensorFlow before
quantisation), run on the same samples.

A node kept in float computes with float weights and gets no Q/DQ of its own (ONNX Runtime's
`nodes_to_exclude`); an input can still reach it through the Q/DQ pair a quantised producer puts
on its own output. The probe measures each node quantised alone, so both ends of a damaging
tensor rank high and are kept in float together.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from trtconv.calib.sources import ArraySet
from trtconv.core.errors import ConversionError
from trtconv.core.model_io import CalibrationFeed
from trtconv.core.progress import Progress
from trtconv.options.convert import CALIB_METHODS, DEFAULT_FALLBACK_TIME_LIMIT_S
from trtconv.outputs.compare import TOP1, rate_words
from trtconv.outputs.confidence import INCONCLUSIVE, PASSED
from trtconv.outputs.tolerance import Tolerance
from trtconv.quantize.isa import CPU_SCHEME
from trtconv.quantize.ladder_result import (
    LadderRecord,
    LadderSpeed,
    LadderStep,
    float_node,
)
from trtconv.quantize.qdq import QdqOptions, QdqQuantizer, QdqSummary
from trtconv.quantize.search import (
    Score,
    SearchScorer,
    budget_and_search_data,
    resolution_note,
    settles,
    unshowable,
)
from trtconv.quantize.sensitivity import QuantizedNode, quantized_nodes, rank_by_sensitivity
from trtconv.quantize.speed import CHOSEN, FP32, FULL_INT8, speed_reserve_s, time_models
from trtconv.quantize.time_limit import CALIBRATE, PROBE, REQUANTIZE, TimeLimit

log = logging.getLogger(__name__)

# Sensitivity probes rank nodes; this many samples rank them as well as the whole slice.
PROBE_SAMPLES = 128
# Past this share of the quantised nodes in float, int8 is not worth it: the ladder stops.
MAX_FLOAT_SHARE = 0.5
FULL, SCHEME, SENSITIVITY, FLOAT = "full int8", "scheme", "sensitivity", "float layers"
# How the log reads a step's verdict on the search slice.
STEP_VERDICTS = {PASSED: "meets the budget", INCONCLUSIVE: "not shown either way on the slice"}


@dataclass
class LadderSettings:
    """What the ladder scores against and how long it may climb.

    `tolerance` is the budget (the precision's tolerance with --tolerance and the release gates
    applied); `timed` asks for the fp32 / full int8 / chosen timing (ORT CPU models only).
    """

    search: ArraySet
    search_drawn_from: str
    tolerance: Tolerance
    time_limit_s: float = DEFAULT_FALLBACK_TIME_LIMIT_S
    batch_sizes: tuple[int, ...] = (1,)
    timed: bool = True
    progress: Progress | None = None
    # Each output's role (trtconv.outputs.roles), so the search judges outputs as validation
    # does; None: inferred from the float model's values.
    roles: dict[str, Any] | None = None
    # When the conversion began (time.perf_counter): the time limit counts from it.
    started: float | None = None


def quantize_int8(
    source: Path,
    output: Path,
    feed: CalibrationFeed,
    options: QdqOptions,
    work: Path,
    settings: LadderSettings | None,
    model_name: str | None = None,
) -> QdqSummary:
    """Write the Q/DQ model of `source` to `output`: full int8, or the ladder's choice.

    `settings` None (--no-fallback): full int8 only, as before the ladder. Returns the
    quantisation summary with a `ladder` record (None when off). `model_name` names the model in
    errors. Raises ConversionError when quantisation fails.
    """
    quantizer = QdqQuantizer(source, work / "qdq", feed, model_name)
    if settings is None:
        return quantizer.quantize(output, options)
    ladder = Ladder(quantizer, settings, work / "ladder")
    chosen = ladder.climb(options)
    shutil.copyfile(chosen.path, output)
    return replace(chosen.summary, ladder=ladder.record(chosen))


@dataclass
class ScoredModel:
    """One quantised model the ladder built and scored."""

    step: int
    options: QdqOptions
    path: Path
    summary: QdqSummary
    score: Score
    float_nodes: list[QuantizedNode] = field(default_factory=list)


def scheme_variants(base: QdqOptions) -> list[tuple[str, QdqOptions]]:
    """(what changed, options) for each one-change variant of `base`, in the ladder's order.

    7-bit weights only for the CPU scheme with full-range weights (7-bit is valid on every CPU;
    the reverse could saturate where the target has no VNNI); TensorRT has no such limit.
    """
    variants: list[tuple[str, QdqOptions]] = []
    if base.scheme == CPU_SCHEME and not base.reduce_range:
        variants.append(("7-bit weights (reduce_range)", replace(base, reduce_range=True)))
    granularity = "per-tensor" if base.per_channel else "per-channel"
    variants.append((f"{granularity} weights", replace(base, per_channel=not base.per_channel)))
    for method in CALIB_METHODS:
        if method != base.method:
            variants.append((f"{method} calibration", replace(base, method=method)))
    return variants


def describe(options: QdqOptions) -> str:
    """The scheme in a few words: 'u8s8, entropy, per-channel 8-bit weights'."""
    granularity = "per-channel" if options.per_channel else "per-tensor"
    bits = "7-bit" if options.reduce_range else "8-bit"
    return f"{options.scheme}, {options.method}, {granularity} {bits} weights"


class Ladder:
    """One climb: its steps, the nodes' sensitivity, and the time it may take."""

    def __init__(self, quantizer: QdqQuantizer, settings: LadderSettings, work: Path) -> None:
        self.quantizer = quantizer
        self.settings = settings
        self.work = work
        self.work.mkdir(parents=True, exist_ok=True)
        self.clock = TimeLimit(
            settings.time_limit_s,
            speed_reserve_s(settings.timed, settings.batch_sizes),
            settings.started,
        )
        self.started = time.perf_counter()  # the ladder's own seconds, recorded
        self.steps: list[LadderStep] = []
        self.planned = 1
        self.ranking: list[tuple[QuantizedNode, float]] = []
        self.outcome = ""
        self.full: ScoredModel | None = None
        self.scorer = SearchScorer(
            quantizer.source, settings.search, settings.tolerance, settings.roles
        )
        checked = (
            TOP1
            if settings.roles is None
            else rate_words(
                {name: role.role for name, role in settings.roles.items()}, settings.tolerance
            )
        )
        self.note = resolution_note(len(settings.search), settings.tolerance, checked)
        self.unshowable = unshowable(len(settings.search), settings.tolerance)
        if self.note:
            log.warning("int8 ladder: %s", self.note)

    def affords(self, kind: str) -> bool:
        """Whether a step of `kind` should end within the time limit (quantize.time_limit)."""
        return self.clock.affords(kind)

    def kind_of(self, options: QdqOptions) -> str:
        """A step with `options` calibrates anew (its method's first use) or re-quantises."""
        return REQUANTIZE if options.method in self.quantizer.caches else CALIBRATE

    def report(self, label: str) -> None:
        if self.settings.progress is not None:
            self.settings.progress(len(self.steps), max(self.planned, len(self.steps) + 1), label)

    def settled(self, candidate: ScoredModel) -> bool:
        """It meets the budget (or, on a slice that cannot show it, is not shown to miss it)."""
        return settles(candidate.score, self.unshowable)

    def reached(self, candidate: ScoredModel, plural: bool = False) -> str:
        """How a settled candidate stands: 'meet(s) the budget', or on a slice that cannot
        show the budget, 'is (are) not shown to miss it'."""
        if candidate.score.passed:
            return "meet the budget" if plural else "meets the budget"
        verb = "are" if plural else "is"
        return f"{verb} not shown to miss the budget (the slice cannot show it)"

    def climb(self, base: QdqOptions) -> ScoredModel:
        """The candidate to ship: the first that settles it, else the best one found."""
        self.full = best = self.attempt(base, FULL, describe(base))
        if not best.score.judged:
            return self.no_metric(best)
        if self.settled(best):
            self.outcome = f"full int8 {self.reached(best)}"
            return best
        variants = scheme_variants(base)
        self.planned += len(variants)
        for change, options in variants:
            if not self.affords(self.kind_of(options)):
                return self.give_up(best, "time limit reached during the scheme variants")
            candidate = self.attempt(options, SCHEME, change)
            if self.settled(candidate):
                self.outcome = f"{change} {self.reached(candidate)}"
                return candidate
            best = max(best, candidate, key=lambda c: c.score.key())
        return self.keep_worst_in_float(best)

    def attempt(
        self,
        options: QdqOptions,
        stage: str,
        change: str,
        float_nodes: tuple[QuantizedNode, ...] = (),
    ) -> ScoredModel:
        """Quantise with `options`, score on the search slice, record the step."""
        started, kind = time.perf_counter(), self.kind_of(options)
        self.report(f"{stage}: {change}")
        path = self.work / f"step-{len(self.steps)}.onnx"
        summary = self.quantizer.quantize(path, options)
        score = self.scorer.score(path)
        seconds = time.perf_counter() - started
        self.clock.record(kind, seconds)
        candidate = ScoredModel(
            step=len(self.steps),
            options=options,
            path=path,
            summary=summary,
            score=score,
            float_nodes=list(float_nodes),
        )
        self.steps.append(_step_record(candidate, stage, change, seconds))
        verdict = STEP_VERDICTS.get(score.verdict, "misses the budget")
        if not score.judged:
            verdict = "not judged"
        # The check that decides, by name (a regression output has no top-1 agreement).
        log.info(
            "int8 ladder step %d (%s: %s): %s, %s (%.1f s)",
            candidate.step,
            stage,
            change,
            score.deciding or "no check",
            verdict,
            seconds,
        )
        return candidate

    def give_up(self, best: ScoredModel, why: str) -> ScoredModel:
        """The best candidate so far, with why the ladder stopped short of the budget."""
        self.outcome = f"budget not met: {why}; kept the best candidate (step {best.step})"
        log.warning("int8 ladder: %s", self.outcome)
        return best

    def no_metric(self, full: ScoredModel) -> ScoredModel:
        """Full int8, with why the ladder did not climb: no output is judged at int8, so no
        step could be told better than another."""
        names = ", ".join(full.score.unjudged) or "every output"
        self.outcome = (
            f"not climbed: no output is judged at int8 ({names}: no role that decides and no "
            "tolerance), so no step can be scored; kept full int8 (step 0). Give the output a "
            "role (--output-role NAME=classes|binary|class_map|embedding|regression) or a "
            "tolerance (--tolerance NAME=X)"
        )
        log.warning("int8 ladder: %s", self.outcome)
        return full

    def keep_worst_in_float(self, base: ScoredModel) -> ScoredModel:
        """Probe each quantised node alone, then keep the worst 1, 2, 4, ... in float and bisect
        back to the fewest that meet the budget."""
        order = [node for node, _ in self.rank(base)]
        if not order:
            return self.give_up(base, "no quantised node could be probed")
        most = max(1, math.ceil(len(order) * MAX_FLOAT_SHARE))
        counts = doubling(most)
        self.planned += 2 * len(counts)
        failed, best = 0, base
        for count in counts:
            if not self.affords(REQUANTIZE):
                return self.give_up(best, "time limit reached while keeping layers in float")
            candidate = self.in_float(base, order, count, failed)
            if self.settled(candidate):
                break
            best = max(best, candidate, key=lambda c: c.score.key())
            failed = count
        else:
            share = f"{most} of {len(order)} quantised nodes"
            return self.give_up(best, f"still outside it with {share} in float")
        passing = candidate
        while len(passing.float_nodes) - failed > 1 and self.affords(REQUANTIZE):
            middle = (failed + len(passing.float_nodes)) // 2
            candidate = self.in_float(base, order, middle, failed)
            if self.settled(candidate):
                passing = candidate
            else:
                failed = middle
        reached = self.reached(passing, plural=True)
        self.outcome = f"{len(passing.float_nodes)} node(s) kept in float {reached}"
        return passing

    def in_float(
        self, base: ScoredModel, order: list[QuantizedNode], count: int, before: int
    ) -> ScoredModel:
        """`base` with the `count` most sensitive nodes of `order` kept in float."""
        nodes = tuple(order[:count])
        added = ", ".join(_layer(node) for node in order[before:count][:3])
        more = count - before - 3
        change = f"{count} in float (+{added}{f' and {more} more' if more > 0 else ''})"
        keep = base.options.keep_float + tuple(node.name for node in nodes)
        return self.attempt(replace(base.options, keep_float=keep), FLOAT, change, nodes)

    def rank(self, base: ScoredModel) -> list[tuple[QuantizedNode, float]]:
        """Every quantised node of `base`'s model with its error when quantised alone."""
        nodes = quantized_nodes(base.path, base.summary.kept_float)
        self.planned += 1
        started = time.perf_counter()
        probe = self.work / "probe.onnx"

        def error_of(node: QuantizedNode) -> float | None:
            try:
                self.quantizer.quantize(probe, replace(base.options, quantize_only=(node.name,)))
            except ConversionError as exc:  # e.g. ORT quantises nothing for this node alone
                log.debug("int8 ladder: no probe for %s: %s", node.name, exc)
                return None
            return self.scorer.error(probe, PROBE_SAMPLES)

        self.ranking = rank_by_sensitivity(nodes, error_of, self.clock.steps_of(PROBE), self.report)
        probe.unlink(missing_ok=True)
        seconds = time.perf_counter() - started
        change = (
            f"{len(self.ranking)} of {len(nodes)} quantised nodes, each quantised alone "
            f"(scheme of step {base.step})"
        )
        kept = len(base.options.keep_float)
        self.steps.append(
            LadderStep(len(self.steps), SENSITIVITY, change, kept, seconds=round(seconds, 3))
        )
        log.info("int8 ladder: probed %d nodes in %.1f s", len(self.ranking), seconds)
        return self.ranking

    def record(self, chosen: ScoredModel) -> LadderRecord:
        """The ladder for the manifest: budget, search data, steps, choice, float nodes, speed."""
        errors = {node.name: error for node, error in self.ranking}
        settings = self.settings
        speed = self.speed(chosen)  # within the limit too: its time was kept in reserve
        budget, search_data = budget_and_search_data(
            settings.tolerance,
            settings.search,
            settings.search_drawn_from,
            self.note,
            "the float ONNX export (checked against TensorFlow)",
        )
        return LadderRecord(
            budget=budget,
            search_data=search_data,
            time_limit_s=self.settings.time_limit_s,
            seconds=round(time.perf_counter() - self.started, 3),
            outcome=self.outcome,
            met_budget=chosen.score.passed,
            chosen_step=chosen.step,
            scheme=describe(chosen.options),
            steps=self.steps,
            kept_float=[
                float_node(node.name, node.op_type, node.origin, _round(errors.get(node.name)))
                for node in chosen.float_nodes
            ],
            sensitivity=[
                float_node(node.name, node.op_type, node.origin, _round(error))
                for node, error in self.ranking
            ],
            speed=speed,
        )

    def speed(self, chosen: ScoredModel) -> LadderSpeed | None:
        """fp32, full int8 and chosen timed at the batch sizes (None when not asked for)."""

        if not self.settings.timed or self.full is None:
            return None
        self.report("timing fp32, full int8 and the chosen model")
        models = {FP32: self.quantizer.source, FULL_INT8: self.full.path}
        if chosen is not self.full:
            models[CHOSEN] = chosen.path
        return time_models(models, self.settings.search, self.settings.batch_sizes)


def doubling(most: int) -> list[int]:
    """1, 2, 4, ... below `most`, then `most`: how many nodes each float-layer step keeps."""
    counts = [1 << power for power in range(most.bit_length()) if 1 << power < most]
    return [*counts, most]


def _step_record(candidate: ScoredModel, stage: str, change: str, seconds: float) -> LadderStep:
    score = candidate.score
    return LadderStep(
        step=candidate.step,
        stage=stage,
        change=change,
        kept_float=len(candidate.float_nodes),
        top1_agreement=score.top1_agreement,
        accuracy=score.accuracy,
        accuracy_drop=score.accuracy_drop,
        output_error=_round(score.output_error),
        meets_budget=score.passed,
        verdict=score.verdict,
        seconds=round(seconds, 3),
    )


def _layer(node: QuantizedNode) -> str:
    """The TensorFlow layer a node came from, else its ONNX name."""
    return node.origin.tf_layer or node.name


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.4g}")
