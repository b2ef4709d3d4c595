"""`trtconv serve`: a real Triton server with its dynamic batcher in front of trtconv's own
runner for one model, on loopback unless told otherwise.

Triton runs as a child process (serving/triton_process.py: the server PyTriton's wheel carries)
and the runner inside its Python backend (serving/triton_model.py), one process per model
instance, with no proxy between them. Before the server starts, a runner in this process is
warmed up at batch 1 and at the largest batch, which measures what admission control derives
from when it is asked for: the batcher's queue is bounded and a request still queued when it
could no longer meet the latency budget is answered UNAVAILABLE (serving/admission.py, which
says why it is off by default). The batcher never forms a batch larger than the artifact was
built for. Triton checks every request against the declared inputs (names, dtypes, shapes) and
answers a wrong one with an error; a batch that fails is run again request by request, so only
the request that fails alone gets the error. Stopping (the caller's SIGINT/SIGTERM, or
`stop_after_s`) asks Triton to finish the requests in flight, then stops it and its backend
processes; a second signal ends it at once.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.artifact.manifest import read_manifest
from trtconv.backends.registry import native, open_runner
from trtconv.core.errors import TrtconvError, UsageError
from trtconv.core.interrupts import Terminated, interrupt_exit_code
from trtconv.core.model_io import ModelSignature
from trtconv.core.numbers import human
from trtconv.core.processes import grandchildren_ended, kill_descendants
from trtconv.model.paths import ARTIFACT, model_kind, saved_model_in
from trtconv.options import LOOPBACK, ServeOptions
from trtconv.protocol.runner import RunOptions
from trtconv.protocol.serving import TritonServing
from trtconv.serving.admission import ADMISSION_OFF, Admission, admission
from trtconv.serving.batch_runner import WARMUP_RUNS, Traffic, sample_feeds
from trtconv.serving.batch_runner import warm_up as timed_warm_up
from trtconv.serving.deploy import model_name
from trtconv.serving.fixed_inputs import ServedModel, served
from trtconv.serving.serving_result import ServeResult
from trtconv.serving.triton_config import Batching, ModelConfigSpec
from trtconv.serving.triton_model import WARMUP_PARAMETER
from trtconv.serving.triton_process import (
    ACCESS_HEADER,
    INSTALL_HINT,
    InstanceSettings,
    Launch,
    ServingError,
    TritonProcess,
    binaries,
    reach,
    remove_live_workspaces,
    triton_process,
)

__all__ = ["INSTALL_HINT", "ServeStopped", "ServingError", "serve"]

POLL_S = 0.2
WARMUP_ERROR_CHARS = 400  # of a model's error in the warm-up, on the one line that says it
WARMUP_SERVED_S = 60.0  # how long the served warm-up may retry requests the queue timed out
# Instances chosen at start (serve without --instances): at most this many, and as many as keep
# a request at batch 1 within this share of the latency budget.
MAX_AUTO_INSTANCES = 4
INSTANCE_BUDGET_SHARE = 0.5
WORKERS_GRACE_S = 5.0  # how long Triton's model workers get to end after it stopped
# Triton's counter of requests its queue policy rejected when their timeout expired.
REJECTED_METRIC = re.compile(
    r'^nv_inference_request_failure\{model="(?P<model>[^"]+)",reason="REJECTED"[^}]*\}\s+'
    r"(?P<count>[0-9.eE+]+)",
    re.M,
)


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


def ports_for(options: ServeOptions) -> tuple[int, int, int]:
    """(http, grpc, metrics): the ones asked for, free ones for the others."""
    asked = [options.http_port, options.grpc_port, options.metrics_port]
    spare = iter(p for p in free_ports(6) if p not in asked)
    http, grpc, metrics = (port if port is not None else next(spare) for port in asked)
    return http, grpc, metrics


def serve(options: ServeOptions, announce: Callable[[str], None]) -> ServeResult:
    """Serve `options.model` until SIGINT/SIGTERM (raised as ServeStopped carrying the summary,
    exit 130/143, after the server is stopped) or `options.stop_after_s`; `announce` gets the
    admission line and the "serving NAME at URL" line once the model answers. Raises
    MissingDependencyError without PyTriton's Triton and ServingError when the server fails to
    start or stops on its own."""
    binaries()  # before the model loads: PyTriton's Triton, or one sentence naming it
    # Spinning threads would take the cores Triton's processes need between requests. Unless
    # the instances are given, the runner measures with every thread (they are chosen from it).
    asked = options.instances
    threads = instance_threads(options.threads, asked) if asked else options.threads
    run = RunOptions(threads=threads, device=options.device, spin=False)
    # Measured here, before the server starts: the signature Triton declares and the warm-up
    # figures admission control derives from. Triton's instances each open their own runner.
    runner = open_runner(options.model, run)
    runner.activate()
    try:
        model = served(runner, options.model)
        signature, decided = model.signature, plan(model, options)
    finally:
        runner.deactivate()
    name = options.name or model_name(options.model)
    return serve_planned(signature, name, options, decided, announce)


def instance_threads(threads: int | None, instances: int) -> int | None:
    """Intra-op threads per instance: `threads` (else the cores) divided between the
    instances, at least 1; None (the runner's default) for one instance without --threads."""
    if instances == 1:
        return threads
    return max(1, (threads or len(os.sched_getaffinity(0))) // instances)


@dataclass(frozen=True)
class Plan:
    """What serving one runner was decided with before the server starts: the batch limit
    (and why), the warm-up medians in ms (batch 1, largest batch) and the queue policy."""

    batched: bool
    max_batch: int  # 0: a fixed-batch model, not batched
    cap_why: str
    warm: tuple[float, float]
    policy: Admission
    instances: int = 1
    instances_why: str = ""


def auto_instances(batch1_ms: float, budget_ms: float, cores: int) -> tuple[int, str]:
    """How many model instances to run, and the words that say why: one per core, up to
    MAX_AUTO_INSTANCES, as many as keep a request at batch 1 within INSTANCE_BUDGET_SHARE of
    the latency budget should each instance's runner get only its share of the threads (the
    worst case: a model whose time the threads divide). Each instance is a process of its own,
    so the served path's per-request cost (Triton's backend, not the model) runs on every core;
    on 2 cores two instances served 1.4-2x one, for requests of 0.3 and 2.2 ms at batch 1 alike
    (BENCHMARKS.md)."""
    fits = int(budget_ms * INSTANCE_BUDGET_SHARE // max(batch1_ms, 1e-3))
    count = max(1, min(cores, MAX_AUTO_INSTANCES, fits))
    return count, (
        f" (chosen for {cores} core(s) and a request at batch 1 taking {human(batch1_ms)} ms "
        f"at start: --instances to set it)"
    )


def plan(runner: ServedModel, options: ServeOptions) -> Plan:
    """Cap the batch at the artifact's range, warm the runner up, derive admission control."""
    signature = runner.signature
    batched = signature.fixed_batch is None
    cap, cap_why = batch_cap(options.model)
    max_batch = min(options.max_batch_size, cap) if cap else options.max_batch_size
    max_batch = max_batch if batched else 0
    warm = warm_up(runner, max_batch or signature.fixed_batch or 1, batched)
    policy = (
        admission(
            options.latency_budget_ms,
            max_batch or 1,
            warm[1],
            measured=" measured at start",
            queue_size=options.max_queue_size,
            timeout_ms=options.queue_timeout_ms,
        )
        if options.admission
        else ADMISSION_OFF
    )
    cores = len(os.sched_getaffinity(0))
    count, why = (
        (options.instances, "")
        if options.instances
        else auto_instances(warm[0], options.latency_budget_ms, cores)
    )
    return Plan(batched, max_batch, cap_why, warm, policy, count, why)


def api_key(path: Path | None) -> str | None:
    """The key in `path` (its first line, stripped); None without a file. Raises UsageError
    for an empty one."""
    if path is None:
        return None
    text = Path(path).read_text().strip()
    if not text:
        raise UsageError(f"--api-key-file {path} holds no key.")
    return text.splitlines()[0].strip()


def exposure_warning(host: str, api_key_file: Path | None) -> str | None:
    """The one-line warning for a server others can reach with inference open to them."""
    if host in (LOOPBACK, "localhost", "::1") or api_key_file is not None:
        return None
    return (
        f"warning: inference on {host} is open to anyone who reaches it: give --api-key-file "
        "to require a key (Triton's restricted API; clients send it in the "
        "triton-access-token header)"
    )


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


def serve_planned(
    signature: ModelSignature,
    name: str,
    options: ServeOptions,
    decided: Plan,
    announce: Callable[[str], None],
) -> ServeResult:
    """Serve the planned model as `name` (see `serve`)."""
    http, grpc, metrics = ports_for(options)
    key = api_key(options.api_key_file)
    launch = Launch(
        options.host, http, grpc, metrics, math.ceil(options.drain_timeout_s),
        options.log_file, options.log_verbose, key,
    )  # fmt: skip
    config = served_config(name, signature, options, decided)
    settings = InstanceSettings(
        model=str(Path(options.model).resolve()),
        threads=instance_threads(options.threads, decided.instances),
        device=options.device,
        batched=decided.batched,
        largest=decided.max_batch or signature.fixed_batch or 1,
    )
    metrics_url = f"http://{options.host}:{metrics}/metrics"
    stopped_by, interrupt, served_ms = "stop-after", None, 0.0
    with (
        second_signal_ends_at_once() as arm_second_signal,
        grandchildren_ended(WORKERS_GRACE_S) as note_workers,
        triton_process(launch, config, settings) as triton,
    ):
        # A signal from here on (during the warm-up too) stops cleanly and arms the second
        # signal, which ends the drain at once.
        started = time.monotonic()
        try:
            address = f"{reach(options.host)}:{http}"
            served_ms = warm_up_served(address, name, signature, decided, key)
            announce_serving(announce, name, options, (http, grpc, metrics_url), decided, served_ms)
            note_workers()  # Triton's model instances, ended with it (not orphaned) on the way out
            started = time.monotonic()
            _wait(triton, options.stop_after_s)
        except KeyboardInterrupt as caught:  # stop cleanly, then say what was served
            interrupt = caught
            arm_second_signal()
            stopped_by = "SIGTERM" if isinstance(caught, Terminated) else "SIGINT"
        served_s = time.monotonic() - started
        timed_out = rejected_count(f"http://{reach(options.host)}:{metrics}/metrics", name)
    result = serve_result(
        name,
        options,
        decided,
        (http, grpc, metrics),
        triton.traffic,
        timed_out,
        served_s,
        served_ms,
    )
    result.stopped_by = stopped_by
    if interrupt is not None:
        raise ServeStopped(stop_message(stopped_by, result), result, interrupt_exit_code(interrupt))
    return result


def stop_message(stopped_by: str, result: ServeResult) -> str:
    """What a signal's stop says: what was run, failed and timed out."""
    what = "terminated (SIGTERM)" if stopped_by == "SIGTERM" else "interrupted"
    return (
        f"{what}: stopped after answering the requests in flight; {result.requests} run "
        f"({result.failed_requests} failed), {result.timed_out_requests} timed out in the queue"
    )


def serve_result(
    name: str,
    options: ServeOptions,
    decided: Plan,
    ports: tuple[int, int, int],
    traffic: Traffic,
    timed_out: int,
    served_s: float,
    served_ms: float,
) -> ServeResult:
    """The summary printed on every stop."""
    http, grpc, metrics = ports
    backend, precision = served_kind(options.model)
    batched, warm = decided.batched, decided.warm
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
        timed_out_requests=timed_out,
        batches={str(size): count for size, count in sorted(traffic.batches.items())},
        served_s=round(served_s, 3),
        latency_budget_ms=options.latency_budget_ms,
        max_queue_size=decided.policy.max_queue_size if batched else None,
        queue_timeout_ms=decided.policy.timeout_ms if batched else None,
        admission_source=decided.policy.source if batched else "none: a fixed-batch model",
        warmup_ms={
            "batch_1": round(warm[0], 3),
            f"batch_{decided.max_batch or 1}": round(warm[1], 3),
            "served_request": round(served_ms, 3),
        },
        instances=decided.instances,
        retried_requests=traffic.retried,
    )


def announce_serving(
    announce: Callable[[str], None],
    name: str,
    options: ServeOptions,
    where: tuple[int, int, str],
    decided: Plan,
    served_ms: float,
) -> None:
    """The "serving" line first (whoever waits for it reads no further), then the exposure
    warning when there is one, then the admission line."""
    http, grpc, metrics_url = where
    host = options.host
    announce(f"serving {name} at http://{host}:{http} (gRPC {host}:{grpc}; metrics {metrics_url})")
    warning = exposure_warning(host, options.api_key_file)
    if warning:
        announce(warning)
    if decided.batched:
        announce(admission_line(decided, served_ms))


def admission_line(decided: Plan, served_ms: float) -> str:
    """The announced line: the batch limit, the warm-up and the queue policy, and where they
    came from."""
    policy, warm, largest = decided.policy, decided.warm, decided.max_batch
    return (
        f"{decided.instances} instance(s){decided.instances_why}; batches up to {largest}"
        f"{decided.cap_why}; warm-up: batch 1 {human(warm[0])} ms, batch {largest} "
        f"{human(warm[1])} ms, one request served {human(served_ms)} ms; "
        f"{admission_words(policy)}"
    )


def admission_words(policy: Admission) -> str:
    """What the queue policy does to a request, and where its figures came from."""
    if not policy.enabled:
        return f"admission: off, every request is queued until it is served ({policy.source})"
    size = f"up to {policy.max_queue_size} requests" if policy.max_queue_size else "unbounded"
    wait = (
        f"each answered UNAVAILABLE (HTTP 503) if still queued after {human(policy.timeout_ms)} ms"
        if policy.timeout_us
        else "no queue timeout"
    )
    return f"admission: queue {size}, {wait} ({policy.source})"


def warm_up_served(
    address: str, name: str, signature: ModelSignature, decided: Plan, key: str | None
) -> float:
    """WARMUP_RUNS requests of one sample through the server itself before it is announced
    (the first ones pay Triton's own set-up): the median milliseconds."""
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException, np_to_triton_dtype

    batched = decided.batched
    feeds = sample_feeds(signature, 1 if batched else decided.max_batch or 1, batched)
    headers = {ACCESS_HEADER: key} if key else None
    marked = {WARMUP_PARAMETER: True}  # the instances do not count it as traffic
    client = http.InferenceServerClient(address)
    times: list[float] = []
    deadline = time.monotonic() + WARMUP_SERVED_S
    try:
        inputs = []
        for tensor, array in feeds.items():
            request = http.InferInput(tensor, list(array.shape), np_to_triton_dtype(array.dtype))
            request.set_data_from_numpy(array)
            inputs.append(request)
        while len(times) < WARMUP_RUNS:
            start = time.perf_counter()
            try:
                client.infer(name, inputs, headers=headers, parameters=marked)
            except InferenceServerException as exc:
                # The first requests may outlive the queue timeout (set-up on busy cores): the
                # warm-up is what pays for them; only the last try's error is raised.
                if time.monotonic() > deadline:
                    raise ServingError(
                        f"{name} did not answer its warm-up requests: {exc}"
                    ) from exc
                continue
            times.append((time.perf_counter() - start) * 1000)
    finally:
        client.close()
    return float(np.median(times))


def batch_cap(model: Path) -> tuple[int | None, str]:
    """The largest batch the artifact was built for (its manifest's batch range), and the
    words that say so; (None, "") when it runs any batch."""
    path = saved_model_in(model)
    if model_kind(path) != ARTIFACT:
        return None, ""
    found = read_manifest(path).batch_range
    if not found:
        return None, ""
    return found[1], f" (the artifact's batch range is {found[0]}-{found[1]})"


def warm_up(runner: ServedModel, batch: int, batched: bool) -> tuple[float, float]:
    """`batch_runner.warm_up` of the planning runner; a model that fails it (on inputs it may
    not take) said in one sentence, a ServingError."""
    try:
        return timed_warm_up(runner, batch, batched)
    except Exception as exc:
        said = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        raise ServingError(
            f"the model failed its warm-up on random inputs (batch 1 and {batch}; dynamic "
            f"dimensions other than the batch set to 1): {type(exc).__name__}: "
            f"{said[:WARMUP_ERROR_CHARS]}"
        ) from exc


def rejected_count(metrics_url: str, name: str) -> int:
    """Requests of model `name` Triton's queue policy rejected (timed out in the queue), from
    its metrics; 0 when they cannot be read. Triton 2.51 counts no refusal at a full queue."""
    try:
        with urllib.request.urlopen(metrics_url, timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return 0
    return sum(int(float(count)) for model, count in REJECTED_METRIC.findall(text) if model == name)


def _wait(triton: TritonProcess, stop_after_s: float | None) -> None:
    """Block while the server is alive, until `stop_after_s` (None: until interrupted)."""
    deadline = None if stop_after_s is None else time.monotonic() + stop_after_s
    while deadline is None or time.monotonic() < deadline:
        if not triton.alive():
            raise ServingError(f"The Triton server stopped on its own: {triton.log_tail()}")
        time.sleep(POLL_S)


@contextlib.contextmanager
def second_signal_ends_at_once() -> Iterator[Callable[[], None]]:
    """Yield `arm`: once called (the first SIGINT/SIGTERM was caught and Triton drains the
    requests in flight, not ready for new ones), a second SIGINT or SIGTERM kills Triton's
    processes and ends this one at once, 130/143, the requests in flight unanswered: what an
    operator who cannot wait for the drain asks for. The handlers are restored on the way out."""
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in signals}

    def end_at_once(signum: int, frame: Any) -> None:
        killed = kill_descendants()
        remove_live_workspaces()
        os.write(
            2,
            f"trtconv: error: second signal: stopped at once ({killed} server process(es) "
            "killed, the requests in flight unanswered)\n".encode(),
        )
        os._exit(128 + signum)  # no clean-up left that would not wait on the drain

    def arm() -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in signals:
                signal.signal(signum, end_at_once)

    try:
        yield arm
    finally:
        if threading.current_thread() is threading.main_thread():
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def served_kind(model: Path) -> tuple[str, str]:
    """(backend, precision) of what is served (a SavedModel: the native runner, fp32)."""
    path = saved_model_in(model)
    if model_kind(path) == ARTIFACT:
        manifest = read_manifest(path)
        return manifest.backend, manifest.precision
    return native().name, "fp32"
