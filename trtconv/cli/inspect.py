"""`trtconv inspect`: describe a SavedModel, a trtconv artifact or an ONNX file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from trtconv.cli._output import run_command

TOP_OPS = 15  # the human view shows the most common ops; --json has them all


def _size(size_bytes: int) -> str:
    return f"{size_bytes / (1024 * 1024):.2f} MiB"


def _tensor(spec: dict[str, Any]) -> str:
    dims = ",".join("?" if d is None else str(d) for d in spec["shape"])
    return f"{spec['name']}: {spec['dtype']}[{dims}]"


def _render_histogram(histogram: dict[str, int], console: Console) -> None:
    table = Table(title=f"op histogram ({sum(histogram.values())} ops, {len(histogram)} types)")
    table.add_column("op")
    table.add_column("count", justify="right")
    for op, count in list(histogram.items())[:TOP_OPS]:
        table.add_row(op, str(count))
    if len(histogram) > TOP_OPS:
        table.add_row(f"... {len(histogram) - TOP_OPS} more types (see --json)", "")
    console.print(table)


def _render_saved_model(result: dict[str, Any], console: Console) -> None:
    console.print(f"[bold]SavedModel[/bold] {result['path']}  ({_size(result['size_bytes'])})")
    for key, signature in result["signatures"].items():
        console.print(f"  signature [bold]{key}[/bold]")
        for spec in signature["inputs"]:
            console.print(f"    in  {_tensor(spec)}")
        for spec in signature["outputs"]:
            console.print(f"    out {_tensor(spec)}")
    if "graph_dtypes" in result:
        console.print(f"  graph dtypes: {', '.join(result['graph_dtypes'])}")
        _render_histogram(result["op_histogram"], console)
    card = result.get("model_card")
    if card:
        amp = card.get("amp", {})
        console.print(
            f"  model card: {card.get('model')} trained with {amp.get('policy')}, "
            f"test accuracy {card.get('test_accuracy', float('nan')):.4f}, "
            f"{len(card.get('labels', []))} labels"
        )


def _render_onnx(result: dict[str, Any], console: Console) -> None:
    opsets = ", ".join(f"{domain} {version}" for domain, version in result["opsets"].items())
    console.print(f"[bold]ONNX[/bold] {result['path']}  ({_size(result['size_bytes'])})")
    console.print(f"  opsets: {opsets}   producer: {result['producer']}")
    for spec in result["inputs"]:
        console.print(f"    in  {_tensor(spec)}")
    for spec in result["outputs"]:
        console.print(f"    out {_tensor(spec)}")
    _render_histogram(result["op_histogram"], console)


def render_inspect(result: dict[str, Any], console: Console) -> None:
    if result["kind"] == "artifact":
        console.print(
            f"[bold]artifact[/bold] {result['path']}: backend {result['backend']}, precision "
            f"{result['precision']}, payload {result['payload']}, status {result['status']} "
            f"({_size(result['size_bytes'])})"
        )
        source = result.get("source_model") or {}
        console.print(f"  source: {source.get('path')}")
        details = result.get("payload_details")
        if details:
            render_inspect(details, console)
    elif result["kind"] == "onnx":
        _render_onnx(result, console)
    else:
        _render_saved_model(result, console)


def inspect_cli(
    model: Path = typer.Argument(..., help="SavedModel dir, trtconv artifact dir or .onnx file."),
    json_output: bool = typer.Option(False, "--json", help="Print one JSON document."),
) -> None:
    """Show signatures, inputs/outputs, op histogram, size and model card or manifest."""

    def work() -> dict[str, Any]:
        from trtconv import api

        return api.inspect(model)

    run_command(work, json_mode=json_output, render=render_inspect)
