"""`trtconv inspect`: describe a SavedModel, a Keras file, a trtconv artifact or an ONNX file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from trtconv.cli._options import CustomObjectsOpt, JsonOpt, SignatureOpt
from trtconv.cli._output import run_command
from trtconv.inspect.pipeline import (
    ArtifactInspection,
    InspectResult,
    OnnxInspection,
    SavedModelInspection,
    inspect_path,
)
from trtconv.model.savedmodel import ModelCard

TOP_OPS = 15  # the human view shows the most common ops; --json has them all
ModelArg = Annotated[
    Path, typer.Argument(help="SavedModel dir, Keras file, trtconv artifact dir or .onnx file.")
]


def _size(size_bytes: int) -> str:
    return f"{size_bytes / (1024 * 1024):.2f} MiB"


def _render_histogram(histogram: dict[str, int], console: Console) -> None:
    table = Table(title=f"op histogram ({sum(histogram.values())} ops, {len(histogram)} types)")
    table.add_column("op")
    table.add_column("count", justify="right")
    for op, count in list(histogram.items())[:TOP_OPS]:
        table.add_row(op, str(count))
    if len(histogram) > TOP_OPS:
        table.add_row(f"... {len(histogram) - TOP_OPS} more types (see --json)", "")
    console.print(table)


def _render_saved_model(result: SavedModelInspection, console: Console) -> None:
    console.print(f"[bold]SavedModel[/bold] {result.path}  ({_size(result.size_bytes)})")
    for key, signature in result.signatures.items():
        console.print(f"  signature [bold]{key}[/bold]")
        for spec in signature.inputs:
            console.print(f"    in  {spec.describe()}")
        for spec in signature.outputs:
            console.print(f"    out {spec.describe()}")
    if result.graph_dtypes is not None and result.op_histogram is not None:
        console.print(f"  graph dtypes: {', '.join(result.graph_dtypes)}")
        _render_histogram(result.op_histogram, console)
    if result.model_card:
        card = ModelCard.from_json(result.model_card)
        accuracy = card.test_accuracy if card.test_accuracy is not None else float("nan")
        console.print(
            f"  model card: {card.model} trained with {card.amp_policy}, "
            f"test accuracy {accuracy:.4f}, {len(card.labels)} labels"
        )


def _render_onnx(result: OnnxInspection, console: Console) -> None:
    opsets = ", ".join(f"{domain} {version}" for domain, version in result.opsets.items())
    console.print(f"[bold]ONNX[/bold] {result.path}  ({_size(result.size_bytes)})")
    console.print(f"  opsets: {opsets}   producer: {result.producer}")
    for spec in result.inputs:
        console.print(f"    in  {spec.describe()}")
    for spec in result.outputs:
        console.print(f"    out {spec.describe()}")
    _render_histogram(result.op_histogram, console)


def render_inspect(result: InspectResult, console: Console) -> None:
    """What `inspect` found, by kind; an artifact's payload described below its manifest."""
    if isinstance(result, ArtifactInspection):
        console.print(
            f"[bold]artifact[/bold] {result.path}: backend {result.backend}, precision "
            f"{result.precision}, payload {result.payload}, status {result.status} "
            f"({_size(result.size_bytes)})"
        )
        console.print(f"  source: {(result.source_model or {}).get('path')}")
        if result.payload_details is not None:
            render_inspect(result.payload_details, console)
    elif isinstance(result, OnnxInspection):
        _render_onnx(result, console)
    elif isinstance(result, SavedModelInspection):
        _render_saved_model(result, console)


def inspect_cli(
    model: ModelArg,
    signature: SignatureOpt = None,
    custom_objects: CustomObjectsOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Show signatures, inputs/outputs, op histogram, size and model card or manifest."""
    classes = tuple(custom_objects or ())
    run_command(
        lambda: inspect_path(model, signature, classes),
        json_mode=json_output,
        render=render_inspect,
    )
