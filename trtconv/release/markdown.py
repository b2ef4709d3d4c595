"""release.md: the release document for humans (verdict first, then the evidence)."""

from __future__ import annotations

from typing import Any

from trtconv.convert.tournament import NOT_AVAILABLE, absent_groups
from trtconv.facts.hardware import CpuBlock
from trtconv.measure.bench_result import BenchRow
from trtconv.outputs.confidence import interval_text
from trtconv.outputs.validation_result import ValidationReport
from trtconv.quantize.ladder_result import LadderRecord, LadderSpeed
from trtconv.quantize.ladder_text import budget_text, kept_text, search_text
from trtconv.release.document import ReleaseResult, TargetResult
from trtconv.release.gates import GateResult
from trtconv.release.serving_markdown import serving_section
from trtconv.report import markdown


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"
    return str(value)


def _row(cells: list[Any]) -> str:
    return "| " + " | ".join(_fmt(c) for c in cells) + " |"


def _with_interval(value: Any, interval: tuple[float, float] | None, digits: int = 4) -> str:
    """A figure and its 95% interval: "1.42 (1.31-1.55)"; the figure alone without one."""
    if value is None or not interval:
        return _fmt(value, digits)
    low, high = (_fmt(float(bound), digits) for bound in interval)
    return f"{_fmt(value, digits)} ({low}-{high})"


def _gate_result(gate: GateResult) -> str:
    """pass, FAIL, INCONCLUSIVE (release.json written before verdicts: from `passed`), or
    n/a (pass) for a gate that applies to no output (it passes)."""
    if gate.detail.startswith("not applicable"):
        return "n/a (pass)"
    if gate.verdict == "inconclusive":
        return "INCONCLUSIVE"
    return "pass" if gate.passed else "FAIL"


def _target_result(target: TargetResult) -> str:
    """A target's gates in one word: pass, FAIL, INCONCLUSIVE (none failed, one undecided)."""
    if target.status != "converted":
        return "–"
    if target.passed:
        return "pass"
    results = {_gate_result(gate) for gate in target.gates}
    return "INCONCLUSIVE" if "INCONCLUSIVE" in results and "FAIL" not in results else "FAIL"


def _verdict(document: ReleaseResult) -> list[str]:
    recommendation = document.recommendation
    if recommendation is None:
        what = "inconclusive" if document.verdict == "inconclusive" else "no artifact recommended"
        return [f"**Verdict: {what}** ({document.recommendation_reason})."]
    return [
        f"**Verdict: release `{recommendation.artifact}`** "
        f"({recommendation.backend} {recommendation.precision}): "
        f"{recommendation.reason}, {_fmt(recommendation.speedup_vs_baseline, 3)}× native, "
        f"p99 {_fmt(recommendation.latency_ms_p99, 3)} ms."
    ]


def _accuracy_text(accuracy: ValidationReport | None, figure: str) -> str | None:
    """'0.981 (0.898-0.997, n=52)': a recorded accuracy figure (`top1_agreement` or
    `accuracy_drop`) with its 95% interval and the samples (the figure alone without one)."""
    if accuracy is None:
        return None
    if figure == "accuracy_drop":
        value, interval = accuracy.accuracy_drop, accuracy.accuracy_drop_ci95
    else:
        value, interval = accuracy.top1_agreement, accuracy.top1_agreement_ci95
    if value is None:
        return None
    return interval_text(value, interval, accuracy.samples, figure == "accuracy_drop")


def _row_at(rows: list[BenchRow], batch: int) -> BenchRow | None:
    return next((row for row in rows if row.batch_size == batch), None)


GATE_FIGURES = {"min_top1_agreement": "top1_agreement", "max_accuracy_drop": "accuracy_drop"}


