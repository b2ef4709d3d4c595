"""`trtconv report`: work on reports already written (`merge` runs from several machines)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from trtconv import api
from trtconv.cli._options import JsonOpt
from trtconv.cli._output import run_command
from trtconv.report.merge_result import MergeResult
from trtconv.report.merged_report import PIVOTS, pivot

app = typer.Typer(
    help="Work on bench and release reports already written.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def render_merged(result: MergeResult, console: Console) -> None:
    """Throughput and speedup per machine, side by side; where the report went."""
    if not console.is_terminal:
        console = Console(file=console.file, width=max(console.width, 132))
    for title, key in PIVOTS[:2]:
        headers, rows = pivot(result, key)
        table = Table(title=title)
        for index, header in enumerate(headers):
            table.add_column(header, justify="left" if index < 2 else "right")
        for cells in rows:
            table.add_row(*cells)
        console.print(table)
    if result.report is not None:
        console.print(f"Report: {Path(result.report['markdown']).parent}", highlight=False)


@app.command("merge")
def merge_cli(
    directories: list[Path] = typer.Argument(
        ...,
        help="`trtconv bench --report` directories and/or release directories.",
        show_default=False,
    ),
    output: Path = typer.Option(..., help="Write the merged report here.", show_default=False),
    force: bool = typer.Option(False, help="Replace an existing --output."),
    json_output: JsonOpt = False,
) -> None:
    """Merge bench runs of the same models from several machines into one report."""

    def work() -> MergeResult:
        return api.merge_reports(directories, output, force=force)

    run_command(work, json_mode=json_output, render=render_merged)
