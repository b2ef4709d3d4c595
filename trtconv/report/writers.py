"""Write a bench result as JSON, CSV and Markdown, and the whole report directory.

The writers take the typed result (trtconv.measure.bench_result.BenchResult); the cell,
CSV and environment helpers take its rows and environment, so the merged report
(trtconv.report.merged_report) shares them; report.md is drawn by trtconv.report.markdown.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trtconv.core.fsutil import atomic_directory
from trtconv.core.results import to_jsonable
from trtconv.facts.environment import BenchEnvironment
from trtconv.measure.bench_result import ROW_KEYS, BenchResult, BenchRow
from trtconv.report import markdown
from trtconv.report.plots import PlotView, interval, write_plots

# Draws a result's plots into a directory; returns the PNGs written.
Plotter = Callable[[PlotView, Path], list[Path]]

# Columns of report.md: (header, key, format). The terminal table shows the HUMAN_KEYS subset.
TABLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("batch", "batch_size", "{}"),
    ("p50 ms", "latency_ms_p50", "{:.3f}"),
    ("p99 ms", "latency_ms_p99", "{:.3f}"),
    ("mean ms", "latency_ms_trimmed_mean", "{:.3f}"),
    ("cv %", "cv_percent", "{:.1f}"),
    ("cv80 %", "cv_trimmed_percent", "{:.1f}"),
    ("samples/s", "throughput_per_s", "{:,.0f}"),
    ("speedup", "speedup_vs_baseline", "{:.2f}×"),
    ("accuracy", "accuracy", "{:.4f}"),
    ("agreement", "top1_agreement", "{:.4f}"),
    ("validation", "validation", "{}"),
    ("RSS MB", "peak_rss_mb", "{:.0f}"),
    ("first ms", "first_inference_ms", "{:.0f}"),
)
HUMAN_KEYS = (
    "batch_size",
    "latency_ms_p50",
    "latency_ms_p99",
    "cv_trimmed_percent",
    "throughput_per_s",
    "speedup_vs_baseline",
    "accuracy",
    "top1_agreement",
    "validation",
    "peak_rss_mb",
)


# Figures printed with their 95% interval (`KEY_ci95`) after them: "1.42× (1.31-1.55)"; the
# terminal table (compact) only the speed-up's, to stay readable in 132 columns.
INTERVAL_FORMATS = {
    "throughput_per_s": "{:,.0f}",
    "speedup_vs_baseline": "{:.2f}",
    "latency_ms_p99": "{:.3f}",
}
COMPACT_INTERVALS = ("speedup_vs_baseline",)


def format_value(value: Any, pattern: str) -> str:
    """A table cell: `-` for a missing figure."""
    if value is None:
        return "-"
    return pattern.format(value)


def figure_cell(row: BenchRow, key: str, pattern: str, compact: bool = False) -> str:
    """A row's figure as a table cell, followed by its 95% interval where it has one:
    "1.42× (1.31-1.55)" (`compact`: only the COMPACT_INTERVALS)."""
    value = getattr(row, key)
    cell = format_value(value, pattern)
    bounds = interval(row, key)
    shown = COMPACT_INTERVALS if compact else INTERVAL_FORMATS
    if bounds is None or key not in shown or value is None:
        return cell
    if key == "speedup_vs_baseline" and row.is_baseline:
        return cell  # 1.00× by definition
    low, high = (INTERVAL_FORMATS[key].format(bound) for bound in bounds)
    return f"{cell} ({low}-{high})"


def model_cells(row: BenchRow) -> list[str]:
    """`label` (a `*` on the baseline) and `backend precision`."""
    star = " *" if row.is_baseline else ""
    backend = row.backend + ("+xla" if row.xla else "")
    backend += "+throughput" if row.throughput_mode else ""
    return [f"{row.label}{star}", f"{backend} {row.precision}"]


def _columns(compact: bool) -> list[tuple[str, str, str]]:
    return [c for c in TABLE_COLUMNS if not compact or c[1] in HUMAN_KEYS]


def table_rows(result: BenchResult, compact: bool = False) -> list[list[str]]:
    """The table as text cells, models in measuring order, then batch size."""
    columns = _columns(compact)
    return [
        model_cells(row) + [figure_cell(row, key, fmt, compact) for _, key, fmt in columns]
        for row in result.results
    ]


def table_headers(compact: bool = False) -> list[str]:
    """Column headers matching `table_rows`."""
    return ["model", "runs as"] + [header for header, _, _ in _columns(compact)]


def write_json(document: Mapping[str, Any], path: Path) -> Path:
    """results.json: the whole result document."""
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    return path


def write_csv(
    rows: Iterable[Mapping[str, Any]], path: Path, keys: Sequence[str] = ROW_KEYS
) -> Path:
    """One line per row (model × batch size) with every row key (or `keys`), in that order."""
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(keys), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: "" if row.get(key) is None else row[key] for key in keys})
    return path


def environment_lines(environment: BenchEnvironment) -> list[str]:
    """A bench environment as Markdown list items (CPU, GPU, threads, Python, libraries)."""
    cpu = environment.cpu
    libraries = environment.libraries or {}
    versions = ", ".join(f"{k} {v}" for k, v in libraries.items() if v)
    gpus = ", ".join(gpu.name for gpu in environment.gpus or []) or "none"
    model, cores = (cpu.model, cpu.logical_cores) if cpu else (None, None)
    return [
        f"- CPU: {model} ({cores} logical cores available)",
        f"- GPU: {gpus}",
        f"- threads: {environment.threads or 'library default'}",
        f"- Python {environment.python} on {environment.platform}",
        f"- libraries: {versions}",
        f"- commit: {environment.commit}",
    ]


def bench_markdown(result: BenchResult, plots: list[str] | None = None) -> str:
    """report.md: baseline, the table, warnings, how it was measured, environment, plots."""
    intro = [
        f"Baseline: **{result.baseline}** (`{result.baseline_model}`), "
        f"{result.baseline_reason}. Models were measured in this order, each in its own "
        f"process, interleaved in {result.settings.planned_rounds} round(s) per batch size: "
        f"{', '.join(result.order)}.",
        "",
    ]
    notes = [
        "`*` baseline. `mean ms` is the 10% trimmed mean; `cv80 %` is the coefficient of "
        "variation of the central 80% of the samples (stability warnings read it); samples/s is "
        "batch × iterations over the timed loop's wall time; speedup is throughput over the "
        "baseline's at the same batch size. In brackets: the 95% interval, bootstrapped over the "
        "rounds the models were timed in, interleaved (speed-ups paired by round).",
        "",
    ]
    overhead = result.harness_overhead_ms
    if overhead is not None:
        notes += [f"Harness overhead per call (do-nothing runner): {overhead * 1000:.1f} µs.", ""]
    warnings = markdown.section("Warnings", markdown.bullets(result.warnings))
    settings: dict[str, Any] = to_jsonable(result.settings)
    return markdown.document(
        markdown.heading("trtconv bench report", level=1),
        intro,
        markdown.table(table_headers(), table_rows(result)),
        [""],
        notes,
        warnings if result.warnings else [],
        markdown.section("Settings", markdown.bullets(f"{k}: {v}" for k, v in settings.items())),
        markdown.section("Environment", environment_lines(result.environment)),
        markdown.plots([(Path(p).stem, p) for p in plots or []]),
    )


def write_markdown(result: BenchResult, path: Path, plots: list[str] | None = None) -> Path:
    """report.md (see `bench_markdown`)."""
    path.write_text(bench_markdown(result, plots))
    return path


def write_report(
    result: BenchResult, directory: Path, force: bool = False, plotter: Plotter = write_plots
) -> dict[str, str]:
    """Write results.json, results.csv, report.md and the plots into `directory`, atomically.

    Returns the written files by kind (paths inside the final directory; results.json holds
    the result without them). Raises UsageError when `directory` exists and `force` is not set.
    """
    directory = Path(directory)
    document = result.to_json()
    with atomic_directory(directory, force=force) as staging:
        names = [png.name for png in plotter(PlotView.of(result), staging)]
        write_json(document, staging / "results.json")
        write_csv([row.to_json() for row in result.results], staging / "results.csv")
        write_markdown(result, staging / "report.md", names)
    files = {"json": "results.json", "csv": "results.csv", "markdown": "report.md"}
    files.update({Path(name).stem: name for name in names})
    return {kind: str(directory / name) for kind, name in files.items()}
