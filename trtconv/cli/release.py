"""`trtconv release`: one TOML config, the whole chain, one verdict and one exit code."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from trtconv import api
from trtconv.cli._output import progress_bar, run_command
from trtconv.options.release import ReleaseOptions
from trtconv.release.document import ReleaseResult, TargetResult


def _verdict_line(result: ReleaseResult) -> str:
    """The recommendation and why, or why there is none."""
    recommendation = result.recommendation
    if recommendation:
        return (
            f"[bold green]release {recommendation.target}[/bold green]: "
            f"{escape(recommendation.reason)}"
        )
    return f"[bold red]no artifact recommended[/bold red]: {escape(result.recommendation_reason)}"


def _target_line(target: TargetResult, batch: int) -> str:
    """One target: its speed at the gate batch size and its gates, or why it failed."""
    if target.status != "converted":
        message = escape(str(target.error.message if target.error else None))
        return f"  {target.id:<14} failed: {message}"
    row = next((r for r in target.bench if r.batch_size == batch), None)
    failed = [gate.name for gate in target.gates if not gate.passed]
    verdict = "passed every gate" if not failed else "failed " + ", ".join(failed)
    speedup = row.speedup_vs_baseline if row else None
    return (
        f"  {target.id:<14} {row.throughput_per_s if row else 0:>10.1f}/s @{batch}  "
        f"{'' if speedup is None else f'{speedup:.2f}x native  '}{verdict}"
    )


def render_release(result: ReleaseResult, console: Console) -> None:
    """Verdict, one line per target, and where the reports are."""
    console.print(_verdict_line(result), soft_wrap=True, highlight=False)
    for target in result.targets:
        # A failed target's message is long (the fix): wrap it softly; speed lines stay whole.
        converted = target.status == "converted"
        line = _target_line(target, result.gate_batch_size)
        console.print(line, soft_wrap=not converted, highlight=False)
    if result.reused_steps:
        reused = ", ".join(result.reused_steps)
        console.print(f"  reused steps: {reused}", soft_wrap=True, highlight=False)
    report = escape(f"{result.release_dir}/release.md")
    total = result.timings["total_seconds"]
    console.print(f"  {report} ({total:.1f} s)", soft_wrap=True, highlight=False)


def release_cli(
    config: Path = typer.Argument(
        ..., help="Release config (TOML); see README 'Release pipelines'."
    ),
    output: Path = typer.Option(None, help="Release directory (default release-out/CONFIG_STEM)."),
    resume: bool = typer.Option(
        ReleaseOptions.resume,
        "--resume",
        help="Continue a release directory; reuse every unchanged step.",
    ),
    force: bool = typer.Option(
        ReleaseOptions.force, "--force", help="Empty an existing release directory first."
    ),
    json_output: bool = typer.Option(False, "--json", help="Print release.json to stdout."),
) -> None:
    """Convert every target, validate, bench, apply gates: exit 0 with a recommendation, else 4."""

    def work() -> ReleaseResult:
        options = ReleaseOptions(config, output=output, resume=resume, force=force)
        with progress_bar("release") as progress:
            return api.release(options, progress=progress)

    run_command(work, json_mode=json_output, render=render_release)
