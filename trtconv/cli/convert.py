"""`trtconv convert`: SavedModel -> validated artifact (any registered backend, or the fastest
validated one with --backend best)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trtconv import api
from trtconv.cli._fp16 import render_fp16
from trtconv.cli._ladder import render_ladder
from trtconv.cli._options import (
    DEFAULT_BATCH_SIZES_TEXT,
    AllowUnjudgedOpt,
    ConfidenceOpt,
    CustomObjectsOpt,
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
    ToleranceOpt,
    judging_options,
    parse_batch_sizes,
    preprocessing_options,
)
from trtconv.cli._output import progress_bar, run_command
from trtconv.convert.convert_result import ConvertResult
from trtconv.convert.tournament import (
    FAILED_VALIDATION,
    INCONCLUSIVE_VALIDATION,
    NOT_AVAILABLE,
    WINNER,
    TournamentTable,
    absent_groups,
)
from trtconv.core.model_io import parse_input_shapes
from trtconv.options.convert import (
    DEFAULT_CALIB_METHOD,
    DEFAULT_CALIB_SAMPLES,
    DEFAULT_FALLBACK_TIME_LIMIT_S,
    DEFAULT_RANK_BATCH_SIZE,
    DEFAULT_RANK_DURATION_S,
    SHARED_CALIB_SAMPLES,
    Contest,
    ConvertOptions,
)
from trtconv.options.shared import DEFAULT_VALIDATE_SAMPLES
from trtconv.outputs.validation_result import Check, ValidationReport

MARKS = {
    (True, True): "[green]✓[/green]",
    (True, False): "[red]✗[/red]",
    (False, True): "·",  # reported, not judged by
    (False, False): "[yellow]?[/yellow]",  # the reason an output was not judged
}
VERDICTS = {
    "passed": "[green]passed[/green]",
    "failed": "[red]FAILED[/red]",
    "inconclusive": "[yellow]INCONCLUSIVE[/yellow] (more samples would decide it)",
}
INCONCLUSIVE_MARK = "[yellow]~[/yellow]"  # neither passed nor failed: its interval straddles


def render_validation(validation: ValidationReport, console: Console) -> None:
    """Each output with its role and its checks (✓ ✗ gating, ~ inconclusive, · reported, ? not
    judged), then the verdict (shared with `trtconv validate`)."""
    console.print(
        f"  validation on {validation.samples} samples of {escape(validation.data_source)}:"
    )
    checks = validation.checks
    for check in (c for c in checks if c.output is None):
        _print_check(console, check, check.name, "    ")
    for name, output in validation.outputs.items():
        console.print(
            f"    [bold]{escape(name)}[/bold]: {output.role} ({escape(output.role_source)})",
            highlight=False,
        )
        for check in (c for c in checks if c.output == name):
            _print_check(console, check, check.name.removeprefix(name).strip(), "      ")
    verdict = validation.verdict
    text = VERDICTS.get(verdict, f"[yellow]{verdict.upper()}[/yellow]")
    if verdict == "not judged" and validation.passed:
        text = "[yellow]not judged[/yellow] (allowed by --allow-unjudged)"
    console.print(f"  {text}")


def _print_check(console: Console, check: Check, name: str, indent: str) -> None:
    mark = MARKS[(check.gating, check.passed)]
    if check.inconclusive:
        mark = INCONCLUSIVE_MARK
    console.print(f"{indent}{mark} {escape(name)}: {escape(check.detail)}", highlight=False)


def render_tournament(table: TournamentTable, console: Console) -> None:
    """`--backend best`'s table: every candidate, its verdict and figures, and why it lost."""
    grid = Table(
        title=f"--backend best: timed at batch {table.batch_size}, {table.timing_text()} each; "
        "the fastest that passed validation wins",
        title_justify="left",
    )
    for column in ("candidate", "verdict", "samples/s", "p50 ms", "vs native", "top-1 agr."):
        grid.add_column(column, justify="left" if column in ("candidate", "verdict") else "right")
    grid.add_column("why", overflow="fold")
    for row in table.candidates:
        if row.verdict == NOT_AVAILABLE:
            continue
        winner = row.verdict == WINNER
        grid.add_row(
            f"[bold]{row.name}[/bold]" if winner else row.name,
            _verdict_text(row.verdict),
            _figure(row.throughput_per_s, "{:,.1f}"),
            _figure(row.latency_ms_p50, "{:.3f}"),
            _figure(row.speedup_vs_native, "{:.2f}x"),
            _figure(row.top1_agreement, "{:.4f}"),
            escape(row.reason),
        )
    console.print(grid)
    for names, reason, fix in absent_groups(table.candidates):
        console.print(
            f"  not available: [bold]{escape(names)}[/bold]: {escape(reason)}"
            + (f"; fix: {escape(fix)}" if fix else ""),
            highlight=False,
        )


