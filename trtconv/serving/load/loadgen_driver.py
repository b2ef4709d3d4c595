"""MLPerf LoadGen driving a served model: `trtconv serve` in a child process (loopback), a
random sample for its inputs, and one LoadGen test whose every sample is an asynchronous gRPC
request (`drive`), its summary read back (`parse_summary`).

The rate search of `bench --scenario server` (serving/load/rate_search.py) and the SingleStream and
Offline scenarios (serving/load/scenarios.py) are built on it. LoadGen is told MLPerf's minimum run
of 600 s and capped at the run length asked for, so a short run is INVALID by MLPerf's rules,
and says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.backends.registry import worker_environment
from trtconv.core.errors import MissingDependencyError
from trtconv.core.processes import dies_with_this_process
from trtconv.measure.server_bench_result import LoadRun
from trtconv.options.server_bench import MLPERF_MIN_DURATION_S
from trtconv.serving.load.latency import (
    p99_interval,
    trace_file_latencies_ms,
)
from trtconv.serving.repository.deploy import model_name
from trtconv.serving.server.serve import ServingError
from trtconv.serving.server.triton_install import SERVE_EXTRA_STEP

LOG = logging.getLogger(__name__)
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 30
PROBE_REQUESTS = 10
NUMPY_TYPES = {
    "FP32": np.float32,
    "FP16": np.float16,
    "FP64": np.float64,
    "INT64": np.int64,
    "INT32": np.int32,
    "INT8": np.int8,
    "UINT8": np.uint8,
    "BOOL": np.bool_,
}


@dataclass(frozen=True)
class Served:
    """A model being served by a `trtconv serve` child: its name and gRPC address."""

    name: str
    grpc_url: str


def loadgen() -> Any:
    """MLPerf LoadGen. Raises MissingDependencyError (exit 3) naming the install."""
    try:
        import mlperf_loadgen
    except ImportError as exc:
        raise MissingDependencyError(
            f"bench --scenario server needs MLPerf LoadGen, which is not importable ({exc}); "
            f"install it: {SERVE_EXTRA_STEP}."
        ) from exc
    return mlperf_loadgen


@contextlib.contextmanager
def served(
    model: Path, max_batch_size: int, queue_delay_us: int, admission: Sequence[str] = ()
) -> Iterator[Served]:
    """`trtconv serve MODEL` in a child process (its own session) until the block ends; then
    SIGTERM, and SIGKILL for whatever is left after STOP_TIMEOUT_S. `admission`: its admission
    control flags (--latency-budget-ms, --admission, --max-queue-size, --queue-timeout-ms) and
    any other serve flags (--shadow)."""
    name = model_name(model)
    command = [sys.executable, "-m", "trtconv", "serve", str(model), "--name", name]
    command += ["--max-batch-size", str(max_batch_size), "--queue-delay-us", str(queue_delay_us)]
    command += list(admission)
    process = subprocess.Popen(
        dies_with_this_process(command),  # a bench killed outright takes its server with it
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **worker_environment()},
        start_new_session=True,
    )
    try:
        yield Served(name, _announced_grpc(process, name))
    finally:
        _stop(process)


def _announced_grpc(process: subprocess.Popen[str], name: str) -> str:
    """The gRPC address from the child's "serving NAME at URL (gRPC ADDRESS)" line; the rest
    of its stderr is drained in a thread (kept for an error message)."""
    assert process.stderr is not None
    lines: list[str] = []
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.rstrip())
            match = re.search("serving " + re.escape(name) + r" at \S+ \(gRPC ([^;)\s]+)", line)
            if match and not found:
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(START_TIMEOUT_S)
    if not found:
        raise ServingError(f"trtconv serve did not start: {' | '.join(lines[-5:]) or 'no output'}")
    return found[0]


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # a grandchild that outlived it


def sample_arrays(client: Any, name: str) -> dict[str, np.ndarray]:
    """One random sample (batch 1) for every input the served model declares."""
    metadata = client.get_model_metadata(name, as_json=True)
    rng = np.random.default_rng(0)
    arrays: dict[str, np.ndarray] = {}
    for tensor in metadata["inputs"]:
        shape = [1 if int(dim) < 0 else int(dim) for dim in tensor["shape"]]
        dtype = NUMPY_TYPES.get(tensor["datatype"])
        if dtype is None:
            raise ServingError(
                f"{name}: input {tensor['name']} is {tensor['datatype']}, which "
                "bench --scenario server cannot make random data for."
            )
        arrays[tensor["name"]] = rng.random(shape).astype(dtype)
    return arrays


def sample_inputs(client: Any, name: str) -> list[Any]:
    """`sample_arrays` as gRPC request inputs."""
    import tritonclient.grpc as grpc
    from tritonclient.utils import np_to_triton_dtype

    inputs = []
    for tensor, array in sample_arrays(client, name).items():
        request = grpc.InferInput(tensor, list(array.shape), np_to_triton_dtype(array.dtype))
        request.set_data_from_numpy(array)
        inputs.append(request)
    return inputs


def served_totals(client: Any, name: str) -> tuple[int, int]:
    """(requests served, their total ns in the server: queue and compute) so far, from
    Triton's statistics for the model: what the server itself took, whatever the client's
    own delays."""
    stats = client.get_inference_statistics(name).model_stats
    return (
        sum(model.inference_stats.success.count for model in stats),
        sum(model.inference_stats.success.ns for model in stats),
    )


def queue_policy(client: Any, name: str) -> tuple[int | None, float | None]:
    """(max_queue_size, queue timeout ms) of the served model's batcher; None where unset."""
    policy = client.get_model_config(name).config.dynamic_batching.default_queue_policy
    return policy.max_queue_size or None, policy.default_timeout_microseconds / 1000 or None


