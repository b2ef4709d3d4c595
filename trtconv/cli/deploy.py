"""`trtconv deploy`: a Triton model repository from artifacts and SavedModels."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from trtconv.cli._options import JsonOpt, QueueTimeoutOpt
from trtconv.cli._output import run_command
from trtconv.options.deploy import DeployOptions
from trtconv.serving.repository.deploy import deploy
from trtconv.serving.repository.deploy_result import DeployResult

ModelsArg = Annotated[
    list[Path],
    typer.Argument(help="Artifact directories (or SavedModels): one Triton model each."),
]
OutputOpt = Annotated[
    Path, typer.Option("--output", "-o", help="The model repository folder to write.")
]
BenchOpt = Annotated[
    Path | None,
    typer.Option(
        help="A `trtconv bench --json` result: each model's rows set its batch sizes and queue "
        "delay (default: the documented defaults)."
    ),
]
ServingOpt = Annotated[
    Path | None,
    typer.Option(
        help="A `trtconv bench --scenario server --json` result: the batch limit and queue delay "
        "each model met its latency budget with, preferring the batch sizes its batcher formed "
        "(over --bench)."
    ),
]
InstancesOpt = Annotated[
    int, typer.Option(min=1, help="Model instances Triton runs side by side (instance_group).")
]
ThreadsOpt = Annotated[
    int | None,
    typer.Option(min=1, help="Intra-op threads per instance (default: the backend's own)."),
]
ForceOpt = Annotated[bool, typer.Option(help="Replace an existing output.")]
LatencyBudgetOpt = Annotated[
    float,
    typer.Option(
        "--latency-budget-ms",
        help="The latency a request is answered within: each model's "
        "queue timeout is this less one largest-batch execution (from --bench).",
    ),
]
MaxQueueSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--max-queue-size",
        help="Requests each model's queue holds; one more is answered "
        "UNAVAILABLE (HTTP 503) at once (default: what the rate measured by --serving or "
        "--bench drains within the queue timeout; 0: no limit, and with --queue-timeout-ms 0 "
        "no queue policy at all).",
    ),
]


def render(result: DeployResult, console: Console) -> None:
    """One line per model: where it is served from and how it batches."""
    console.print(f"[bold]{escape(result.repository)}[/bold]", highlight=False)
    for model in result.models:
        serving = model.triton_backend or model.triton_platform
        batching = (
            f"batches up to {model.max_batch_size} (preferred {model.preferred_batch_sizes}, "
            f"queue delay {model.max_queue_delay_us} µs; {model.batching_source}); admission: "
            f"{model.admission_source}"
            if model.max_batch_size
            else model.batching_source
        )
        console.print(
            f"  {escape(model.name)}: {model.backend} {model.precision} ({model.status}) -> "
            f"{serving}, {model.instance_count}x {model.instance_kind}; {escape(batching)}",
            highlight=False,
        )
    for warning in result.warnings:
        console.print(f"  [yellow]{escape(warning)}[/yellow]")


def deploy_cli(
    models: ModelsArg,
    output: OutputOpt,
    bench: BenchOpt = None,
    instances: InstancesOpt = DeployOptions.instances,
    threads: ThreadsOpt = None,
    force: ForceOpt = False,
    serving: ServingOpt = None,
    latency_budget_ms: LatencyBudgetOpt = DeployOptions.latency_budget_ms,
    max_queue_size: MaxQueueSizeOpt = None,
    queue_timeout_ms: QueueTimeoutOpt = None,
    json_output: JsonOpt = False,
) -> None:
    """Write a Triton model repository: per model its payload, config.pbtxt (native Triton
    backend, tensors, dynamic batching, instances) and trtconv.json (the manifest).

    Each batcher has a bounded queue and a queue timeout (admission control: a request turned
    away is answered UNAVAILABLE / HTTP 503). The shadow check is trtconv serve's (--shadow):
    Triton's native backends serving this repository run the payload alone (docs/serving.md)."""

    def work() -> DeployResult:
        options = DeployOptions(
            models=tuple(models),
            output=output,
            force=force,
            bench=bench,
            instances=instances,
            threads=threads,
            serving=serving,
            latency_budget_ms=latency_budget_ms,
            max_queue_size=max_queue_size,
            queue_timeout_ms=queue_timeout_ms,
        )
        return deploy(options)

    run_command(work, json_mode=json_output, render=render)