def _verdict_text(verdict: str) -> str:
    """A candidate's verdict, coloured: inconclusive is not failed."""
    colour = {"winner": "green", INCONCLUSIVE_VALIDATION: "yellow", FAILED_VALIDATION: "red"}
    return f"[{colour[verdict]}]{verdict}[/{colour[verdict]}]" if verdict in colour else verdict


def _figure(value: Any, pattern: str) -> str:
    return "-" if value is None else pattern.format(value)


def render_conversion(result: ConvertResult, console: Console) -> None:
    """The human rendering of `convert`'s result (--backend best's table first)."""
    if result.tournament:
        render_tournament(result.tournament, console)
    if result.artifact is None or result.validation is None:
        verdicts = result.tournament.verdicts() if result.tournament else set()
        undecided = (
            " (some were inconclusive: their reasons say which data would decide them)"
            if INCONCLUSIVE_VALIDATION in verdicts
            else ""
        )
        console.print(f"[red]no artifact written[/red]: no candidate passed validation{undecided}")
        return
    console.print(
        f"[bold]{result.backend} {result.precision}[/bold] ({escape(result.backend_reason or '')})"
    )
    if result.manifest is not None:
        signature = result.manifest.model_signature
        console.print(
            f"  signature {escape(signature.name)}: {', '.join(signature.input_names)} -> "
            f"{', '.join(signature.output_names)}",
            highlight=False,
        )
    console.print(
        f"  converted in {result.conversion_seconds or 0:.1f} s, "
        f"{(result.artifact_size_bytes or 0) / 1e6:.2f} MB: {result.artifact}",
        highlight=False,
    )
    ladder = result.ladder
    if ladder is not None:
        render_ladder(ladder, console)
    if result.fp16:
        render_fp16(result.fp16, console)
    render_validation(result.validation, console)


SavedModelArg = Annotated[
    Path,
    typer.Argument(
        help="SavedModel directory (or a `trtconv train` output, or a Keras .keras/.h5 file) to "
        "convert."
    ),
]
PrecisionOpt = Annotated[
    str | None,
    typer.Option(
        help="fp32, tf32, fp16, bf16 or int8 (required, except with --backend best: then only "
        "this precision; default every precision)."
    ),
]
BackendOpt = Annotated[
    str,
    typer.Option(
        help="auto, best (every backend and precision that runs here: the fastest that passes "
        "validation wins), or a backend `trtconv doctor` lists."
    ),
]
OutputOpt = Annotated[
    Path | None, typer.Option(help="Artifact directory (default models/NAME-BACKEND-PRECISION).")
]
CalibDataOpt = Annotated[
    str | None,
    typer.Option(
        help="digits, PATH.npz, IMAGE_DIR or random (default: the model card's data). "
        "Without --validate-data, validation uses the samples nothing is fitted to (its "
        "held-out part when the model trained on it)."
    ),
]
ValidateDataOpt = Annotated[
    str | None,
    typer.Option(
        help="A separate validation source (digits, PATH.npz, IMAGE_DIR), used whole (its "
        "held-out part when the model trained on it)."
    ),
]
CalibSamplesOpt = Annotated[
    int | None,
    typer.Option(
        help=f"Calibration samples (int8; default {DEFAULT_CALIB_SAMPLES}, at most "
        f"{SHARED_CALIB_SAMPLES} of a source shared with validation)."
    ),
]
CalibMethodOpt = Annotated[str, typer.Option(help="minmax, entropy or percentile.")]
Int8TargetOpt = Annotated[
    str,
    typer.Option(
        help="Where an int8 CPU artifact will run: auto (this CPU's kind), vnni (x86 CPUs with "
        "VNNI/AMX) or portable (any x86: 7-bit weights, which CPUs without VNNI need)."
    ),
]
BuildBatchSizesOpt = Annotated[
    str,
    typer.Option(
        help="Batch sizes to build for, e.g. 1,8,32 (a model with a fixed batch, e.g. "
        "[1,32,32,3], converts at that batch unless you name others)."
    ),
]
ValidateSamplesOpt = Annotated[
    int, typer.Option(help="Samples to validate on (at most; those nothing is fitted to).")
]
MinTop1Opt = Annotated[
    float | None,
    typer.Option(help="Minimum top-1 agreement with the native model (default: the precision's)."),
]
MaxDropOpt = Annotated[
    float | None,
    typer.Option(help="Maximum accuracy drop on labelled data (default: the precision's)."),
]
FallbackOpt = Annotated[
    bool,
    typer.Option(
        "--fallback/--no-fallback",
        help="int8: when full int8 misses the accuracy budget, try other schemes and keep the "
        "most sensitive layers in float until it holds (--no-fallback: exit 4 instead).",
    ),
]
FallbackTimeOpt = Annotated[float, typer.Option(help="Seconds the int8 fallback may search for.")]
RankBatchOpt = Annotated[
    int, typer.Option(help="--backend best: the batch size candidates are timed and ranked at.")
]
RankDurationOpt = Annotated[
    float, typer.Option(help="--backend best: timed seconds per candidate (after warm-up).")
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(
        help="--backend best: threads per candidate when timing (default: the library's)."
    ),
]
ForceOpt = Annotated[bool, typer.Option(help="Replace an existing output.")]


