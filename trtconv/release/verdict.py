"""The verdict: each target's gates from its recorded figures, and the recommendation.

Pure functions over the step results (no I/O), so changing only [gates] re-judges a release
from its records.
"""

from __future__ import annotations

from typing import Any

from trtconv.outputs.confidence import INCONCLUSIVE
from trtconv.outputs.roles import DECISIONS
from trtconv.release.config import ReleaseConfig
from trtconv.release.document import Recommendation, TargetEntry
from trtconv.release.gates import Candidate, GateResult, Measures, evaluate_gates, recommend


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


def _judge(config: ReleaseConfig, target: TargetEntry) -> Candidate | None:
    """Fill one target's gates; its candidacy, or None if it did not convert."""
    if not target.converted:
        target.gates = []
        return None
    row = _row_at(target.bench, config.gates.gate_batch_size)
    target.gates = evaluate_gates(config.gates, measures_for(target.conversion, target.eval, row))
    precision = target.precision or ""
    return Candidate(target.id, precision, row.get("throughput_per_s"), target.passed)


SPEED_GATES = ("min_speedup", "max_latency_ms_p99")


def inconclusive_reason(config: ReleaseConfig, targets: list[TargetEntry]) -> str | None:
    """One sentence when no target passed but some are inconclusive, not failed: their
    undecided gates, each with what would decide it (the bench's added rounds for a speed
    gate; more evaluation samples for an accuracy gate, which no bench round can decide);
    else None."""
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
    accuracy = [_interval(name, gate) for name, gate in undecided if gate.name not in SPEED_GATES]
    parts = []
    if speed:
        limit = config.gates.speed_time_limit_s
        parts.append(
            f"the 95% interval of {'; '.join(speed)} at batch {config.gates.gate_batch_size} "
            f"straddles its threshold after the bench added rounds for up to {limit:g} s "
            "(gates.speed_time_limit_s)"
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
