"""The merged report written: the machine becomes a column of each table (report.md, through
trtconv.report.markdown), results.csv gets a `machine` column first, and each model's plot
series is one per machine."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from trtconv.core.fsutil import atomic_directory
from trtconv.core.results import to_jsonable
from trtconv.measure.bench_result import ROW_KEYS, BenchRow
from trtconv.report import markdown
from trtconv.report.merge_result import MergeResult
from trtconv.report.plots import PlotView, write_plots
from trtconv.report.writers import (
    TABLE_COLUMNS,
    environment_lines,
    format_value,
    model_cells,
    write_csv,
)
from trtconv.report.writers import write_json as write_result_json

# The per-machine tables of report.md and the terminal: (title, row key).
PIVOTS = (
    ("Throughput, samples/s", "throughput_per_s"),
    ("Speedup over the baseline on the same machine", "speedup_vs_baseline"),
    ("Latency p50, ms", "latency_ms_p50"),
    ("Latency p99, ms", "latency_ms_p99"),
)
CSV_KEYS = ("machine", *ROW_KEYS)
SEPARATOR = " @ "  # plot series: "model @ machine"


def pivot(result: MergeResult, key: str) -> tuple[list[str], list[list[str]]]:
    """One figure per machine side by side: headers and text rows (model, runs as, batch,
    then one cell per machine), models in measuring order, then batch size."""
    pattern = next(fmt for _, column, fmt in TABLE_COLUMNS if column == key)
    first: dict[tuple[str, int], BenchRow] = {}
    by_machine: dict[tuple[str, int], dict[str, Any]] = {}
    for merged in result.results:
        row = merged.row
        cell = (row.label, row.batch_size)
        first.setdefault(cell, row)
        by_machine.setdefault(cell, {})[merged.machine] = getattr(row, key)
    order = sorted(first, key=lambda cell: (result.order.index(cell[0]), cell[1]))
    rows = [
        [
            *model_cells(first[cell]),
            str(cell[1]),
            *(format_value(by_machine[cell].get(m), pattern) for m in result.machines),
        ]
        for cell in order
    ]
    return ["model", "runs as", "batch", *result.machines], rows


def merged_markdown(result: MergeResult, plots: list[str] | None = None) -> str:
    """report.md: the per-machine tables, then each machine's environment, settings, plots."""
    intro = [
        f"Models, measured in this order on every machine, each in its own process: "
        f"{', '.join(result.order)}. `*` baseline (**{result.baseline}**): every speedup "
        "is over the baseline measured on the same machine.",
        "",
    ]
    tables = [markdown.section(title, markdown.table(*pivot(result, key))) for title, key in PIVOTS]
    machines = [
        markdown.section(
            source.machine,
            [
                *markdown.bullets([f"from: `{source.directory}`"]),
                *environment_lines(source.environment),
                *markdown.bullets(f"warning: {w}" for w in source.warnings),
            ],
            level=3,
        )
        for source in result.sources
    ]
    settings: dict[str, Any] = to_jsonable(result.settings)
    return markdown.document(
        markdown.heading(f"trtconv bench report: {len(result.machines)} machines", level=1),
        intro,
        *tables,
        markdown.heading("Machines"),
        *machines,
        markdown.section("Settings", markdown.bullets(f"{k}: {v}" for k, v in settings.items())),
        markdown.plots([(Path(p).stem, p) for p in plots or []]),
    )


def plot_view(result: MergeResult) -> PlotView:
    """The merged rows as the plots read a bench result: one series per model and machine."""
    return PlotView(
        order=[f"{label}{SEPARATOR}{m}" for m in result.machines for label in result.order],
        baseline=f"{result.baseline}{SEPARATOR}{result.machines[0]}",
        rows=[
            replace(merged.row, label=f"{merged.row.label}{SEPARATOR}{merged.machine}")
            for merged in result.results
        ],
    )


def write_merged_report(
    result: MergeResult, directory: Path, force: bool = False
) -> dict[str, str]:
    """results.json, results.csv (a `machine` column first), report.md and the plots, written
    atomically into `directory`. Returns the written files by kind."""
    directory = Path(directory)
    with atomic_directory(directory, force=force) as staging:
        names = [png.name for png in write_plots(plot_view(result), staging)]
        write_result_json(result.to_json(), staging / "results.json")
        rows = [merged.to_json() for merged in result.results]
        write_csv(rows, staging / "results.csv", keys=CSV_KEYS)
        (staging / "report.md").write_text(merged_markdown(result, names))
    files = {"json": "results.json", "csv": "results.csv", "markdown": "report.md"}
    files.update({Path(name).stem: name for name in names})
    return {kind: str(directory / name) for kind, name in files.items()}
