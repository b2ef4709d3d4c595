"""The verdict: each target's gates from its recorded figures, and the recommendation.

Pure functions over the step results (no I/O), so changing only [gates] re-judges a release
from its records.
"""

from __future__ import annotations

from typing import Any

from trtconv.outputs.confidence import INCONCLUSIVE
from trtconv.outputs.roles import DECISIONS
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


def bench_rows_by_label(bench: dict[str, Any], labels: list[str]) -> dict[str, list[dict]]:
    """Bench rows per release label; the bench keeps the order models were given in."""
    models = bench.get("models") or []
    by_bench_label = {m["label"]: labels[i] for i, m in enumerate(models) if i < len(labels)}
    rows: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for row in bench.get("results", []):
        label = by_bench_label.get(row["label"])
        if label is not None:
            rows[label].append(row)
    return rows


def _row_at(rows: list[dict[str, Any]], batch_size: int) -> dict[str, Any]:
    return next((row for row in rows if row["batch_size"] == batch_size), {})


def measures_for(
    conversion: dict[str, Any], evaluation: dict[str, Any] | None, row: dict[str, Any]
) -> Measures:
    """Gate inputs: accuracy from [eval] (else the convert validation), speed from bench."""
    validation = conversion.get("validation") or {}
    accuracy = evaluation or validation
    passed = bool(validation.get("passed")) and (evaluation is None or bool(evaluation["passed"]))
    verdicts = [v.get("verdict") for v in (validation, evaluation or {}) if not v.get("passed")]
    return Measures(
        validation_passed=passed,
        validation_verdict=next((v for v in verdicts if v), None),
        accuracy_drop=accuracy.get("accuracy_drop"),
        top1_agreement=accuracy.get("top1_agreement"),
        **_intervals(accuracy),
        speedup_vs_baseline=row.get("speedup_vs_baseline"),
        latency_ms_p99=row.get("latency_ms_p99"),
        throughput_per_s=row.get("throughput_per_s"),
        **speed_intervals(row),
        decides=decides(validation),
    )


def _intervals(accuracy: dict[str, Any]) -> dict[str, Any]:
    """The recorded accuracy intervals the gates decide by (none when the validation decided
    on point figures: confidence 0, or written before intervals) and their samples."""
    if not accuracy.get("confidence"):
        return {"accuracy_samples": accuracy.get("samples")}
    found = {f: accuracy.get(f) for f in ("top1_agreement_ci95", "accuracy_drop_ci95")}
    intervals = {key: None if value is None else tuple(value) for key, value in found.items()}
    return {**intervals, "accuracy_samples": accuracy.get("samples")}


def speed_intervals(row: dict[str, Any]) -> dict[str, Any]:
    """The bench row's intervals the speed gates judge (absent in rows recorded before them)."""
    speedup, latency = row.get("speedup_vs_baseline_ci95"), row.get("latency_ms_p99_ci95")
    return {
        "speedup_vs_baseline_ci95": tuple(speedup) if speedup else None,
        "latency_ms_p99_ci95": tuple(latency) if latency else None,
        "rounds": row.get("rounds"),
    }


def decides(validation: dict[str, Any]) -> bool | None:
    """Whether some output of a validation block decides (classes, binary, class_map roles);
    None when the block records no outputs."""
    outputs = validation.get("outputs") or {}
    if not outputs:
        return None
    return any(output.get("role") in DECISIONS for output in outputs.values())


def _judge(config: ReleaseConfig, target: TargetEntry) -> GatedTarget | None:
    """Fill one target's gates; its candidacy, or None if it did not convert."""
    if not target.converted:
        target.gates = []
        return None
    row = _row_at(target.bench, config.gates.gate_batch_size)
    target.gates = evaluate_gates(config.gates, measures_for(target.conversion, target.eval, row))
    target.gates += serving_gates(config, target.serving)
    precision = target.precision or ""
    return GatedTarget(target.id, precision, row.get("throughput_per_s"), target.passed)


def serving_gates(config: ReleaseConfig, row: dict[str, Any] | None) -> list[GateResult]:
    """`min_qps_at_budget` on the target's serving row, when configured (not measured: no
    row, the target was not served)."""
    minimum, budget = config.gates.min_qps_at_budget, config.serving.latency_budget_ms
    if minimum is None or budget is None:
        return []
    found = row or {}
    bounds = found.get("qps_at_budget_bounds")
    return [qps_at_budget_gate(minimum, found.get("qps_at_budget"), bounds, budget)]


def inconclusive_reason(config: ReleaseConfig, targets: list[TargetEntry]) -> str | None:
    """One sentence when no target passed but some failed only by speed gates whose intervals
    straddle their thresholds (the release is then inconclusive, not failed); else None."""
    undecided = [
        f"{target.id} {gate.name} {gate.measured_ci95[0]:.4g}-{gate.measured_ci95[1]:.4g} "
        f"({gate.comparison} {gate.threshold:g})"
        for target in targets
        if target.inconclusive
        for gate in target.gates
        if gate.verdict == INCONCLUSIVE and gate.measured_ci95 is not None
    ]
    if not undecided:
        return None
    limit = config.gates.speed_time_limit_s
    return (
        f"inconclusive: no target passed every gate and the 95% interval of "
        f"{'; '.join(undecided)} at batch {config.gates.gate_batch_size} straddles its threshold "
        f"after the bench added rounds for up to {limit:g} s (gates.speed_time_limit_s)"
    )


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
    row = _row_at(winner.bench, batch)
    reason = (
        f"fastest of {passing} target(s) passing every gate: "
        f"{row['throughput_per_s']:.1f}/s at batch {batch}"
    )
    recommendation = Recommendation(
        target=winner.id,
        artifact=str(winner.artifact),
        backend=winner.backend,
        precision=str(winner.precision),
        batch_size=batch,
        throughput_per_s=row.get("throughput_per_s"),
        speedup_vs_baseline=row.get("speedup_vs_baseline"),
        latency_ms_p99=row.get("latency_ms_p99"),
        reason=reason,
    )
    return recommendation, reason