def convert_cli(
    saved_model: SavedModelArg,
    precision: PrecisionOpt = None,
    backend: BackendOpt = ConvertOptions.backend,
    output: OutputOpt = None,
    calib_data: CalibDataOpt = None,
    calib_samples: CalibSamplesOpt = None,
    calib_method: CalibMethodOpt = DEFAULT_CALIB_METHOD,
    int8_target: Int8TargetOpt = ConvertOptions.int8_target,
    batch_sizes: BuildBatchSizesOpt = DEFAULT_BATCH_SIZES_TEXT,
    validate_samples: ValidateSamplesOpt = DEFAULT_VALIDATE_SAMPLES,
    validate_data: ValidateDataOpt = None,
    split: SplitOpt = None,
    tolerance: ToleranceOpt = None,
    min_top1_agreement: MinTop1Opt = None,
    max_accuracy_drop: MaxDropOpt = None,
    confidence: ConfidenceOpt = None,
    fallback: FallbackOpt = ConvertOptions.fallback,
    fallback_time_limit: FallbackTimeOpt = DEFAULT_FALLBACK_TIME_LIMIT_S,
    output_role: OutputRoleOpt = None,
    labels_output: LabelsOutputOpt = None,
    allow_unjudged: AllowUnjudgedOpt = False,
    image_scale: ImageScaleOpt = None,
    image_offset: ImageOffsetOpt = None,
    image_mean: ImageMeanOpt = None,
    image_std: ImageStdOpt = None,
    rank_batch_size: RankBatchOpt = DEFAULT_RANK_BATCH_SIZE,
    rank_duration: RankDurationOpt = DEFAULT_RANK_DURATION_S,
    threads: ThreadsOpt = None,
    signature: SignatureOpt = ConvertOptions.signature,
    input_shape: InputShapeOpt = None,
    input_value: InputValueOpt = None,
    custom_objects: CustomObjectsOpt = None,
    force: ForceOpt = False,
    json_output: JsonOpt = False,
) -> None:
    """Convert a SavedModel (or a train output, or a Keras file) at a precision, validate it
    against the native model, save it."""

    def work() -> ConvertResult:
        stated, judging = judging_options(output_role, tolerance, allow_unjudged, labels_output)
        options = ConvertOptions(
            saved_model, precision, backend, output, calib_data, calib_samples=calib_samples,
            calib_method=calib_method, batch_sizes=parse_batch_sizes(batch_sizes),
            validate_samples=validate_samples, tolerance=stated, force=force,
            preprocessing=preprocessing_options(
                image_scale, image_offset, image_mean, image_std, input_value
            ),
            int8_target=int8_target, fallback=fallback, fallback_time_limit_s=fallback_time_limit,
            min_top1_agreement=min_top1_agreement, max_accuracy_drop=max_accuracy_drop,
            judging=judging, contest=Contest(rank_batch_size, rank_duration, threads),
            confidence=confidence,
            signature=signature, input_shapes=parse_input_shapes(input_shape),
            validate_data=validate_data, split=split, custom_objects=tuple(custom_objects or ()),
        )  # options grouped by flag family: the command stays one screen # fmt: skip
        with progress_bar("converting") as progress:
            return api.convert(options, progress)

    run_command(work, json_mode=json_output, render=render_conversion)
