"""Options several commands share (convert, validate, bench, train, inspect; the release config
has their twins): how outputs are judged, how raw pixels become inputs, where artifacts run, the
signature, input shapes, --json.

Each is declared once here as an `Annotated` alias (after huggingface_hub's cli/_cli_utils.py),
so a command lists it in one line, its default beside it from trtconv.options:
`device: DeviceOpt = ValidateOptions.device`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from trtconv.calib.preprocessing import parse_channels
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import (
    Judging,
    ToleranceOptions,
    parse_role_options,
    parse_tolerance_options,
)
from trtconv.core.model_io import parse_input_values
from trtconv.options.shared import DEFAULT_BATCH_SIZES, DEFAULT_CONFIDENCE, PreprocessingOptions

OutputRoleOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--output-role",
        help="NAME=classes|binary|class_map|embedding|regression|tensor (binary:T for a "
        "threshold other than 0.5; embedding:C for a cosine bound other than 0.99; "
        "regression:where=SCORE to judge a box or landmark head only where the output SCORE "
        "says an object is there; class_map:mask=INPUT or embedding:mask=INPUT for the input "
        "marking valid tokens, mask=none for every position): what an output holds, which "
        "decides how it is judged (default: inferred). Repeatable.",
    ),
]
LabelsOutputOpt = Annotated[
    str | None,
    typer.Option(
        "--labels-output",
        help="The output the data's labels score (accuracy), when they fit several "
        "(default: the one output they fit).",
    ),
]
ToleranceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tolerance",
        help="Max abs error: X for every output (replacing the precision's default), NAME=X for "
        "one output; X,R adds a relative part (a value is within at X or at R x |reference|; fp32 "
        "has R 1e-5). At fp16, bf16 and int8 a sample is within when its values are, and the "
        "share of samples within must reach a minimum (the precision's, or NAME=X[,R]:MIN). "
        "Repeatable.",
    ),
]
AllowUnjudgedOpt = Annotated[
    bool,
    typer.Option(
        "--allow-unjudged",
        help="Exit 0 when some output has no check that can judge it (verdict 'not judged').",
    ),
]
ImageScaleOpt = Annotated[
    float | None,
    typer.Option(
        help="Raw pixels (image folders, uint8 arrays): x * scale + offset (default: the "
        "manifest, the model card, else 1/255)."
    ),
]
ImageOffsetOpt = Annotated[
    float | None, typer.Option(help="Raw pixels: offset added after scaling (default 0).")
]
ImageMeanOpt = Annotated[
    str | None,
    typer.Option(
        help="Raw pixels: per-channel mean subtracted after scale/offset, e.g. 0.485,0.456,0.406."
    ),
]
ImageStdOpt = Annotated[
    str | None,
    typer.Option(help="Raw pixels: per-channel std divided by last, e.g. 0.229,0.224,0.225."),
]
SplitOpt = Annotated[
    str | None,
    typer.Option(
        help="held-out (the fixed 20% the model never trained on) or all (every sample the "
        "conversion was not fitted to). Default: held-out for the model's training data (its "
        "model card names it), else all."
    ),
]
DeviceOpt = Annotated[
    str,
    typer.Option(
        help="Where artifacts run: auto (what the conversion recorded), cpu, cuda (ONNX "
        "Runtime's CUDA provider) or tensorrt (TensorRT, or ONNX Runtime's TensorRT provider)."
    ),
]
# deploy's and serve's admission control
QueueTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--queue-timeout-ms",
        help="How long a request may wait in the queue before it is "
        "answered UNAVAILABLE (HTTP 503) (default: from --latency-budget-ms; 0: no timeout).",
    ),
]
CONFIDENCE_HELP = (
    "How sure a verdict must be: a rate passes when its interval at this level clears the "
    "budget, fails when it cannot reach it, and is inconclusive (exit 4) when it straddles it; "
    "0: decide on the point figure."
)
ConfidenceOpt = Annotated[
    float | None,
    typer.Option(help=f"{CONFIDENCE_HELP} [default: {DEFAULT_CONFIDENCE}]", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]
BatchSizesOpt = Annotated[
    str,
    typer.Option(
        help="Comma-separated batch sizes (a model with a fixed batch, e.g. [1,32,32,3], runs "
        "at that batch unless you name others)."
    ),
]
SignatureOpt = Annotated[
    str | None,
    typer.Option(
        "--signature",
        help="The SavedModel signature to use (default serving_default; for an artifact, the "
        "one it was converted from). `trtconv inspect` lists them.",
    ),
]
InputShapeOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--input-shape",
        help="NAME=1x48x48x3: the full shape of an input with dynamic dimensions, for random "
        "data (when no data is given). Repeatable.",
    ),
]
InputValueOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--input-value",
        help="NAME=VALUE: the one value of an input the data does not hold, for every sample "
        "(a TF1 flag: is_training=false; VALUE true, false or a number). Recorded in the "
        "manifest; validate and bench apply it. Repeatable.",
    ),
]
CustomObjectsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--custom-objects",
        help="MODULE:NAME: a custom class a Keras file needs, imported from your code (the "
        "current directory is searched first). Repeatable.",
    ),
]
DEFAULT_BATCH_SIZES_TEXT = ",".join(map(str, DEFAULT_BATCH_SIZES))


def judging_options(
    roles: list[str] | None,
    tolerances: list[str] | None,
    allow_unjudged: bool,
    labels_output: str | None = None,
) -> tuple[ToleranceOptions, Judging]:
    """(--tolerance, whole; the Judging from --output-role, --allow-unjudged and
    --labels-output)."""
    judging = Judging(parse_role_options(roles), allow_unjudged, labels_output)
    return parse_tolerance_options(tolerances), judging


def preprocessing_options(
    scale: float | None,
    offset: float | None,
    mean: str | None,
    std: str | None,
    input_values: list[str] | None = None,
) -> PreprocessingOptions:
    """--image-scale/--image-offset/--image-mean/--image-std (and --input-value) as
    PreprocessingOptions."""
    return PreprocessingOptions(
        scale,
        offset,
        parse_channels(mean, "--image-mean"),
        parse_channels(std, "--image-std"),
        parse_input_values(input_values) or None,
    )


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """--batch-sizes '1,8,32' -> (1, 8, 32), each size once. Raises UsageError for anything but
    positive integers."""
    sizes: list[int] = []
    for item in text.split(","):
        if not item.strip():
            continue
        try:
            size = int(item.strip())
        except ValueError:
            raise UsageError(
                f"--batch-sizes takes integers like 1,8,32: '{item.strip()}' is not an integer."
            ) from None
        if size < 1:
            raise UsageError(f"--batch-sizes takes sizes of at least 1, found {size}.")
        if size not in sizes:
            sizes.append(size)
    if not sizes:
        raise UsageError(f"--batch-sizes takes positive integers like 1,8,32, found '{text}'.")
    return tuple(sizes)
