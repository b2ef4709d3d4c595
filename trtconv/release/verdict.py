"""The verdict: each target's gates from its recorded figures, and the recommendation.

Pure functions over the step results (no I/O), so changing only [gates] re-judges a release
from its records.
"""

from __future__ import annotations

from dataclasses import replace

from trtconv.core.judging_options import AGREEING, DECISIONS
from trtconv.measure.bench_result import BenchResult, BenchRow
from trtconv.measure.server_bench_result import ServerRow
from trtconv.outputs.confidence import INCONCLUSIVE
from trtconv.outputs.validation_result import ValidationReport
from trtconv.release.document import Recommendation, TargetEntry
from trtconv.release.gates import (
    GatedTarget,
    GateResult,
    Measures,
    evaluate_gates,
    qps_at_budget_gate,
    recommend,
)
from trtconv.release.settings import ReleaseConfig


def bench_rows_by_label(bench: BenchResult, labels: list[str]) -> dict[str, list[BenchRow]]:
    """Bench rows per release label; the bench keeps the order models were given in."""
    by_bench_label = {m.label: labels[i] for i, m in enumerate(bench.models) if i < len(labels)}
    rows: dict[str, list[BenchRow]] = {label: [] for label in labels}
    for row in bench.results:
        label = by_bench_label.get(row.label)
        if label is not None:
            rows[label].append(row)
    return rows


def row_at(rows: list[BenchRow], batch_size: int) -> BenchRow | None:
    """The row at `batch_size` (None: not benched at it)."""
    return next((row for row in rows if row.batch_size == batch_size), None)


def measures_for(
    validation: ValidationReport | None, evaluation: ValidationReport | None, row: BenchRow | None
) -> Measures:
    """Gate inputs: accuracy from [eval] (else the convert validation), speed from bench."""
    accuracy = evaluation or validation
    passed = validation is not None and validation.passed
    passed = passed and (evaluation is None or evaluation.passed)
    verdicts = [v.verdict for v in (validation, evaluation) if v is not None and not v.passed]
    judged = Measures(
        validation_passed=passed,
        validation_verdict=next(iter(verdicts), None),
        decides=decides(validation),
        agrees=decides(validation, AGREEING),
    )
    return speed_measures(accuracy_measures(judged, accuracy), row)


def accuracy_measures(measures: Measures, accuracy: ValidationReport | None) -> Measures:
    """`measures` with the accuracy figures, the recorded intervals the gates decide by (none
    when the validation decided on point figures: confidence 0, or written before intervals)
    and their samples."""
    if accuracy is None:
        return measures
    intervals = bool(accuracy.confidence)
    return replace(
        measures,
        accuracy_drop=accuracy.accuracy_drop,
        top1_agreement=accuracy.top1_agreement,
        top1_agreement_ci95=accuracy.top1_agreement_ci95 if intervals else None,
        accuracy_drop_ci95=accuracy.accuracy_drop_ci95 if intervals else None,
        accuracy_samples=accuracy.samples,
    )


def speed_measures(measures: Measures, row: BenchRow | None) -> Measures:
    """`measures` with the bench row's figures and intervals the speed gates judge (intervals
    are None in rows recorded before them)."""
    if row is None:
        return measures
    return replace(
        measures,
        speedup_vs_baseline=row.speedup_vs_baseline,
        latency_ms_p99=row.latency_ms_p99,
        throughput_per_s=row.throughput_per_s,
        speedup_vs_baseline_ci95=row.speedup_vs_baseline_ci95 or None,
        latency_ms_p99_ci95=row.latency_ms_p99_ci95 or None,
        rounds=row.rounds,
    )


def decides(validation: ValidationReport | None, roles: tuple[str, ...] = DECISIONS) -> bool | None:
    """Whether some output of a validation report has one of `roles` (by default those that
    decide: classes, binary, class_map); None when it records no outputs."""
    if validation is None or not validation.outputs:
        return None
    return any(output.role in roles for output in validation.outputs.values())


def _judge(config: ReleaseConfig, target: TargetEntry) -> GatedTarget | None:
    """Fill one target's gates; its candidacy, or None if it did not convert."""
    if not target.converted:
        target.gates = []
        return None
    row = row_at(target.bench, config.gates.gate_batch_size)
    measures = measures_for(target.conversion.result.validation, target.eval, row)
    target.gates = evaluate_gates(config.gates, measures)
    target.gates += serving_gates(config, target.serving)
    throughput = row.throughput_per_s if row else None
    return GatedTarget(target.id, target.precision or "", throughput, target.passed)


