"""Options convert, validate, bench (and the release config) share: how outputs are judged and
how raw pixels become inputs. Declared once here; each command lists them in its signature."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from trtconv.cli._output import DEVICE_HELP
from trtconv.options import DEFAULT_BATCH_SIZES

if TYPE_CHECKING:
    from trtconv.calib.contract import PreprocessingOptions
    from trtconv.outputs.roles import Judging

OUTPUT_ROLE = typer.Option(
    None,
    "--output-role",
    help="NAME=classes|binary|regression|tensor (binary:T for a threshold other than 0.5): "
    "what an output holds, which decides how it is judged (default: inferred). Repeatable.",
)
TOLERANCE = typer.Option(
    None,
    "--tolerance",
    help="Max abs error: X for every output (replacing the precision's default), NAME=X for "
    "one output. Repeatable.",
)
ALLOW_UNJUDGED = typer.Option(
    False,
    "--allow-unjudged",
    help="Exit 0 when some output has no check that can judge it (verdict 'not judged').",
)
IMAGE_SCALE = typer.Option(
    None, help="Raw pixels (image folders, uint8 arrays): x * scale + offset (default: the "
    "manifest, the model card, else 1/255).",
)  # fmt: skip
IMAGE_OFFSET = typer.Option(None, help="Raw pixels: offset added after scaling (default 0).")
IMAGE_MEAN = typer.Option(
    None, help="Raw pixels: per-channel mean subtracted after scale/offset, e.g. 0.485,0.456,0.406."
)
IMAGE_STD = typer.Option(
    None, help="Raw pixels: per-channel std divided by last, e.g. 0.229,0.224,0.225."
)
SPLIT = typer.Option(None, help="held-out (default: samples the model never trained on) or all.")

# Declared as types (after huggingface_hub's cli): `name: Alias = default`, one line each.
BatchSizes = Annotated[str, typer.Option(help="Comma-separated batch sizes.")]
DEFAULT_BATCH_SIZES_TEXT = ",".join(map(str, DEFAULT_BATCH_SIZES))
Device = Annotated[str, typer.Option(help=DEVICE_HELP)]
JsonOutput = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def judging_options(
    roles: list[str] | None, tolerances: list[str] | None, allow_unjudged: bool
) -> tuple[float | None, Judging]:
    """(--tolerance X, the Judging from --output-role, --tolerance NAME=X, --allow-unjudged)."""
    from trtconv.outputs.roles import Judging, parse_role_options, parse_tolerance_options

    overall, per_output = parse_tolerance_options(tolerances)
    return overall, Judging(parse_role_options(roles), per_output, allow_unjudged)


def preprocessing_options(
    scale: float | None, offset: float | None, mean: str | None, std: str | None
) -> PreprocessingOptions:
    """--image-scale/--image-offset/--image-mean/--image-std as PreprocessingOptions."""
    from trtconv.calib.contract import PreprocessingOptions, parse_channels

    return PreprocessingOptions(
        scale, offset, parse_channels(mean, "--image-mean"), parse_channels(std, "--image-std")
    )
