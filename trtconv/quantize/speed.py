"""What int8 buys: a short in-process timing of the fp32, full int8 and chosen ONNX models.

Not a benchmark (`trtconv bench` is: separate processes, warm-up by time, percentiles): a few
runs per model and batch size on ONNX Runtime's CPU provider, enough to say what keeping some
layers in float cost and whether int8 is faster than fp32 at all at a batch size.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from trtconv.calib.sources import ArraySet
from trtconv.core.precision import Precision
from trtconv.model.paths import ARTIFACT
from trtconv.onnxlib.session import OrtRunner
from trtconv.quantize.ladder_result import LadderSpeed, SpeedRow

MIN_SECONDS = 0.3
MIN_RUNS = 5
WARMUP_RUNS = 2
# Below this ratio to fp32, the note says int8 buys nothing at that batch size: a short timing
# on a shared machine does not resolve a few per cent.
NO_GAIN_BELOW = 1.05
FP32, FULL_INT8, CHOSEN = "fp32", "full_int8", "chosen"


def batch_of(data: ArraySet, size: int) -> dict[str, np.ndarray]:
    """The first `size` samples of `data`, repeated when it holds fewer."""
    repeats = -(-size // len(data))
    return {
        name: np.concatenate([array] * repeats)[:size] if repeats > 1 else array[:size]
        for name, array in data.inputs.items()
    }


def median_latency_ms(runner: Any, feeds: dict[str, np.ndarray]) -> float:
    """Median wall time of `runner.infer(feeds)` over at least MIN_RUNS runs and MIN_SECONDS."""
    for _ in range(WARMUP_RUNS):
        runner.infer(feeds)
    times: list[float] = []
    began = time.perf_counter()
    while len(times) < MIN_RUNS or time.perf_counter() - began < MIN_SECONDS:
        started = time.perf_counter()
        runner.infer(feeds)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000.0


def speed_reserve_s(timed: bool, batch_sizes: Sequence[int]) -> float:
    """Seconds the ladder keeps for `time_models` at its end (none when not `timed`): up to three
    models at each batch size, each timed for MIN_SECONDS, with as long again for sessions,
    warm-up and runs slower than the timing window."""
    return 3 * len(batch_sizes) * 2 * MIN_SECONDS if timed else 0.0


def time_models(
    models: dict[str, Path], data: ArraySet, batch_sizes: tuple[int, ...]
) -> LadderSpeed:
    """Time each ONNX model of `models` ({label: path}) at each batch size on `data`'s inputs;
    `models` holds FP32 and FULL_INT8, and CHOSEN when the ladder picked another model.
    """

    latencies: dict[str, dict[int, float]] = {}
    for label, path in models.items():
        with OrtRunner(path) as runner:
            latencies[label] = {
                b: median_latency_ms(runner, batch_of(data, b)) for b in batch_sizes
            }
    rows = [_row(latencies, size) for size in batch_sizes]
    method = (
        f"in-process ONNX Runtime CPU, median of >= {MIN_RUNS} runs and {MIN_SECONDS} s per "
        "model and batch size (`trtconv bench` measures properly)"
    )
    return LadderSpeed(method, rows, no_gain_notes(rows))


def _row(latencies: dict[str, dict[int, float]], size: int) -> SpeedRow:
    fp32, full = latencies[FP32][size], latencies[FULL_INT8][size]
    chosen = latencies.get(CHOSEN, latencies[FULL_INT8])[size]
    picked = latencies.get(CHOSEN)
    return SpeedRow(
        batch_size=size,
        fp32_latency_ms=round(fp32, 4),
        full_int8_latency_ms=round(full, 4),
        chosen_latency_ms=None if picked is None else round(picked[size], 4),
        speedup_vs_fp32=round(fp32 / chosen, 3),
        full_int8_speedup_vs_fp32=round(fp32 / full, 3),
        slowdown_vs_full_int8=round(chosen / full, 3),
    )


def no_gain_notes(rows: list[SpeedRow]) -> list[str]:
    """A sentence naming the batch sizes where the int8 model is not clearly faster than fp32
    (none when it is faster at all of them)."""
    slow = [row for row in rows if row.speedup_vs_fp32 < NO_GAIN_BELOW]
    if not slow:
        return []
    where = ", ".join(f"{row.batch_size} ({row.speedup_vs_fp32:.2f}x fp32)" for row in slow)
    return [
        f"int8 buys nothing on this CPU at batch {where} in a short timing: fp32 may be the "
        "better artifact there (`trtconv bench` measures both)"
    ]


class Measured(Protocol):
    """What the warnings read of a bench result row (trtconv.measure.bench_result.BenchRow)."""

    @property
    def label(self) -> str: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def throughput_per_s(self) -> float: ...
    @property
    def device(self) -> str | None: ...


def bench_no_gain_warnings(models: Sequence[Any], rows: Sequence[Measured]) -> list[str]:
    """`trtconv bench`: one line per int8 artifact not clearly faster than an fp32 artifact of
    the same source model and backend, naming the batch sizes.

    `models` are bench entries (label, kind, backend, precision, source_model); `rows` the
    result rows (label, batch_size, throughput_per_s).
    """
    throughput = {(row.label, row.batch_size): row.throughput_per_s for row in rows}
    devices = {row.label: row.device or "cpu" for row in rows}
    sizes = sorted({row.batch_size for row in rows})
    artifacts = [m for m in models if m.kind == ARTIFACT and m.source_model is not None]
    warnings = []
    for int8 in (m for m in artifacts if m.precision == Precision.INT8):
        for fp32 in artifacts:
            if fp32.precision != Precision.FP32 or (fp32.backend, fp32.source_model) != (
                int8.backend,
                int8.source_model,
            ):
                continue
            ratios = [
                (size, throughput[int8.label, size] / throughput[fp32.label, size])
                for size in sizes
                if (int8.label, size) in throughput and (fp32.label, size) in throughput
            ]
            slow = [f"{size} ({ratio:.2f}x)" for size, ratio in ratios if ratio < NO_GAIN_BELOW]
            if slow:
                device = devices.get(int8.label, "cpu")
                where = "this CPU" if device == "cpu" else f"device {device}"
                warnings.append(
                    f"{int8.label}: int8 buys nothing over {fp32.label} on {where} at batch "
                    f"{', '.join(slow)} its throughput: the fp32 artifact is as good there."
                )
    return warnings
