"""`trtconv validate`: a converted artifact against its native SavedModel on held-out data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from trtconv.cli._options import (
    CONFIDENCE_HELP,
    AllowUnjudgedOpt,
    DeviceOpt,
    ImageMeanOpt,
    ImageOffsetOpt,
    ImageScaleOpt,
    ImageStdOpt,
    InputValueOpt,
    JsonOpt,
    LabelsOutputOpt,
    OutputRoleOpt,
    SignatureOpt,
    SplitOpt,
    ToleranceOpt,
    judging_options,
    preprocessing_options,
)
from trtconv.cli._output import run_command
from trtconv.cli.convert import render_validation
from trtconv.core.data_contract import DataContract
from trtconv.options.shared import DEFAULT_CONFIDENCE, DEFAULT_VALIDATE_SAMPLES
from trtconv.options.validate import ValidateOptions
from trtconv.validate.pipeline import ValidateResult, validate

ArtifactArg = Annotated[Path, typer.Argument(help="Artifact directory (holds manifest.json).")]
ReferenceOpt = Annotated[
    Path | None,
    typer.Option(
        help="SavedModel (or Keras file) to compare with (default: the manifest's source"
        " model), or another trtconv artifact (e.g. the fp32 one, run where it was converted"
        " for: checks a GPU run on a machine without TensorFlow)."
    ),
]
DataOpt = Annotated[
    str | None,
    typer.Option(
        help="digits, PATH.npz, IMAGE_DIR or random (default: the data the artifact was "
        "validated on, from its manifest)."
    ),
]
SamplesOpt = Annotated[
    int | None,
    typer.Option(min=1, help=f"Samples to validate on (default {DEFAULT_VALIDATE_SAMPLES})."),
]
CurrentRulesOpt = Annotated[
    bool,
    typer.Option(
        "--current-rules",
        help="Judge by this trtconv's rules (the precision's defaults, under the options given) "
        "instead of those the artifact's manifest recorded when it was converted.",
    ),
]
ValidateConfidenceOpt = Annotated[
    float | None,
    typer.Option(
        help=f"{CONFIDENCE_HELP} Default: the level the artifact's manifest was validated at "
        f"(else {DEFAULT_CONFIDENCE:g})."
    ),
]


def render(result: ValidateResult, console: Console) -> None:
    """The artifact and its reference, the data contract, every check and the verdict."""
    console.print(
        f"[bold]{result.artifact}[/bold] ({result.backend} {result.precision} on "
        f"{result.device or 'cpu'}) vs {result.reference}",
        highlight=False,
    )
    render_contract(result.data_contract, console)
    render_validation(result, console)
    status = result.manifest_status
    if status not in ("unvalidated", result.verdict):
        console.print(
            f"  [yellow]its manifest says the conversion's validation {status.upper()}[/yellow]"
        )


def render_contract(contract: DataContract, console: Console) -> None:
    """Data, split and pixel preprocessing (for a model with an image input), each with where
    it came from."""
    console.print(
        f"  data {escape(str(contract.data))} ({contract.data_from or '-'}), "
        f"{contract.split} split ({contract.split_from or '-'}); {escape(contract.line)}",
        highlight=False,
    )


def validate_cli(
    artifact: ArtifactArg,
    reference: ReferenceOpt = None,
    data: DataOpt = None,
    split: SplitOpt = None,
    samples: SamplesOpt = None,
    tolerance: ToleranceOpt = None,
    confidence: ValidateConfidenceOpt = None,
    current_rules: CurrentRulesOpt = False,
    output_role: OutputRoleOpt = None,
    labels_output: LabelsOutputOpt = None,
    allow_unjudged: AllowUnjudgedOpt = False,
    image_scale: ImageScaleOpt = None,
    image_offset: ImageOffsetOpt = None,
    image_mean: ImageMeanOpt = None,
    image_std: ImageStdOpt = None,
    input_value: InputValueOpt = None,
    device: DeviceOpt = ValidateOptions.device,
    signature: SignatureOpt = ValidateOptions.signature,
    json_output: JsonOpt = False,
) -> None:
    """Compare a converted artifact with its native model; exit 4 when it fails, is
    inconclusive or an output is not judged."""

    def work() -> ValidateResult:
        stated, judging = judging_options(output_role, tolerance, allow_unjudged, labels_output)
        pixels = (image_scale, image_offset, image_mean, image_std)
        preprocessing = preprocessing_options(*pixels, input_value)
        options = ValidateOptions(
            artifact=artifact,
            reference=reference,
            data=data,
            samples=samples,
            tolerance=stated,
            device=device,
            judging=judging,
            preprocessing=preprocessing,
            split=split,
            confidence=confidence,
            signature=signature,
            current_rules=current_rules,
        )
        return validate(options)

    run_command(work, json_mode=json_output, render=render)
