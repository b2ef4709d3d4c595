"""`trtconv serve`: a real Triton server (PyTriton) with its dynamic batcher in front of
trtconv's own runner for one model, on loopback.

Triton checks every request against the declared inputs (names, dtypes, shapes) and answers a
wrong one with an error; the runner then gets the batches the batcher formed. Stopping (the
caller's SIGINT/SIGTERM, or `stop_after_s`) asks Triton to finish the requests in flight, then
stops it and its backend processes.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import socket
import sysconfig
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from trtconv.backends.registry import native, open_runner
from trtconv.core.errors import MissingDependencyError, TrtconvError
from trtconv.core.model_io import STRING, TensorSpec, numpy_dtype
from trtconv.manifest import read_manifest
from trtconv.model_paths import ARTIFACT, model_kind, saved_model_in
from trtconv.protocol.runner import Runner, RunOptions
from trtconv.serving.deploy import model_name
from trtconv.serving.options import LOOPBACK, ServeOptions
from trtconv.serving.results import ServeResult

LOG = logging.getLogger(__name__)
INSTALL_HINT = "pip install 'trtconv[serve]' (nvidia-pytriton needs glibc 2.35 or newer)"
# How long Triton waits for requests in flight (and open client connections) when stopping.
DRAIN_TIMEOUT_S = 10
POLL_S = 0.2
LOG_TAIL_LINES = 20
GUARDED_ENDPOINTS = ("shared-memory", "model-repository", "trace", "logging")


class ServingError(TrtconvError):
    """The server could not start or stopped on its own (exit 1)."""


def pytriton() -> ModuleType:
    """The `pytriton` package. Raises MissingDependencyError (exit 3) naming the install."""
    try:
        import pytriton.triton
    except ImportError as exc:  # its wheel is Linux-only and needs glibc 2.35+
        raise MissingDependencyError(
            f"trtconv serve needs PyTriton, which is not importable ({exc}); install it: "
            f"{INSTALL_HINT}."
        ) from exc
    return pytriton


def stub_library_path() -> None:
    """Put this interpreter's libpython folder first on LD_LIBRARY_PATH for Triton's processes.

    Triton's python-backend stub loads libpython3.X through the dynamic linker; under an
    interpreter that is not the system's (pyenv) it would meet the system's library, whose
    build does not match this standard library: the model then fails in `initialize`
    ("'_thread.RLock' object has no attribute '_recursion_count'").
    """
    libdir = sysconfig.get_config_var("LIBDIR")
    if not libdir:
        return
    current = [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    if libdir not in current:
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([libdir, *current])


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


@dataclass
class Traffic:
    """What the server saw: requests, failed ones, and the batch sizes the runner ran."""

    requests: int = 0
    failed: int = 0
    batches: collections.Counter[int] = field(default_factory=collections.Counter)


class ServerLog:
    """A stdout stand-in for Triton's own log lines (PyTriton prints them to stdout, which
    carries the result): kept for error messages, and logged at debug level."""

    def __init__(self) -> None:
        self.lines: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES)

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                self.lines.append(line)
                LOG.debug("triton: %s", line)
        return len(text)

    def flush(self) -> None:
        pass

    def tail(self) -> str:
        return " | ".join(self.lines)


def infer_function(
    runner: Runner, batched: bool, traffic: Traffic
) -> Callable[[Sequence[Any]], list[dict[str, np.ndarray]]]:
    """PyTriton's inference callable: the requests the batcher grouped, run as one batch
    (concatenated along the batch axis, the outputs split back) or, for a fixed-batch model,
    one by one. An exception becomes an error reply to these requests; Triton keeps serving."""
    signature = runner.signature

    def run(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        outputs = runner.infer(feeds)
        return {spec.name: _as_declared(outputs[spec.name], spec) for spec in signature.outputs}

    def infer(requests: Sequence[Any]) -> list[dict[str, np.ndarray]]:
        traffic.requests += len(requests)
        try:
            feeds = [
                {name: np.asarray(r[name]) for name in signature.input_names} for r in requests
            ]
            if not batched:
                traffic.batches.update(1 for _ in feeds)
                return [run(feed) for feed in feeds]
            sizes = [len(next(iter(feed.values()))) for feed in feeds]
            joined = {name: np.concatenate([f[name] for f in feeds]) for name in feeds[0]}
            traffic.batches[sum(sizes)] += 1
            outputs = run(joined)
            cuts = np.cumsum(sizes)[:-1]
            parts = {name: np.split(array, cuts) for name, array in outputs.items()}
            return [{name: parts[name][i] for name in parts} for i in range(len(feeds))]
        except Exception:
            traffic.failed += len(requests)
            raise

    return infer


def _as_declared(array: np.ndarray, spec: TensorSpec) -> np.ndarray:
    if spec.dtype == STRING:
        return np.asarray(array, dtype=np.bytes_)
    return np.asarray(array, dtype=numpy_dtype(spec.dtype))


def tensors(specs: Sequence[TensorSpec], batched: bool) -> list[Any]:
    """PyTriton Tensors for `specs`: dims without the batch when batching, -1 when dynamic."""
    from pytriton.model_config import Tensor

    found = []
    for spec in specs:
        shape = spec.shape[1:] if batched else spec.shape
        dims = tuple(-1 if dim is None else int(dim) for dim in shape)
        dtype = np.bytes_ if spec.dtype == STRING else numpy_dtype(spec.dtype).type
        found.append(Tensor(name=spec.name, dtype=dtype, shape=dims))
    return found


def serve(options: ServeOptions, announce: Callable[[str], None]) -> ServeResult:
    """Serve `options.model` until SIGINT/SIGTERM (raised here as KeyboardInterrupt, after the
    server is stopped) or `options.stop_after_s`; `announce` gets the one "serving NAME at URL"
    line once the model answers. Raises MissingDependencyError without PyTriton and
    ServingError when the server fails to start or stops on its own."""
    pytriton()
    # Spinning threads would take the cores Triton's processes need between requests.
    run = RunOptions(threads=options.threads, device=options.device, spin=False)
    runner = open_runner(options.model, run)
    name = options.name or model_name(options.model)
    runner.activate()
    try:
        return serve_runner(runner, name, options, announce)
    finally:
        runner.deactivate()


def serve_runner(
    runner: Runner, name: str, options: ServeOptions, announce: Callable[[str], None]
) -> ServeResult:
    """Serve an activated runner as model `name` (see `serve`)."""
    from pytriton.model_config import DynamicBatcher, ModelConfig
    from pytriton.triton import Triton, TritonConfig, TritonSecurityConfig

    signature = runner.signature
    batched = signature.fixed_batch is None
    max_batch = options.max_batch_size if batched else 0
    http, grpc, metrics = ports_for(options)
    config = TritonConfig(
        http_address=LOOPBACK, http_port=http, grpc_address=LOOPBACK, grpc_port=grpc,
        metrics_address=LOOPBACK, metrics_port=metrics, exit_timeout_secs=DRAIN_TIMEOUT_S,
    )  # fmt: skip
    batcher = DynamicBatcher(max_queue_delay_microseconds=options.queue_delay_us)
    traffic, log = Traffic(), ServerLog()
    backend, precision = served_kind(options.model)
    stub_library_path()
    # PyTriton guards Triton's admin endpoints with a token; statistics (the batch sizes the
    # batcher formed, read by `bench --scenario server`) stay open, the others guarded.
    security = TritonSecurityConfig(restricted_endpoints=list(GUARDED_ENDPOINTS))
    triton_server = Triton(config=config, security_config=security)
    with contextlib.redirect_stdout(log), _server_errors(log), triton_server as triton:
        triton.bind(
            model_name=name,
            infer_func=infer_function(runner, batched, traffic),
            inputs=tensors(signature.inputs, batched),
            outputs=tensors(signature.outputs, batched),
            config=ModelConfig(max_batch_size=max_batch, batcher=batcher),
            strict=True,
        )
        announce(f"serving {name} at http://{LOOPBACK}:{http} (gRPC {LOOPBACK}:{grpc})")
        started = time.monotonic()
        _wait(triton, options.stop_after_s, log)
        served_s = time.monotonic() - started
    return ServeResult(
        name=name, model=str(options.model), backend=backend, precision=precision, http_url=f"http://{LOOPBACK}:{http}",
        grpc_url=f"{LOOPBACK}:{grpc}", max_batch_size=max_batch,
        max_queue_delay_us=options.queue_delay_us, requests=traffic.requests,
        failed_requests=traffic.failed,
        batches={str(size): count for size, count in sorted(traffic.batches.items())},
        served_s=round(served_s, 3),
    )  # fmt: skip


def _wait(triton: Any, stop_after_s: float | None, log: ServerLog) -> None:
    """Block while the server is alive, until `stop_after_s` (None: until interrupted)."""
    deadline = None if stop_after_s is None else time.monotonic() + stop_after_s
    while deadline is None or time.monotonic() < deadline:
        if not triton.is_alive():
            raise ServingError(f"The Triton server stopped on its own: {log.tail()}")
        time.sleep(POLL_S)


@contextlib.contextmanager
def _server_errors(log: ServerLog) -> Iterator[None]:
    """PyTriton's own errors (a model that fails to load, a port in use) as a ServingError
    carrying the end of Triton's log."""
    from pytriton.exceptions import PyTritonError

    try:
        yield
    except (PyTritonError, TimeoutError) as exc:
        raise ServingError(f"Triton could not serve the model: {exc} ({log.tail()})") from exc


def served_kind(model: Path) -> tuple[str, str]:
    """(backend, precision) of what is served (a SavedModel: the native runner, fp32)."""
    path = saved_model_in(model)
    if model_kind(path) == ARTIFACT:
        manifest = read_manifest(path)
        return manifest.backend, manifest.precision
    return native().name, "fp32"
