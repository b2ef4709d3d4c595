"""`trtconv serve`: a real Triton server with its dynamic batcher in front of trtconv's own
runner for one model, on loopback unless told otherwise.

Triton runs as a child process (triton_process.py: the server PyTriton's wheel carries)
and the runner inside its Python backend (triton_model.py), one process per model
instance, with no proxy between them. The artifact's manifest is read once (served_from.py) and
handed down. Before the server starts, a runner in this process is warmed up, which decides the
batch limit, admission control and the instances (serve_plan.py). Triton checks every request
against the declared inputs and answers a wrong one with an error; a batch that fails is run
again request by request. With `--shadow RATE` a share of the served requests is run again by
the native model in this process and judged into a live verdict (shadow/), published on
the metrics page the serving line names. Stopping (the caller's SIGINT/SIGTERM, or
`stop_after_s`) asks Triton to finish the requests in flight, then stops it and its backend
processes; a second signal ends it at once (serve_stop.py).
"""

from __future__ import annotations

import contextlib
import math
import socket
import time
from collections.abc import Callable
from pathlib import Path

from trtconv.core.errors import TrtconvError, UsageError
from trtconv.core.interrupts import Terminated, interrupt_exit_code
from trtconv.core.model_io import ModelSignature
from trtconv.core.processes import grandchildren_ended
from trtconv.options.serve import OnFailing, ServeOptions
from trtconv.options.serving import LOOPBACK
from trtconv.protocol.runner import RunOptions
from trtconv.protocol.serving import TritonServing
from trtconv.serving.repository.deploy import model_name
from trtconv.serving.repository.fixed_inputs import served
from trtconv.serving.repository.triton_config import Batching, ModelConfigSpec
from trtconv.serving.server.batch_runner import Traffic
from trtconv.serving.server.serve_lines import announce_serving, shadow_line, stop_message
from trtconv.serving.server.serve_plan import Plan, instance_threads, plan
from trtconv.serving.server.serve_result import ServeResult
from trtconv.serving.server.serve_stop import second_signal_ends_at_once, wait_while_alive
from trtconv.serving.server.served_from import ServedFrom
from trtconv.serving.server.shadow.check import ShadowCheck
from trtconv.serving.server.shadow.metrics import MetricsPage
from trtconv.serving.server.shadow.reference import shadow_check, shadow_reference
from trtconv.serving.server.tensor_crossing import refuse_strings
from trtconv.serving.server.triton_install import binaries
from trtconv.serving.server.triton_process import (
    InstanceSettings,
    Launch,
    ServingError,
    reach,
    triton_process,
)
from trtconv.serving.server.triton_requests import rejected_count, warm_up_served

__all__ = ["ServeStopped", "ServingError", "serve"]

WORKERS_GRACE_S = 5.0  # how long Triton's model workers get to end after it stopped