def probe_latency_s(client: Any, name: str, inputs: list[Any]) -> float:
    """Median seconds of one request at a time (where the rate search starts)."""
    times = []
    for _ in range(PROBE_REQUESTS):
        start = time.perf_counter()
        client.infer(name, inputs)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def load_run(
    client: Any, name: str, inputs: list[Any], qps: float, budget_ms: float, run_s: float
) -> LoadRun:
    """One LoadGen Server run at `qps` (Poisson arrivals), performance only."""
    lg = loadgen()
    settings = lg.TestSettings()
    settings.scenario, settings.mode = lg.TestScenario.Server, lg.TestMode.PerformanceOnly
    settings.server_target_qps = qps
    settings.server_target_latency_ns = int(budget_ms * 1e6)
    settings.min_duration_ms = MLPERF_MIN_DURATION_S * 1000
    settings.max_duration_ms = int(run_s * 1000)
    settings.min_query_count = 1
    summary, latencies, errors = drive(client, name, inputs, settings)
    run = parse_summary(summary, qps, budget_ms, errors)
    run.queries = run.queries or len(latencies)  # LoadGen's summary may not count them
    run.latency_ms_p99_ci95 = p99_interval(latencies)
    return run


def drive(client: Any, name: str, inputs: list[Any], settings: Any) -> tuple[str, Any, int]:
    """One LoadGen test with `settings`, each sample sent to the served model `name` as its own
    asynchronous gRPC request: (LoadGen's summary, every query's latency in ms from its trace,
    how many requests failed)."""
    lg = loadgen()
    errors: list[str] = []

    def issue(samples: list[Any]) -> None:
        for sample in samples:
            client.async_infer(name, inputs, callback=_completion(lg, sample.id, errors))

    with tempfile.TemporaryDirectory(prefix="trtconv-loadgen-") as folder:
        logs = lg.LogSettings()
        logs.log_output.outdir = folder
        logs.log_output.copy_summary_to_stdout = False
        logs.enable_trace = True  # every query's latency, for the p99's interval
        sut = lg.ConstructSUT(issue, lambda: None)
        qsl = lg.ConstructQSL(1, 1, lambda samples: None, lambda samples: None)
        try:
            lg.StartTestWithLogSettings(sut, qsl, settings, logs)
        finally:
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
        summary = (Path(folder) / "mlperf_log_summary.txt").read_text()
        latencies = trace_file_latencies_ms(Path(folder) / "mlperf_log_trace.json")
    return summary, latencies, len(errors)


def _completion(lg: Any, sample_id: int, errors: list[str]) -> Any:
    def done(result: Any, error: Any) -> None:
        if error is not None:
            errors.append(str(error))
        lg.QuerySamplesComplete([lg.QuerySampleResponse(sample_id, 0, 0)])

    return done


def parse_summary(summary: str, qps: float, budget_ms: float, errors: int) -> LoadRun:
    """A LoadRun from LoadGen's mlperf_log_summary.txt."""

    def number(label: str) -> float:
        match = re.search("^" + re.escape(label) + r"\s*:\s*([0-9.eE+-]+)", summary, re.M)
        return float(match.group(1)) if match else float("nan")

    verdict = re.search(r"Result is\s*:\s*(\w+)", summary)
    unmet = re.findall(r"^\s*(.+? satisfied\s*:\s*NO)\s*$", summary, re.M)
    p99 = number("99.00 percentile latency (ns)") / 1e6
    completed = number("Completed samples per second")
    processed = re.search(r"Processed (\d+) queries", summary)
    return LoadRun(
        target_qps=round(qps, 3),
        completed_qps=round(completed, 3),
        latency_ms_p50=round(number("50.00 percentile latency (ns)") / 1e6, 3),
        latency_ms_p90=round(number("90.00 percentile latency (ns)") / 1e6, 3),
        latency_ms_p99=round(p99, 3),
        meets_budget=bool(p99 <= budget_ms) and errors == 0,
        loadgen_result=verdict.group(1) if verdict else "UNKNOWN",
        loadgen_reasons=[" ".join(reason.split()) for reason in unmet],
        queries=int(processed.group(1)) if processed else 0,
        errors=errors,
    )


def batch_counts(client: Any, name: str, since: dict[str, int] | None = None) -> dict[str, int]:
    """Executions per batch size the server ran (Triton's statistics for the model), less those
    counted in `since` (taken before the load: serve's own warm-up is not the load's)."""
    stats = client.get_inference_statistics(name, as_json=True)
    counts: dict[str, int] = {}
    for model in stats.get("model_stats", []):
        for batch in model.get("batch_stats", []):
            size = str(batch["batch_size"])
            counts[size] = counts.get(size, 0) + int(batch["compute_infer"].get("count", 0))
    counts = {size: n - (since or {}).get(size, 0) for size, n in counts.items()}
    return dict(sorted(((k, n) for k, n in counts.items() if n), key=lambda item: int(item[0])))
