"""`trtconv serve`: a Triton server (PyTriton) with dynamic batching in front of one model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from trtconv.cli._options import DeviceOpt, JsonOpt
from trtconv.cli._output import run_command
from trtconv.serving.options import ServeOptions
from trtconv.serving.results import ServeResult
from trtconv.serving.server import serve

ModelArg = Annotated[Path, typer.Argument(help="Artifact directory or SavedModel to serve.")]
NameOpt = Annotated[
    str | None, typer.Option(help="Model name clients use (default: the folder's name).")
]
HttpPortOpt = Annotated[
    int | None, typer.Option(help="Loopback port of the HTTP endpoint (default: a free one).")
]
GrpcPortOpt = Annotated[
    int | None, typer.Option(help="Loopback port of the gRPC endpoint (default: a free one).")
]
MetricsPortOpt = Annotated[
    int | None,
    typer.Option(help="Loopback port of Triton's metrics endpoint (default: a free one)."),
]
MaxBatchOpt = Annotated[int, typer.Option(min=1, help="Largest batch the dynamic batcher forms.")]
QueueDelayOpt = Annotated[
    int,
    typer.Option(
        "--queue-delay-us", min=0, help="Longest a request waits for others to join its batch."
    ),
]
ThreadsOpt = Annotated[
    int | None, typer.Option(min=1, help="Intra-op threads of the runner (default: its own).")
]
StopAfterOpt = Annotated[
    float | None,
    typer.Option(
        "--stop-after", help="Stop after this many seconds and print what was served "
        "(default: serve until Ctrl-C or SIGTERM)."
    ),
]  # fmt: skip


def render(result: ServeResult, console: Console) -> None:
    """Requests served and the batch sizes the batcher formed."""
    batches = ", ".join(f"{size}: {count}" for size, count in result.batches.items()) or "none"
    console.print(
        f"served {result.name} for {result.served_s:.1f} s: {result.requests} requests "
        f"({result.failed_requests} failed); batches formed (size: count) {batches}",
        highlight=False,
    )


def _announce(line: str) -> None:
    sys.stderr.write(f"trtconv: {line}\n")
    sys.stderr.flush()


def serve_cli(
    model: ModelArg,
    name: NameOpt = None,
    http_port: HttpPortOpt = None,
    grpc_port: GrpcPortOpt = None,
    metrics_port: MetricsPortOpt = None,
    max_batch_size: MaxBatchOpt = ServeOptions.max_batch_size,
    queue_delay_us: QueueDelayOpt = ServeOptions.queue_delay_us,
    threads: ThreadsOpt = None,
    device: DeviceOpt = ServeOptions.device,
    stop_after: StopAfterOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Serve a model with Triton's dynamic batcher on loopback until Ctrl-C or SIGTERM (exit
    130/143 once the requests in flight are answered and the server is stopped)."""

    def work() -> ServeResult:
        options = ServeOptions(
            model, name, http_port, grpc_port, metrics_port, max_batch_size, queue_delay_us,
            threads, device, stop_after,
        )  # fmt: skip
        return serve(options, _announce)

    run_command(work, json_mode=json_output, render=render)