def _targets_table(document: ReleaseResult) -> list[str]:
    batch = document.gate_batch_size
    lines = [
        f"| target | status | top-1 agreement | accuracy drop | throughput/s @{batch} (95% CI) | "
        f"speedup @{batch} (95% CI) | p99 ms @{batch} (95% CI) | size MB | convert s | gates |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for target in document.targets:
        accuracy = target.eval or target.validation
        size = target.artifact_size_bytes
        cells: list[Any] = [f"`{target.id}`", target.status]
        cells += [
            _accuracy_text(accuracy, "top1_agreement"),
            _accuracy_text(accuracy, "accuracy_drop"),
        ]
        cells += _speed_cells(_row_at(target.bench, batch))
        cells += [None if size is None else size / 1e6, target.conversion_seconds]
        lines.append(_row([*cells, _target_result(target)]))
    return lines


def _speed_cells(row: BenchRow | None) -> list[str]:
    """Throughput, speed-up and p99 latency, each with its 95% interval (– when not benched)."""
    if row is None:
        return [_fmt(None)] * 3
    return [
        _with_interval(row.throughput_per_s, row.throughput_per_s_ci95),
        _with_interval(row.speedup_vs_baseline, row.speedup_vs_baseline_ci95, 3),
        _with_interval(row.latency_ms_p99, row.latency_ms_p99_ci95),
    ]


def _gates_section(document: ReleaseResult) -> list[str]:
    lines = [
        "## Gates",
        "",
        "Speed gates are judged on the bench's 95% interval (in brackets): pass when all of it "
        "meets the threshold, FAIL when none of it does, INCONCLUSIVE when it straddles it.",
        "",
        "| target | gate | measured | threshold | result |",
        "|---|---|---|---|---|",
    ]
    for target in document.targets:
        if target.status != "converted":
            message = target.error.message if target.error else None
            lines.append(_row([f"`{target.id}`", "conversion", message, "–", "FAIL"]))
            continue
        accuracy = target.eval or target.validation
        for gate in target.gates:
            figure = GATE_FIGURES.get(gate.name)
            measured = _accuracy_text(accuracy, figure) if figure else None
            lines.append(
                _row(
                    [
                        f"`{target.id}`",
                        gate.name,
                        measured or _with_interval(gate.measured, gate.measured_ci95),
                        f"{gate.comparison} {_fmt(gate.threshold)}",
                        _gate_result(gate),
                    ]
                )
            )
    return lines


def _ladder_section(document: ReleaseResult) -> list[str]:
    """Per int8 target: the precision ladder its conversion climbed (nothing when none did)."""
    laddered = [t for t in document.targets if t.ladder]
    if not laddered:
        return []
    lines = ["## INT8 precision ladder", ""]
    for target in laddered:
        assert target.ladder is not None
        lines += _ladder_lines(target.id, target.ladder)
    return lines


def _ladder_lines(target_id: str, ladder: LadderRecord) -> list[str]:
    lines = [
        f"### `{target_id}`: {ladder.outcome}",
        "",
        f"Budget {budget_text(ladder)}; {search_text(ladder)}; "
        f"{_fmt(ladder.seconds, 3)} s (limit {_fmt(ladder.time_limit_s)} s).",
        "",
    ]
    if ladder.search_data.note:
        lines += [f"Note: {ladder.search_data.note}.", ""]
    lines += [
        "| step | stage | change | top-1 agreement | accuracy | seconds | meets budget |",
        "|---|---|---|---|---|---|---|",
    ]
    for step in ladder.steps:
        chosen = " (chosen)" if step.step == ladder.chosen_step else ""
        cells = [step.step, step.stage, step.change, step.top1_agreement]
        cells += [step.accuracy, step.seconds, step.meets_budget]
        lines.append(_row(cells).removesuffix(" |") + f"{chosen} |")
    if ladder.kept_float:
        kept = ", ".join(f"`{kept_text(node)}`" for node in ladder.kept_float)
        lines += ["", f"Kept in float: {kept}."]
    return [*lines, "", *_ladder_speed(ladder.speed), ""]


def _ladder_speed(speed: LadderSpeed | None) -> list[str]:
    if not speed:
        return ["Speed: not timed by the ladder (the bench times the artifact)."]
    lines = [
        f"Speed ({speed.method}):",
        "",
        "| batch | fp32 ms | full int8 ms | chosen ms | chosen vs fp32 |",
        "|---|---|---|---|---|",
    ]
    for row in speed.rows:
        chosen = (
            row.full_int8_latency_ms if row.chosen_latency_ms is None else row.chosen_latency_ms
        )
        cells = [row.batch_size, row.fp32_latency_ms, row.full_int8_latency_ms, chosen]
        lines.append(_row([*cells, f"{row.speedup_vs_fp32:.2f}×"]))
    return lines + [f"\nNote: {note}" for note in speed.notes]


def _tournament_sections(document: ReleaseResult) -> list[str]:
    """For each `best` target: every candidate, its figures, verdict and why (its tournament)."""
    lines: list[str] = []
    for target in document.targets:
        table = target.tournament
        if not table:
            continue
        lines += [
            f"## Tournament of `{target.id}`",
            "",
            f"Every backend and precision that could run here, converted and validated; those that "
            f"passed timed at batch {table.batch_size} ({table.timing_text()} each). "
            f"Winner: **{table.winner or 'none'}**.",
            "",
            "| candidate | verdict | samples/s | p50 ms | × native | top-1 agreement | why |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in table.candidates:
            if row.verdict == NOT_AVAILABLE:
                continue
            cells = [row.name, row.verdict, row.throughput_per_s, row.latency_ms_p50]
            cells += [row.speedup_vs_native, row.top1_agreement, row.reason]
            lines.append(_row(cells))
        for names, reason, fix in absent_groups(table.candidates):
            lines.append(
                _row([names, NOT_AVAILABLE, None, None, None, None, f"{reason}; fix: {fix}"])
            )
        lines.append("")
    return lines


def _steps_section(document: ReleaseResult) -> list[str]:
    lines = ["## Steps", "", "| step | reused | seconds | why |", "|---|---|---|---|"]
    for step in document.steps:
        lines.append(_row([step.name, step.reused, step.seconds, step.reason]))
    lines.append(f"\nTotal: {document.timings['total_seconds']:.1f} s.")
    return lines


def release_markdown(document: ReleaseResult) -> str:
    """The whole release.md, from the release's result (a saved release.json, read back with
    `ReleaseResult.from_json`, renders the same report)."""
    environment = document.environment
    cpu = environment.cpu or CpuBlock()
    batch = document.gate_batch_size
    native = _row_at(document.native_bench, batch)
    source = document.source_model
    lines = [
        *markdown.heading("Release report", level=1),
        *_verdict(document),
        "",
        f"Source model `{source.path}` (sha256 `{source.sha256[:12]}`); native throughput "
        f"{_fmt(native.throughput_per_s if native else None)}/s at batch {batch}.",
        "",
        "## Targets",
        "",
        *_targets_table(document),
        "",
        *_gates_section(document),
        "",
        *serving_section(document),
        *_ladder_section(document),
        *_tournament_sections(document),
        *_steps_section(document),
        "",
    ]
    libraries = (environment.libraries or {}).items()
    machine = [
        f"CPU: {cpu.model} ({cpu.logical_cores} cores)",
        f"GPUs: {', '.join(gpu.name for gpu in environment.gpus or []) or 'none'}",
        f"Python {environment.python}, commit {environment.commit or 'unknown'}",
        "Libraries: " + ", ".join(f"{k} {v}" for k, v in libraries if v is not None),
    ]
    return markdown.document(
        lines,
        markdown.plots([(plot, plot) for plot in document.plots or []]),
        markdown.section("Environment", markdown.bullets(machine)),
    )
