"""`trtconv serve`: a Triton server (PyTriton) with dynamic batching in front of one model."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from trtconv.cli._options import DeviceOpt, JsonOpt, QueueTimeoutOpt
from trtconv.cli._output import run_command
from trtconv.options.serve import OnFailing, ServeOptions
from trtconv.serving.server.serve import serve
from trtconv.serving.server.serve_result import ServeResult

ModelArg = Annotated[Path, typer.Argument(help="Artifact directory or SavedModel to serve.")]
NameOpt = Annotated[
    str | None, typer.Option(help="Model name clients use (default: the folder's name).")
]
HttpPortOpt = Annotated[
    int | None, typer.Option(help="Port of the HTTP endpoint (default: a free one).")
]
GrpcPortOpt = Annotated[
    int | None, typer.Option(help="Port of the gRPC endpoint (default: a free one).")
]
MetricsPortOpt = Annotated[
    int | None,
    typer.Option(help="Port of Triton's metrics endpoint (default: a free one)."),
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
        "--stop-after",
        help="Stop after this many seconds and print what was served "
        "(default: serve until Ctrl-C or SIGTERM).",
    ),
]


LatencyBudgetOpt = Annotated[
    float,
    typer.Option(
        "--latency-budget-ms",
        help="The latency a request is answered within: the queue "
        "timeout is this less one largest-batch execution measured at start.",
    ),
]
MaxQueueSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--max-queue-size",
        help="Requests the batcher's queue holds; one more is answered "
        "UNAVAILABLE (HTTP 503) at once (default: what the rate measured at start drains "
        "within the queue timeout; 0: no limit, and with --queue-timeout-ms 0 no queue "
        "policy at all).",
    ),
]
AdmissionOpt = Annotated[
    bool,
    typer.Option(
        "--admission/--no-admission",
        help="Admission control: Triton's queue policy from --latency-budget-ms and the rate "
        "measured at start (on with --max-queue-size or --queue-timeout-ms). Off by default: "
        "with a queue policy Triton 2.51's batcher dispatches a burst so slowly that most of it "
        "times out (docs/serving.md), so an overloaded server queues instead of refusing.",
    ),
]
HostOpt = Annotated[
    str,
    typer.Option(
        help="Address the endpoints listen on (0.0.0.0: every interface, as in a container); "
        "anything but loopback without --api-key-file is warned about."
    ),
]
ApiKeyFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--api-key-file",
        help="A file holding the key inference requests must carry in the "
        "triton-access-token header (Triton's restricted API).",
    ),
]
LogFileOpt = Annotated[
    Path | None, typer.Option("--log-file", help="Write Triton's own log to this file.")
]
LogVerboseOpt = Annotated[
    int, typer.Option("--log-verbose", min=0, help="Triton's verbose log level (0: off).")
]
InstancesOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Model instances Triton runs side by side, each its own process and runner; "
        "--threads (else the cores) divided between them. Default: one per core, up to 4, as "
        "many as keep a request at batch 1 (measured at start, times the instances) within "
        "half the latency budget.",
        show_default=False,
    ),
]
DrainTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--drain-timeout", help="Seconds a stop waits for the requests in flight to be answered."
    ),
]


ShadowOpt = Annotated[
    float | None,
    typer.Option(
        "--shadow",
        help="Share of requests (above 0, at most 1) also run by the native SavedModel the "
        "artifact's manifest names, off the served path, and judged as the artifact was "
        "validated: a live verdict with its 95% interval on the metrics page, a line when it "
        "changes, and in the summary.",
        show_default=False,
    ),
]
OnFailingOpt = Annotated[
    str,
    typer.Option(
        "--on-failing",
        help="What a failing live verdict does: warn (say so, keep serving the artifact) or "
        "fallback (the native model serves every request from then on).",
    ),
]
ShadowCaptureOpt = Annotated[
    Path | None,
    typer.Option(
        "--shadow-capture",
        help="Folder for an .npz of the samples the shadow check found disagreeing (inputs, "
        "served and native outputs; the latest 1000, 256 MiB at most), which validate --data "
        "and convert --calib-data read.",
    ),
]


def render(result: ServeResult, console: Console) -> None:
    """Requests served, refused in the queue, the batch sizes the batcher formed, and the shadow
    check's live verdict."""
    batches = ", ".join(f"{size}: {count}" for size, count in result.batches.items()) or "none"
    console.print(
        f"served {result.name} for {result.served_s:.1f} s: {result.requests} requests run "
        f"({result.failed_requests} failed), {result.timed_out_requests} timed out in the queue "
        f"(UNAVAILABLE); batches formed (size: count) {batches}",
        highlight=False,
    )
    shadow = result.shadow
    if shadow is None:
        return
    native = (
        f", {result.native_served_requests} served by the native model" if shadow.fallback else ""
    )
    console.print(
        f"shadow check: {shadow.state}; {shadow.compared_samples} samples compared, "
        f"{shadow.dropped_samples} dropped{native}",
        highlight=False,
    )
    for figure in shadow.figures:
        console.print(
            f"  {figure.line(shadow.confidence).removeprefix('shadow: ')}", highlight=False
        )
    if shadow.capture:
        console.print(f"  {shadow.captured_samples} disagreeing samples in {shadow.capture}")


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
    latency_budget_ms: LatencyBudgetOpt = ServeOptions.latency_budget_ms,
    max_queue_size: MaxQueueSizeOpt = None,
    queue_timeout_ms: QueueTimeoutOpt = None,
    drain_timeout: DrainTimeoutOpt = ServeOptions.drain_timeout_s,
    instances: InstancesOpt = ServeOptions.instances,
    host: HostOpt = ServeOptions.host,
    api_key_file: ApiKeyFileOpt = None,
    log_file: LogFileOpt = None,
    log_verbose: LogVerboseOpt = ServeOptions.log_verbose,
    admission: AdmissionOpt = ServeOptions.admission,
    shadow: ShadowOpt = None,
    on_failing: OnFailingOpt = ServeOptions.on_failing,
    shadow_capture: ShadowCaptureOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Serve a model with Triton's dynamic batcher on loopback until Ctrl-C or SIGTERM (exit
    130/143 once the requests in flight are answered and the server is stopped).

    Admission control (--admission, or a queue size or timeout given): the batcher's queue is
    bounded and a request still queued when it could no longer meet --latency-budget-ms is
    answered UNAVAILABLE (gRPC) / 503 (HTTP), as is one that finds the queue full; a client
    retries those elsewhere or later. Off by default: with a queue policy Triton 2.51's batcher,
    the one served here, dispatches a burst so slowly that most of it times out.

    Shadow check (--shadow RATE): that share of requests is run again by the native model, off
    the served path, and judged by the rules the artifact was validated by; the live verdict
    (holding, failing or undecided, with its interval) is on the metrics page the serving line
    names. --on-failing fallback serves the native model once it is failing."""

    def work() -> ServeResult:
        options = ServeOptions(
            model=model, name=name, http_port=http_port, grpc_port=grpc_port,
            metrics_port=metrics_port, max_batch_size=max_batch_size, queue_delay_us=queue_delay_us,
            threads=threads, device=device, stop_after_s=stop_after,
            latency_budget_ms=latency_budget_ms, max_queue_size=max_queue_size,
            queue_timeout_ms=queue_timeout_ms, drain_timeout_s=drain_timeout, instances=instances,
            host=host, api_key_file=api_key_file, log_file=log_file, log_verbose=log_verbose,
            admission=admission, shadow=shadow, shadow_capture=shadow_capture,
            on_failing=OnFailing.parse("--on-failing", on_failing),
        )  # fmt: skip
        return serve(options, _announce)

    run_command(work, json_mode=json_output, render=render)
