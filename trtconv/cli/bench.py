"""`trtconv bench`: native and converted models side by side, one table, same inputs and harness."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from trtconv import api
from trtconv.bench.harness import MIN_ITERATIONS
from trtconv.calib.readers import RANDOM
from trtconv.cli._options import (
    DEFAULT_BATCH_SIZES_TEXT,
    BatchSizesOpt,
    CustomObjectsOpt,
    DeviceOpt,
    ImageMeanOpt,
    ImageOffsetOpt,
    ImageScaleOpt,
    ImageStdOpt,
    InputShapeOpt,
    InputValueOpt,
    JsonOpt,
    LabelsOutputOpt,
    OutputRoleOpt,
    SignatureOpt,
    SplitOpt,
    judging_options,
    parse_batch_sizes,
    preprocessing_options,
)
from trtconv.cli._output import progress_bar, run_command, stderr_console
from trtconv.cli._server_bench import (
    CompareBatching,
    LatencyBudget,
    Offered,
    Scenario,
    SearchRuns,
    ShadowRate,
    run_server_scenario,
)
from trtconv.core.model_io import parse_input_shapes
from trtconv.measure.bench_result import BenchResult
from trtconv.options.bench import (
    BASELINE_SOURCE,
    BASELINES,
    DEFAULT_BENCH_ROUNDS,
    DEFAULT_DURATION_S,
    DEFAULT_WARMUP_ITERATIONS,
    BenchOptions,
)
from trtconv.options.server_bench import DEFAULT_SEARCH_RUNS, SCENARIOS
from trtconv.options.shared import DEFAULT_DEVICE
from trtconv.report.writers import table_headers, table_rows

Models = Annotated[
    list[Path],
    typer.Argument(
        help="SavedModel directories, Keras files and/or trtconv artifact directories.",
        show_default=False,
    ),
]
Warmup = Annotated[
    int | None,
    typer.Option(help=f"Warm-up iterations per batch size (default {DEFAULT_WARMUP_ITERATIONS})."),
]
WarmupS = Annotated[float | None, typer.Option(help="Warm-up seconds per batch size instead.")]
Iterations = Annotated[int | None, typer.Option(help="Timed iterations per batch size.")]
Duration = Annotated[
    float | None,
    typer.Option(
        help=f"Timed seconds per batch size instead (default {DEFAULT_DURATION_S:g}, at least "
        f"{MIN_ITERATIONS} iterations)."
    ),
]
Rounds = Annotated[
    int,
    typer.Option(
        min=1,
        help="Rounds the timed budget is split into, the models interleaved round by round; the "
        "95% intervals are bootstrapped over them (1: no intervals).",
    ),
]
Threads = Annotated[
    int | None, typer.Option(help="Intra-op threads per model (default: the library's).")
]
Data = Annotated[str, typer.Option(help="digits, PATH.npz, an image folder, or random.")]
EvalData = Annotated[
    str | None,
    typer.Option(
        help="Labelled data (digits, PATH.npz with y, image folder): accuracy and agreement, "
        "each output judged by its role, on the held-out split (see --split)."
    ),
]
Xla = Annotated[bool, typer.Option("--xla", help="Also run each SavedModel compiled with XLA.")]
Throughput = Annotated[
    bool,
    typer.Option(
        "--throughput",
        help="Also run each artifact whose backend has a throughput mode in it (OpenVINO: "
        "THROUGHPUT hint, each batch split across parallel streams).",
    ),
]
Baseline = Annotated[
    str,
    typer.Option(
        help=f"{' or '.join(BASELINES)}: what speedups are over. source: the first SavedModel "
        "given, else the first artifact's source model, measured too; first: the first model "
        "given, nothing added (an artifact against another, no TensorFlow needed).",
    ),
]
Report = Annotated[
    Path | None, typer.Option(help="Write results.json/csv, report.md and PNGs here.")
]
Force = Annotated[bool, typer.Option(help="Replace an existing --report directory.")]


# Columns of the table when stdout is not a terminal (the speed-up's interval included).
PIPED_WIDTH = 148


def render_table(result: BenchResult, console: Console) -> None:
    """One rich table (models × batch sizes) on stdout; the baseline and overhead under it."""
    if not console.is_terminal:
        # Piped output defaults to 80 columns, which would fold every cell: give the table room.
        console = Console(file=console.file, width=max(console.width, PIPED_WIDTH))
    table = Table(
        title="trtconv bench",
        caption=(
            f"* baseline: {result.baseline} ({result.baseline_model}), {result.baseline_reason}"
        ),
    )
    for index, header in enumerate(table_headers(compact=True)):
        table.add_column(header, justify="left" if index < 2 else "right")
    previous = None
    for cells, row in zip(table_rows(result, compact=True), result.results, strict=True):
        if previous is not None and row.label != previous:
            table.add_section()
        previous = row.label
        table.add_row(*cells)
    console.print(table)
    overhead = result.harness_overhead_ms
    order = " → ".join(result.order)
    rounds = result.settings.planned_rounds
    console.print(
        f"Measured in {rounds} interleaved round(s) per batch size, one process each: {order}"
    )
    if overhead is not None:
        console.print(f"Harness overhead per call: {overhead * 1000:.1f} µs (do-nothing runner)")
    if result.report is not None:
        console.print(f"Report: {Path(result.report['markdown']).parent}")


def print_warnings(result: BenchResult) -> None:
    """Warnings go to stderr, in human and JSON mode alike."""
    console = stderr_console()
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)


def bench_cli(
    models: Models,
    batch_sizes: BatchSizesOpt = DEFAULT_BATCH_SIZES_TEXT,
    warmup: Warmup = None,
    warmup_s: WarmupS = None,
    iterations: Iterations = None,
    duration: Duration = None,
    rounds: Rounds = DEFAULT_BENCH_ROUNDS,
    threads: Threads = None,
    data: Data = RANDOM,
    eval_data: EvalData = None,
    split: SplitOpt = None,
    output_role: OutputRoleOpt = None,
    labels_output: LabelsOutputOpt = None,
    image_scale: ImageScaleOpt = None,
    image_offset: ImageOffsetOpt = None,
    image_mean: ImageMeanOpt = None,
    image_std: ImageStdOpt = None,
    xla: Xla = False,
    device: DeviceOpt = DEFAULT_DEVICE,
    throughput: Throughput = False,
    baseline: Baseline = BASELINE_SOURCE,
    report: Report = None,
    force: Force = False,
    signature: SignatureOpt = BenchOptions.signature,
    input_shape: InputShapeOpt = None,
    input_value: InputValueOpt = None,
    custom_objects: CustomObjectsOpt = None,
    scenario: Scenario = SCENARIOS[0],
    latency_budget_ms: LatencyBudget = None,
    search_runs: SearchRuns = DEFAULT_SEARCH_RUNS,
    compare_batching: CompareBatching = False,
    offered: Offered = None,
    shadow: ShadowRate = None,
    json_output: JsonOpt = False,
) -> None:
    """Benchmark SavedModels and converted artifacts side by side (latency, throughput, speedup)."""
    if scenario != SCENARIOS[0]:  # the server scenario: its own options and result
        server = (latency_budget_ms, duration, search_runs, compare_batching, offered, shadow)
        return run_server_scenario(scenario, models, *server, json_output)

    def work() -> BenchResult:
        options = BenchOptions(
            models=tuple(models), batch_sizes=parse_batch_sizes(batch_sizes), warmup=warmup,
            warmup_s=warmup_s, iterations=iterations, duration_s=duration, rounds=rounds,
            threads=threads, data=data, eval_data=eval_data, xla=xla, throughput=throughput,
            report=report, force=force, device=device,
            judging=judging_options(output_role, None, False, labels_output)[1],
            preprocessing=preprocessing_options(
                image_scale, image_offset, image_mean, image_std, input_value
            ),
            split=split, signature=signature, input_shapes=parse_input_shapes(input_shape),
            baseline=baseline, custom_objects=tuple(custom_objects or ()),
        )  # options grouped by flag family: the command stays one screen # fmt: skip
        with progress_bar("benchmarking") as progress:
            result = api.bench(options, progress)
        print_warnings(result)
        return result

    run_command(work, json_mode=json_output, render=render_table)
