"""`trtconv bench --scenario server`: its options and its table (the bench command's module
stays about the closed-loop bench)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trtconv.cli._output import run_command
from trtconv.core.errors import UsageError
from trtconv.measure.server_bench_result import ScenarioBenchResult, ServerBenchResult
from trtconv.options.server_bench import (
    DEFAULT_LOAD_RUN_S,
    OFFLINE,
    SCENARIOS,
    SINGLE_STREAM,
    ScenarioBenchOptions,
    ServerBenchOptions,
)
from trtconv.serving.load.latency import p99_interval_text
from trtconv.serving.load.rate_search import server_bench
from trtconv.serving.load.scenarios import scenario_bench

Scenario = Annotated[
    str,
    typer.Option(
        help=f"{', '.join(SCENARIOS)}: closed-loop times fixed batches one call at a time; "
        "server serves each model (trtconv serve) and drives it with MLPerf LoadGen's Poisson "
        "arrivals, reporting the highest queries/s whose p99 meets --latency-budget-ms; "
        "single-stream and offline run LoadGen's SingleStream (one query at a time) and Offline "
        "(every sample at once) scenarios against the served model for --duration seconds."
    ),
]
LatencyBudget = Annotated[
    float | None,
    typer.Option("--latency-budget-ms", help="--scenario server: the p99 latency budget."),
]
SearchRuns = Annotated[
    int,
    typer.Option(min=1, help="--scenario server: LoadGen runs in the search for the highest rate."),
]
CompareBatching = Annotated[
    bool,
    typer.Option(
        "--compare-batching",
        help="--scenario server: also serve each model at batch 1, beside dynamic batching.",
    ),
]


ShadowRate = Annotated[
    float | None,
    typer.Option(
        "--shadow",
        help="--scenario server: serve each model with its shadow check at this rate (serve "
        "--shadow): what the check costs the served rate.",
        show_default=False,
    ),
]
Offered = Annotated[
    str | None,
    typer.Option(
        help="--scenario server: multiples of each model's measured capacity to offer, e.g. "
        "0.5,1,1.5,2,3: per multiple, goodput, the served requests' p99 and the refused and "
        "timed-out shares (instead of the rate search)."
    ),
]


OVERLOAD_COLUMNS = (
    "offered",
    "requests/s",
    "goodput/s",
    "served p50 ms",
    "served p99 ms",
    "server mean ms",
    "refused",
    "timed out",
    "errors",
)
# The columns every LoadGen table ends with, after its model and rate.
LOADGEN_COLUMNS = (
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "p99 95% interval",
    "LoadGen",
    "batches formed (size: runs)",
)


def batches_text(batches: dict[str, int]) -> str:
    """Triton's batch statistics as "1: 17, 8: 434" (size: executions)."""
    return ", ".join(f"{size}: {count}" for size, count in batches.items())


def parse_offered(text: str | None) -> tuple[float, ...]:
    """'0.5,1,2' as (0.5, 1.0, 2.0). Raises UsageError for anything else."""
    if text is None:
        return ()
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"--offered takes multiples like 0.5,1,2, found '{text}'.") from None


def render_overload(result: ServerBenchResult, console: Console) -> None:
    """Per model, one row per offered multiple of its capacity."""
    budget = result.latency_budget_ms
    for row in result.overload:
        size, timeout = row.max_queue_size, row.queue_timeout_ms
        queue = (
            f"queue {size or 'unbounded'}, timeout {f'{timeout:g} ms' if timeout else 'none'}"
            if size or timeout
            else "no queue policy"
        )
        table = Table(
            *OVERLOAD_COLUMNS,
            title=f"{escape(row.label)}: capacity {row.capacity_qps:.1f} requests/s "
            f"(closed loop); {queue}; budget {budget:g} ms",
        )
        for run in row.runs:
            p50, p99 = run.latency_ms_p50, run.latency_ms_p99
            table.add_row(
                f"{run.multiple:g}x",
                f"{run.offered_qps:.1f}",
                f"{run.goodput_qps:.1f}",
                "-" if p50 is None else f"{p50:.2f}",
                "-" if p99 is None else f"{p99:.2f}",
                "-" if run.server_latency_ms_mean is None else f"{run.server_latency_ms_mean:.2f}",
                f"{run.refused_share:.1%}",
                f"{run.timed_out_share:.1%}",
                str(run.errors),
            )
        console.print(table)
    for note in result.notes:
        console.print(f"  [yellow]{escape(note)}[/yellow]")