SPEED_GATES = ("min_speedup", "max_latency_ms_p99")
SERVING_GATES = ("min_qps_at_budget",)


def serving_gates(config: ReleaseConfig, row: ServerRow | None) -> list[GateResult]:
    """`min_qps_at_budget` on the target's serving row, when configured (not measured: no
    row, the target was not served)."""
    minimum, budget = config.gates.min_qps_at_budget, config.serving.latency_budget_ms
    if minimum is None or budget is None:
        return []
    if row is None:
        return [qps_at_budget_gate(minimum, None, None, budget)]
    return [qps_at_budget_gate(minimum, row.qps_at_budget, row.qps_at_budget_bounds, budget)]


def inconclusive_reason(config: ReleaseConfig, targets: list[TargetEntry]) -> str | None:
    """One sentence when no target passed but some are inconclusive, not failed: their
    undecided gates, each with what would decide it (the bench's added rounds for a speed
    gate; longer serving runs for a serving gate; more evaluation samples for an accuracy gate,
    which no bench round can decide); else None."""
    undecided = [
        (target.id, gate)
        for target in targets
        if target.inconclusive
        for gate in target.gates
        if gate.verdict == INCONCLUSIVE
    ]
    if not undecided:
        return None
    speed = [_interval(name, gate) for name, gate in undecided if gate.name in SPEED_GATES]
    serving = [_interval(name, gate) for name, gate in undecided if gate.name in SERVING_GATES]
    accuracy = [
        _interval(name, gate)
        for name, gate in undecided
        if gate.name not in SPEED_GATES + SERVING_GATES
    ]
    parts = []
    if speed:
        limit = config.gates.speed_time_limit_s
        parts.append(
            f"the 95% interval of {'; '.join(speed)} at batch {config.gates.gate_batch_size} "
            f"straddles its threshold after the bench added rounds for up to {limit:g} s "
            "(gates.speed_time_limit_s)"
        )
    if serving:
        parts.append(
            f"{'; '.join(serving)} is not shown either way by the serving runs: longer runs "
            "(serving.duration_s) bound the p99 closer"
        )
    if accuracy:
        source = config.eval.data or "the conversion's validation data"
        parts.append(
            f"{'; '.join(accuracy)} is not shown either way on the samples of {source}: more "
            "evaluation samples would decide it ([eval] data and samples; the gate's detail "
            "says about how many)"
        )
    return f"inconclusive: no target passed every gate and {'; and '.join(parts)}"


def _interval(target: str, gate: GateResult) -> str:
    """'TARGET GATE LOW-HIGH (>= THRESHOLD)', or without the interval when there is none."""
    shown = (
        f" {gate.measured_ci95[0]:.4g}-{gate.measured_ci95[1]:.4g}" if gate.measured_ci95 else ""
    )
    return f"{target} {gate.name}{shown} ({gate.comparison} {gate.threshold:g})"


def judge_targets(
    config: ReleaseConfig, targets: list[TargetEntry]
) -> tuple[Recommendation | None, str]:
    """Fill each target's gates; return the recommendation (or None) and why."""
    batch = config.gates.gate_batch_size
    candidates = [c for c in (_judge(config, target) for target in targets) if c is not None]
    passing = sum(c.passed_all_gates for c in candidates)
    chosen = recommend(candidates)
    if chosen is None:
        converted = f"{len(candidates)} of {len(targets)} converted"
        undecided = inconclusive_reason(config, targets)
        return None, undecided or f"no target passed every gate ({converted}, {passing} passed)"
    winner = next(t for t in targets if t.id == chosen.target)
    row = row_at(winner.bench, batch)
    assert row is not None  # a target passes its speed gates only when benched at the batch
    reason = (
        f"fastest of {passing} target(s) passing every gate: "
        f"{row.throughput_per_s:.1f}/s at batch {batch}"
    )
    recommendation = Recommendation(
        target=winner.id,
        artifact=str(winner.artifact),
        backend=winner.backend,
        precision=str(winner.precision),
        batch_size=batch,
        throughput_per_s=row.throughput_per_s,
        speedup_vs_baseline=row.speedup_vs_baseline,
        latency_ms_p99=row.latency_ms_p99,
        reason=reason,
    )
    return recommendation, reason
