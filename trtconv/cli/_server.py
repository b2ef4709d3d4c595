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
from trtconv.serving.latency import p99_interval_text
from trtconv.serving.loadtest import server_bench
from trtconv.serving.options import (
    DEFAULT_LOAD_RUN_S,
    OFFLINE,
    SCENARIOS,
    SINGLE_STREAM,
    ScenarioBenchOptions,
    ServerBenchOptions,
)
from trtconv.serving.results import ScenarioBenchResult, ServerBenchResult
from trtconv.serving.scenarios import scenario_bench

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


def render(result: ServerBenchResult, console: Console) -> None:
    """One row per model and batching: queries/s at the budget, its latencies, LoadGen's
    verdict; ratios and the notes under it."""
    budget = result.latency_budget_ms
    table = Table(title=f"trtconv bench --scenario server (p99 budget {budget:g} ms)")
    for header in ("model", "batching", "queries/s at budget", "p50 ms", "p90 ms", "p99 ms",
                   "p99 95% interval", "LoadGen", "batches formed (size: runs)"):  # fmt: skip
        table.add_column(header)
    for row in result.rows:
        cells = [row.latency_ms_p50, row.latency_ms_p90, row.latency_ms_p99]
        batches = ", ".join(f"{size}: {count}" for size, count in row.batches.items())
        table.add_row(
            escape(row.label),
            f"dynamic (≤{row.max_batch_size})" if row.dynamic_batching else "batch 1",
            f"{row.qps_at_budget:.1f}" if row.qps_at_budget else "none met it",
            *("-" if value is None else f"{value:.2f}" for value in cells),
            p99_interval_text(row.latency_ms_p99_ci95),
            row.loadgen_result or "-",
            batches,
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
    table = Table(title=f"trtconv bench --scenario {result.scenario}")
    rate = "samples/s" if result.scenario == OFFLINE else "queries/s"
    for header in ("model", rate, "p50 ms", "p90 ms", "p99 ms", "p99 95% interval", "LoadGen",
                   "batches formed (size: runs)"):  # fmt: skip
        table.add_column(header)
    for row in result.rows:
        batches = ", ".join(f"{size}: {count}" for size, count in row.batches.items())
        latencies = (row.latency_ms_p50, row.latency_ms_p90, row.latency_ms_p99)
        table.add_row(
            escape(row.label), f"{row.completed_qps:.1f}", *(f"{v:.2f}" for v in latencies),
            p99_interval_text(row.latency_ms_p99_ci95), row.loadgen_result, batches,
        )  # fmt: skip
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
            tuple(models), latency_budget_ms, duration or DEFAULT_LOAD_RUN_S, search_runs,
            compare_batching=compare_batching,
        )  # fmt: skip
        return server_bench(options)

    run_command(work, json_mode=json_output, render=render)
