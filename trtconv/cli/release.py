"""`trtconv release`: one TOML config, the whole chain, one verdict and one exit code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from trtconv.cli._output import progress_bar, run_command


def render_release(document: dict[str, Any], console: Console) -> None:
    """Verdict, one line per target, and where the reports are."""
    batch = document["gate_batch_size"]
    recommendation = document["recommendation"]
    if recommendation:
        console.print(
            f"[bold green]release {recommendation['target']}[/bold green]: "
            f"{escape(recommendation['reason'])}",
            soft_wrap=True,
            highlight=False,
        )
    else:
        console.print(
            f"[bold red]no artifact recommended[/bold red]: "
            f"{escape(document['recommendation_reason'])}",
            soft_wrap=True,
            highlight=False,
        )
    for target in document["targets"]:
        if target["status"] != "converted":
            message = escape(target["error"]["message"])
            console.print(
                f"  {target['id']:<14} failed: {message}", soft_wrap=True, highlight=False
            )
            continue
        row: dict[str, Any] = next((r for r in target["bench"] if r["batch_size"] == batch), {})
        failed = [g["name"] for g in target["gates"] if not g["passed"]]
        verdict = "passed every gate" if not failed else "failed " + ", ".join(failed)
        speedup = row.get("speedup_vs_baseline")
        console.print(
            f"  {target['id']:<14} {row.get('throughput_per_s', 0):>10.1f}/s @{batch}  "
            f"{'' if speedup is None else f'{speedup:.2f}x native  '}{verdict}",
            highlight=False,
        )
    reused = document["reused_steps"]
    if reused:
        console.print(f"  reused steps: {', '.join(reused)}", soft_wrap=True, highlight=False)
    report = escape(f"{document['release_dir']}/release.md")
    console.print(
        f"  {report} ({document['timings']['total_seconds']:.1f} s)",
        soft_wrap=True,
        highlight=False,
    )


def release_cli(
    config: Path = typer.Argument(
        ..., help="Release config (TOML); see README 'Release pipelines'."
    ),
    output: Path = typer.Option(None, help="Release directory (default release-out/CONFIG_STEM)."),
    resume: bool = typer.Option(
        False, "--resume", help="Continue a release directory; reuse every unchanged step."
    ),
    force: bool = typer.Option(False, "--force", help="Empty an existing release directory first."),
    json_output: bool = typer.Option(False, "--json", help="Print release.json to stdout."),
) -> None:
    """Convert every target, validate, bench, apply gates: exit 0 with a recommendation, else 4."""

    def work() -> dict[str, Any]:
        from trtconv import api

        with progress_bar("release") as progress:
            return api.release(config, output=output, resume=resume, force=force, progress=progress)

    run_command(work, json_mode=json_output, render=render_release)