def render(result: ServerBenchResult, console: Console) -> None:
    """One row per model and batching: queries/s at the budget, its latencies, LoadGen's
    verdict; ratios and the notes under it (the overload curve with --offered)."""
    if result.overload:
        render_overload(result, console)
        return
    budget = result.latency_budget_ms
    table = Table(
        "model",
        "batching",
        "queries/s at budget",
        *LOADGEN_COLUMNS,
        title=f"trtconv bench --scenario server (p99 budget {budget:g} ms)",
    )
    for row in result.rows:
        cells = [row.latency_ms_p50, row.latency_ms_p90, row.latency_ms_p99]
        table.add_row(
            escape(row.label),
            f"dynamic (≤{row.max_batch_size})" if row.dynamic_batching else "batch 1",
            f"{row.qps_at_budget:.1f}" if row.qps_at_budget else "none met it",
            *("-" if value is None else f"{value:.2f}" for value in cells),
            p99_interval_text(row.latency_ms_p99_ci95),
            row.loadgen_result or "-",
            batches_text(row.batches),
        )
    console.print(table)
    for label, ratio in result.ratios_vs_baseline.items():
        console.print(f"  {escape(label)}: {ratio if ratio is not None else '-'}x the first model")
    for label, gain in result.batching_gain.items():
        shown = "-" if gain is None else f"{gain}x"
        console.print(f"  {escape(label)}: dynamic batching {shown} batch 1")
    for note in result.notes:
        console.print(f"  [yellow]{escape(note)}[/yellow]")


def render_scenario(result: ScenarioBenchResult, console: Console) -> None:
    """One row per model: its throughput, latencies and LoadGen's verdict; notes under it."""
    rate = "samples/s" if result.scenario == OFFLINE else "queries/s"
    table = Table(
        "model", rate, *LOADGEN_COLUMNS, title=f"trtconv bench --scenario {result.scenario}"
    )
    for row in result.rows:
        latencies = (row.latency_ms_p50, row.latency_ms_p90, row.latency_ms_p99)
        table.add_row(
            escape(row.label),
            f"{row.completed_qps:.1f}",
            *(f"{v:.2f}" for v in latencies),
            p99_interval_text(row.latency_ms_p99_ci95),
            row.loadgen_result,
            batches_text(row.batches),
        )
    console.print(table)
    for row in result.rows:
        for line in row.early_stopping:
            console.print(f"  {escape(row.label)}: {escape(line)}")
    for note in result.notes:
        console.print(f"  [yellow]{escape(note)}[/yellow]")


def run_server_scenario(
    scenario: str,
    models: list[Path],
    latency_budget_ms: float | None,
    duration: float | None,
    search_runs: int,
    compare_batching: bool,
    offered: str | None,
    shadow: float | None,
    json_output: bool,
) -> None:
    """Run and print the server scenario (`bench --scenario server`)."""

    if scenario in (SINGLE_STREAM, OFFLINE):
        options = (tuple(models), scenario, duration or DEFAULT_LOAD_RUN_S)
        run_command(
            lambda: scenario_bench(ScenarioBenchOptions(*options)),
            json_mode=json_output,
            render=render_scenario,
        )
        return

    def work() -> ServerBenchResult:
        if scenario not in SCENARIOS:
            raise UsageError(f"Unknown scenario '{scenario}'; choose {', '.join(SCENARIOS)}.")
        if latency_budget_ms is None:
            raise UsageError("--scenario server needs --latency-budget-ms.")
        options = ServerBenchOptions(
            tuple(models),
            latency_budget_ms,
            duration or DEFAULT_LOAD_RUN_S,
            search_runs,
            compare_batching=compare_batching,
            offered=parse_offered(offered),
            shadow=shadow,
        )
        return server_bench(options)

    run_command(work, json_mode=json_output, render=render)
