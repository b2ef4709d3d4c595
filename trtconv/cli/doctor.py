"""`trtconv doctor`: libraries, devices and the conversions this machine can run."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trtconv.cli._options import JsonOpt
from trtconv.cli._output import run_command
from trtconv.doctor.pipeline import DoctorReport, doctor
from trtconv.protocol.support import Support

YES, NO = "[green]yes[/green]", "[red]no[/red]"
QuickOpt = Annotated[
    bool,
    typer.Option("--quick", help="Skip asking TensorFlow itself (a subprocess, a few seconds)."),
]


def _text(value: Any, missing: str = "[red]not installed[/red]") -> str:
    return missing if value is None else escape(str(value))


def render_report(report: DoctorReport, console: Console) -> None:
    """Print the doctor report as rich tables."""
    console.print(_libraries_table(report))
    console.print(_devices_table(report))
    console.print(_conversions_table(report.conversions))


def _libraries_table(report: DoctorReport) -> Table:
    tf = report.tensorflow
    table = Table(title="Libraries", title_justify="left")
    table.add_column("component")
    table.add_column("version / state")
    table.add_column("details", overflow="fold")
    table.add_row("Python", report.python.version, report.python.executable)
    build = (
        f"is_cuda_build={tf.is_cuda_build} is_tensorrt_build={tf.is_tensorrt_build} "
        f"CUDA {tf.cuda_version} cuDNN {tf.cudnn_version}"
    )
    if tf.gpus_seen is not None:
        build += f"; sees {tf.gpus_seen} GPU(s)"
    table.add_row("TensorFlow", _text(tf.version), escape(tf.reason or build))
    table.add_row("ONNX", _text(report.onnx.version), "")
    table.add_row("tf2onnx", _text(report.tf2onnx.version), "")
    # The backends' (and serving's) sections give their own rows.
    for section in report.sections.values():
        for row in section.library_rows():
            state = _text(row.version) if row.usable is None else YES if row.usable else NO
            table.add_row(escape(row.component), state, escape(row.details))
    return table


def _devices_table(report: DoctorReport) -> Table:
    table = Table(title="Devices", title_justify="left")
    for column in ("device", "compute capability", "TF32", "FP16", "INT8", "details"):
        table.add_column(column)
    for gpu in report.gpus:
        table.add_row(
            escape(gpu.name),
            gpu.compute_capability,
            YES if gpu.tf32 else NO,
            YES if gpu.fp16 else NO,
            YES if gpu.int8 else NO,
            f"{gpu.memory_mb:.0f} MB, driver {gpu.driver}",
        )
    if not report.gpus:
        table.add_row("GPU", "-", "-", "-", "-", "[red]none (nvidia-smi lists no GPU)[/red]")
    cpu = report.cpu
    features = ", ".join(name for name, present in cpu.features.items() if present)
    table.add_row("CPU", "-", "-", "-", "-", escape(f"{cpu.model}, {cpu.logical_cores} cores"))
    table.add_row("", "", "", "", "", f"features: {features or 'none of note'}")
    table.add_row("", "", "", "", "", escape(f"int8: {cpu.int8_class}: {cpu.int8_note}"))
    return table


def _conversions_table(conversions: list[Support]) -> Table:
    """One row per backend, one column per precision; each distinct refusal said once."""
    precisions = list(dict.fromkeys(row.precision for row in conversions))
    table = Table(title="Conversions possible here", title_justify="left")
    table.add_column("backend")
    for precision in precisions:
        table.add_column(precision)
    table.add_column("why not, and the fix", overflow="fold")
    for backend in dict.fromkeys(row.backend for row in conversions):
        rows = [row for row in conversions if row.backend == backend]
        refusals: dict[tuple[str, str], list[str]] = {}
        for row in rows:
            if not row.ok:
                refusals.setdefault((row.reason, row.fix), []).append(row.precision)
        notes = [
            f"[bold]{', '.join(which)}[/bold]: {escape(reason)}\n  [bold]fix:[/bold] {escape(fix)}"
            for (reason, fix), which in refusals.items()
        ]
        marks = [YES if row.ok else NO for row in rows]
        table.add_row(backend, *marks, "\n".join(notes) or "")
    return table


def doctor_cli(quick: QuickOpt = False, json_output: JsonOpt = False) -> None:
    """Report libraries, GPUs, CPU features and which conversions can run here (always exit 0)."""
    run_command(lambda: doctor(deep=not quick), json_mode=json_output, render=render_report)
