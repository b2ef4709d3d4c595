"""PNG plots of a bench result (or the merged report's per-machine view) with matplotlib's Agg
backend (no display needed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtconv.measure.bench_result import BenchResult, BenchRow

DPI = 110


@dataclass(frozen=True)
class PlotView:
    """What the plots draw: one series per label in `order`, the baseline's drawn apart."""

    order: list[str]
    baseline: str
    rows: list[BenchRow]

    @classmethod
    def of(cls, result: BenchResult) -> PlotView:
        """A bench result's models as the series."""
        return cls(result.order, result.baseline, result.results)


def value_of(row: BenchRow, key: str) -> float | None:
    """A row's figure named by its key (`latency_ms_p50`)."""
    value = getattr(row, key)
    return None if value is None else float(value)


def interval(row: BenchRow, key: str) -> tuple[float, float] | None:
    """The 95% interval of a row's figure (its `KEY_ci95`), None where it has none."""
    found: tuple[float, float] | None = getattr(row, f"{key}_ci95", None)
    return found


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _series(view: PlotView, key: str) -> dict[str, tuple[list[int], list[float]]]:
    """Per model label, in measuring order: batch sizes and the values of `key`."""
    series: dict[str, tuple[list[int], list[float]]] = {name: ([], []) for name in view.order}
    for row in view.rows:
        value = value_of(row, key)
        if value is None:
            continue
        sizes, values = series[row.label]
        sizes.append(row.batch_size)
        values.append(value)
    return {label: data for label, data in series.items() if data[0]}


def _error_bars(view: PlotView, label: str, key: str) -> list[list[float]] | None:
    """matplotlib's `yerr` for one model's `key` over batch sizes, from each row's `KEY_ci95`
    (distances below and above the value); None when some row has no interval."""
    below, above = [], []
    for row in view.rows:
        value = value_of(row, key)
        if row.label != label or value is None:
            continue
        bounds = interval(row, key)
        if not bounds:
            return None
        below.append(max(0.0, value - float(bounds[0])))
        above.append(max(0.0, float(bounds[1]) - value))
    return [below, above]


# Above this max/min ratio a linear y axis flattens the fast models onto zero: use a log axis.
LOG_Y_RATIO = 20.0


def _finish(figure: Any, axes: Any, batch_sizes: set[int], values: list[float], path: Path) -> Path:
    """Batch-size x axis (log2 when several), log y for wide ranges, grid, legend; save, close."""
    if len(batch_sizes) > 1:
        axes.set_xscale("log", base=2)
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > LOG_Y_RATIO:
        axes.set_yscale("log")
    axes.set_xticks(sorted(batch_sizes), [str(b) for b in sorted(batch_sizes)])
    axes.set_xlabel("batch size")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    _pyplot().close(figure)
    return path


def plot_latency(result: PlotView, path: Path) -> Path:
    """p50 latency vs batch size, one line per model (p99 as a dashed line of the same colour)."""
    figure, axes = _pyplot().subplots(figsize=(7, 4.5))
    p99 = _series(result, "latency_ms_p99")
    batch_sizes: set[int] = set()
    plotted: list[float] = []
    for label, (sizes, values) in _series(result, "latency_ms_p50").items():
        bars = _error_bars(result, label, "latency_ms_p50")
        drawn = axes.errorbar(sizes, values, yerr=bars, marker="o", capsize=3, label=f"{label} p50")
        colour = drawn.lines[0].get_color()
        tail_sizes, tail_values = p99.get(label, ([], []))
        axes.plot(tail_sizes, tail_values, linestyle="--", color=colour, alpha=0.6)
        batch_sizes.update(sizes)
        plotted += values + tail_values
    axes.set_ylabel("latency, ms (solid p50, dashed p99; bars: 95% interval)")
    axes.set_title("Latency vs batch size")
    return _finish(figure, axes, batch_sizes, plotted, path)


def plot_throughput(result: PlotView, path: Path) -> Path:
    """Throughput (samples/s) vs batch size, one line per model; the baseline drawn with squares."""
    figure, axes = _pyplot().subplots(figsize=(7, 4.5))
    batch_sizes: set[int] = set()
    plotted: list[float] = []
    for label, (sizes, values) in _series(result, "throughput_per_s").items():
        marker = "s" if label == result.baseline else "o"
        bars = _error_bars(result, label, "throughput_per_s")
        axes.errorbar(sizes, values, yerr=bars, marker=marker, capsize=3, label=label)
        batch_sizes.update(sizes)
        plotted += values
    axes.set_ylabel("throughput, samples/s (bars: 95% interval)")
    axes.set_title("Throughput vs batch size")
    return _finish(figure, axes, batch_sizes, plotted, path)


def plot_accuracy_vs_speedup(result: PlotView, path: Path) -> Path | None:
    """Accuracy (or top-1 agreement without labels) vs speedup at the largest batch size."""
    rows = result.rows
    metric = "accuracy" if any(r.accuracy is not None for r in rows) else "top1_agreement"
    largest = max(r.batch_size for r in rows)
    points = [
        r
        for r in rows
        if r.batch_size == largest
        and value_of(r, metric) is not None
        and r.speedup_vs_baseline is not None
    ]
    if not points:
        return None
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7, 4.5))
    # One colour and a legend entry per model: labels written beside points collide when two
    # models sit at the same spot (e.g. fp32 next to the baseline at 1.0x, 1.0).
    for row in points:
        marker = "s" if row.is_baseline else "o"
        bounds = None if row.is_baseline else row.speedup_vs_baseline_ci95
        speedup = row.speedup_vs_baseline or 0.0
        bars = [[speedup - bounds[0]], [bounds[1] - speedup]] if bounds else None
        axes.errorbar(
            speedup,
            value_of(row, metric),
            xerr=bars,
            fmt=marker,
            markersize=8,
            capsize=3,
            clip_on=False,
            label=row.label,
            zorder=3,
        )
    values = [value_of(r, metric) or 0.0 for r in points]
    pad = max(0.01, (max(values) - min(values)) * 0.15)
    # Accuracy and agreement are fractions: the axis stays within [0, 1].
    axes.set_ylim(max(0.0, min(values) - pad), min(1.0, max(values) + pad))
    right = max(_speedup_high(r) for r in points)
    axes.set_xlim(left=0.0, right=max(1.1, right * 1.15))
    axes.axvline(1.0, color="grey", linewidth=0.8, linestyle=":")
    axes.set_xlabel(
        f"speedup vs baseline ({result.baseline}) at batch {largest} (bars: 95% interval)"
    )
    axes.set_ylabel("accuracy" if metric == "accuracy" else "top-1 agreement with baseline")
    axes.set_title("Accuracy vs speedup")
    axes.legend(fontsize="small", loc="best")
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return path


def _speedup_high(row: BenchRow) -> float:
    """The speed-up's upper bound (its value without an interval)."""
    bounds = row.speedup_vs_baseline_ci95
    return float(bounds[1]) if bounds else float(row.speedup_vs_baseline or 0.0)


def write_plots(result: PlotView, directory: Path) -> list[Path]:
    """Write latency_vs_batch.png, throughput_vs_batch.png and accuracy_vs_speedup.png.

    The last only when some model has an accuracy or a top-1 agreement (--eval-data).
    """
    directory = Path(directory)
    written = [
        plot_latency(result, directory / "latency_vs_batch.png"),
        plot_throughput(result, directory / "throughput_vs_batch.png"),
    ]
    accuracy = plot_accuracy_vs_speedup(result, directory / "accuracy_vs_speedup.png")
    if accuracy is not None:
        written.append(accuracy)
    return written