class ServeStopped(TrtconvError):
    """SIGINT/SIGTERM stopped the server once the requests in flight were answered: exit
    130/143, `result` the summary (what was served, failed and timed out)."""

    def __init__(self, message: str, result: ServeResult, exit_code: int) -> None:
        super().__init__(message)
        self.result = result
        self.exit_code = exit_code


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports nobody listens on now (the kernel's choice)."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def ports_for(options: ServeOptions) -> tuple[int, int, int, int]:
    """(http, grpc, metrics, Triton's metrics): the ones asked for, free ones for the others.
    Without a shadow check the metrics page is Triton's own (the last two are one port); with
    one, the page announced is trtconv's and Triton's listens on a port of its own."""
    asked = [options.http_port, options.grpc_port, options.metrics_port]
    spare = iter(p for p in free_ports(8) if p not in asked)
    http, grpc, metrics = (port if port is not None else next(spare) for port in asked)
    return http, grpc, metrics, next(spare) if options.shadow is not None else metrics


def api_key(path: Path | None) -> str | None:
    """The key in `path` (its first line, stripped); None without a file. Raises UsageError
    for an empty one."""
    if path is None:
        return None
    text = Path(path).read_text().strip()
    if not text:
        raise UsageError(f"--api-key-file {path} holds no key.")
    return text.splitlines()[0].strip()


def serve(options: ServeOptions, announce: Callable[[str], None]) -> ServeResult:
    """Serve `options.model` until SIGINT/SIGTERM (raised as ServeStopped carrying the summary,
    exit 130/143, after the server is stopped) or `options.stop_after_s`; `announce` gets the
    "serving NAME at URL" line once the model answers, then the others. Raises
    MissingDependencyError without PyTriton's Triton, UsageError for a shadow check with no
    native model to run, and ServingError when the server fails to start or stops on its own."""
    source = ServedFrom.read(options.model)  # the manifest, read once for the whole start
    if options.shadow is not None:
        shadow_reference(source, options)  # a usage error before anything else is asked for
    binaries()  # before the model loads: PyTriton's Triton, or one sentence naming it
    name = options.name or model_name(options.model)
    # Spinning threads would take the cores Triton's processes need between requests. Unless
    # the instances are given, the runner measures with every thread (they are chosen from it).
    asked = options.instances
    threads = instance_threads(options.threads, asked) if asked else options.threads
    with shadow_check(source, options, name, announce) as check:
        # Measured here, before the server starts: the signature Triton declares and the
        # warm-up figures admission control derives from. Triton's instances open their own.
        runner = source.open_runner(RunOptions(threads=threads, device=options.device, spin=False))
        runner.activate()
        try:
            model = served(runner, source.input_values)
            signature = model.signature
            refuse_strings(signature)  # what this Triton cannot serve, before it starts
            decided = plan(model, options, source, check.start if check is not None else None)
        finally:
            runner.deactivate()
        return serve_planned(signature, name, options, decided, announce, source, check)


def served_config(
    name: str, signature: ModelSignature, options: ServeOptions, decided: Plan
) -> ModelConfigSpec:
    """The served model's config: trtconv's runner in Triton's Python backend, the batch limit,
    the batcher's delay and queue policy, one instance per `--instances`."""
    return ModelConfigSpec(
        name=name,
        serving=TritonServing(backend="python", platform=None, model_filename="model.py"),
        inputs=signature.inputs,
        outputs=signature.outputs,
        batching=Batching(decided.max_batch, max_queue_delay_us=options.queue_delay_us),
        instance_count=decided.instances,
        admission=decided.policy,
        warmup=False,  # each instance warms its runner up before Triton marks it ready
    )


def instance_settings(
    source: ServedFrom,
    options: ServeOptions,
    decided: Plan,
    signature: ModelSignature,
    check: ShadowCheck | None,
) -> InstanceSettings:
    """What each model instance is told: its model and threads, and with a shadow check where
    to offer samples and (--on-failing fallback) the native model to serve once told to."""
    fallback = check is not None and options.on_failing == OnFailing.FALLBACK
    return InstanceSettings(
        model=str(source.path.resolve()),
        threads=instance_threads(options.threads, decided.instances),
        device=options.device,
        batched=decided.batched,
        largest=decided.max_batch or signature.fixed_batch or 1,
        shadow_rate=options.shadow or 0.0,
        shadow_address=check.address if check is not None else "",
        shadow_key=check.key.hex() if check is not None else "",
        fallback_model=str(check.native.path) if fallback and check is not None else "",
        fallback_signature=(check.native.signature or "") if fallback and check else "",
    )


def serve_planned(
    signature: ModelSignature,
    name: str,
    options: ServeOptions,
    decided: Plan,
    announce: Callable[[str], None],
    source: ServedFrom,
    check: ShadowCheck | None = None,
) -> ServeResult:
    """Serve the planned model as `name` (see `serve`)."""
    http, grpc, metrics, triton_metrics = ports_for(options)
    key = api_key(options.api_key_file)
    # With a shadow check Triton's metrics stay on loopback: trtconv's page carries them.
    metrics_host = options.host if check is None else LOOPBACK
    launch = Launch(
        host=options.host, http_port=http, grpc_port=grpc, metrics_port=triton_metrics,
        exit_timeout_s=math.ceil(options.drain_timeout_s), log_file=options.log_file,
        log_verbose=options.log_verbose, api_key=key, metrics_host=metrics_host,
    )  # fmt: skip
    config = served_config(name, signature, options, decided)
    settings = instance_settings(source, options, decided, signature, check)
    metrics_url = f"http://{options.host}:{metrics}/metrics"
    triton_url = f"http://{reach(metrics_host)}:{triton_metrics}/metrics"
    stopped_by, interrupt, served_ms = "stop-after", None, 0.0
    with (
        second_signal_ends_at_once() as arm_second_signal,
        grandchildren_ended(WORKERS_GRACE_S) as note_workers,
        contextlib.ExitStack() as pages,
        triton_process(launch, config, settings) as triton,
    ):
        # A signal from here on (during the warm-up too) stops cleanly and arms the second
        # signal, which ends the drain at once.
        started = time.monotonic()
        try:
            address = f"{reach(options.host)}:{http}"
            served_ms = warm_up_served(address, name, signature, decided, key)
            if check is not None:
                pages.callback(metrics_page(options.host, metrics, triton_url, check).close)
            announce_serving(announce, name, options, (http, grpc, metrics_url), decided, served_ms)
            if check is not None:
                capture = check.capture.path if check.capture is not None else None
                announce(shadow_line(options, check.native.path, capture))
            note_workers()  # Triton's model instances, ended with it (not orphaned) on the way out
            started = time.monotonic()
            wait_while_alive(triton, options.stop_after_s)
        except KeyboardInterrupt as caught:  # stop cleanly, then say what was served
            interrupt = caught
            arm_second_signal()
            stopped_by = "SIGTERM" if isinstance(caught, Terminated) else "SIGINT"
        served_s = time.monotonic() - started
        timed_out = rejected_count(triton_url, name)
    result = serve_result(name, options, decided, (http, grpc, metrics), source, triton.traffic)
    result.timed_out_requests, result.served_s = timed_out, round(served_s, 3)
    result.warmup_ms["served_request"] = round(served_ms, 3)
    result.stopped_by = stopped_by
    if check is not None:
        result.shadow = check.stop()
    if interrupt is not None:
        raise ServeStopped(stop_message(stopped_by, result), result, interrupt_exit_code(interrupt))
    return result


def metrics_page(host: str, port: int, triton_url: str, check: ShadowCheck) -> MetricsPage:
    """The page the serving line names with a shadow check. Raises ServingError when its port
    cannot be listened on."""
    try:
        return MetricsPage(host, port, triton_url, check.result)
    except OSError as exc:
        raise ServingError(f"the metrics page could not listen on {host}:{port}: {exc}") from exc


def serve_result(
    name: str,
    options: ServeOptions,
    decided: Plan,
    ports: tuple[int, int, int],
    source: ServedFrom,
    traffic: Traffic,
) -> ServeResult:
    """The summary printed on every stop (the caller adds what the stop measured)."""
    http, grpc, metrics = ports
    backend, precision = source.kind
    batched, warm = decided.batched, decided.warm
    warmup_ms = {"batch_1": round(warm[0], 3), f"batch_{decided.max_batch or 1}": round(warm[1], 3)}
    if decided.native_warm is not None:
        native = decided.native_warm
        warmup_ms |= {"native_batch_1": round(native[0], 3)}
        warmup_ms |= {f"native_batch_{decided.max_batch or 1}": round(native[1], 3)}
    return ServeResult(
        name=name,
        model=str(options.model),
        backend=backend,
        precision=precision,
        http_url=f"http://{options.host}:{http}",
        grpc_url=f"{options.host}:{grpc}",
        metrics_url=f"http://{options.host}:{metrics}/metrics",
        max_batch_size=decided.max_batch,
        max_queue_delay_us=options.queue_delay_us,
        requests=traffic.requests,
        failed_requests=traffic.failed,
        batches={str(size): count for size, count in sorted(traffic.batches.items())},
        served_s=0.0,
        latency_budget_ms=options.latency_budget_ms,
        max_queue_size=decided.policy.max_queue_size if batched else None,
        queue_timeout_ms=decided.policy.timeout_ms if batched else None,
        admission_source=decided.policy.source if batched else "none: a fixed-batch model",
        warmup_ms=warmup_ms,
        instances=decided.instances,
        retried_requests=traffic.retried,
        native_served_requests=traffic.native,
    )
