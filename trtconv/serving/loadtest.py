"""`trtconv bench --scenario server`: serving load measured the MLPerf way.

Each model is served as `trtconv serve` serves it (a child process, loopback), and MLPerf's
LoadGen sends it Poisson arrivals in its Server scenario, one sample per query, through Triton's
gRPC client. A search over LoadGen runs finds the highest rate whose p99 latency meets the
budget. LoadGen is told MLPerf's minimum run of 600 s and capped at the run length asked for, so
a short run is INVALID by MLPerf's rules, and says so.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.backends.registry import worker_environment
from trtconv.core.errors import MissingDependencyError
from trtconv.core.numbers import human
from trtconv.environment import machine_environment
from trtconv.serving.deploy import model_name
from trtconv.serving.latency import (
    next_search_rate,
    p99_interval,
    rate_bounds,
    run_line,
    trace_file_latencies_ms,
)
from trtconv.serving.options import MLPERF_MIN_DURATION_S, ServerBenchOptions
from trtconv.serving.results import LoadRun, ServerBenchResult, ServerRow
from trtconv.serving.server import INSTALL_HINT, ServingError, pytriton, served_kind

LOG = logging.getLogger(__name__)
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 30
PROBE_REQUESTS = 10
NUMPY_TYPES = {"FP32": np.float32, "FP16": np.float16, "FP64": np.float64, "INT64": np.int64,
               "INT32": np.int32, "INT8": np.int8, "UINT8": np.uint8, "BOOL": np.bool_}  # fmt: skip


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
            f"install it: {INSTALL_HINT}."
        ) from exc
    return mlperf_loadgen


@contextlib.contextmanager
def served(model: Path, max_batch_size: int, queue_delay_us: int) -> Iterator[Served]:
    """`trtconv serve MODEL` in a child process (its own session) until the block ends; then
    SIGTERM, and SIGKILL for whatever is left after STOP_TIMEOUT_S."""
    name = model_name(model)
    command = [sys.executable, "-m", "trtconv", "serve", str(model), "--name", name]
    command += ["--max-batch-size", str(max_batch_size), "--queue-delay-us", str(queue_delay_us)]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **worker_environment()}, start_new_session=True,
    )  # fmt: skip
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
            match = re.search("serving " + re.escape(name) + r" at \S+ \(gRPC (\S+)\)", line)
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


def sample_inputs(client: Any, name: str) -> list[Any]:
    """One random sample (batch 1) for every input the served model declares."""
    import tritonclient.grpc as grpc

    metadata = client.get_model_metadata(name, as_json=True)
    rng = np.random.default_rng(0)
    inputs = []
    for tensor in metadata["inputs"]:
        shape = [1 if int(dim) < 0 else int(dim) for dim in tensor["shape"]]
        dtype = NUMPY_TYPES.get(tensor["datatype"])
        if dtype is None:
            raise ServingError(f"{name}: input {tensor['name']} is {tensor['datatype']}, which "
                               "bench --scenario server cannot make random data for.")  # fmt: skip
        array = rng.random(shape).astype(dtype)
        request = grpc.InferInput(tensor["name"], shape, tensor["datatype"])
        request.set_data_from_numpy(array)
        inputs.append(request)
    return inputs


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


def search(
    client: Any, name: str, inputs: list[Any], options: ServerBenchOptions, start_qps: float
) -> list[LoadRun]:
    """LoadGen runs at rates chosen to find the highest whose p99 meets the budget, from
    `start_qps` (`next_search_rate`)."""
    runs: list[LoadRun] = []
    rate, met, missed = start_qps, 0.0, None
    for index in range(options.search_runs):
        run = load_run(client, name, inputs, rate, options.latency_budget_ms, options.run_s)
        runs.append(run)
        line = run_line(run, options.latency_budget_ms)
        LOG.info("%s: run %d of %d %s", name, index + 1, options.search_runs, line)
        if run.meets_budget:
            met = max(met, rate)
        else:
            missed = rate if missed is None else min(missed, rate)
        rate = next_search_rate(rate, run, met, missed, options.run_s)
    return runs


def batch_counts(client: Any, name: str) -> dict[str, int]:
    """Executions per batch size the server ran (Triton's statistics for the model)."""
    stats = client.get_inference_statistics(name, as_json=True)
    counts: dict[str, int] = {}
    for model in stats.get("model_stats", []):
        for batch in model.get("batch_stats", []):
            size = str(batch["batch_size"])
            counts[size] = counts.get(size, 0) + int(batch["compute_infer"].get("count", 0))
    return dict(sorted(counts.items(), key=lambda item: int(item[0])))


def bench_served(model: Path, batching: bool, options: ServerBenchOptions) -> ServerRow:
    """Serve `model` (dynamic batching, or batch 1) and search its rate at the budget."""
    import tritonclient.grpc as grpc

    max_batch = options.max_batch_size if batching else 1
    how = f"dynamic batching up to {max_batch}" if batching else "batch 1"
    LOG.info("serving %s (%s) under LoadGen's Server scenario", model, how)
    with served(model, max_batch, options.queue_delay_us) as server:
        client = grpc.InferenceServerClient(server.grpc_url)
        try:
            inputs = sample_inputs(client, server.name)
            alone_s = probe_latency_s(client, server.name, inputs)
            start = 0.5 / max(alone_s, 1e-4)
            LOG.info("%s: one request at a time takes %s ms", server.name, human(alone_s * 1e3))
            runs = search(client, server.name, inputs, options, start)
            batches = batch_counts(client, server.name)
        finally:
            client.close()
    best = max((r for r in runs if r.meets_budget), key=lambda r: r.completed_qps, default=None)
    backend, precision = served_kind(model)
    return ServerRow(
        model=str(model), label=server.name, backend=backend, precision=precision,
        dynamic_batching=batching, max_batch_size=max_batch,
        max_queue_delay_us=options.queue_delay_us,
        qps_at_budget=best.completed_qps if best else 0.0,
        latency_ms_p50=best.latency_ms_p50 if best else None,
        latency_ms_p90=best.latency_ms_p90 if best else None,
        latency_ms_p99=best.latency_ms_p99 if best else None,
        loadgen_result=best.loadgen_result if best else None,
        loadgen_reasons=best.loadgen_reasons if best else [],
        batches=batches, runs=runs,
        latency_ms_p99_ci95=best.latency_ms_p99_ci95 if best else None,
        qps_at_budget_bounds=rate_bounds(runs, options.latency_budget_ms),
    )  # fmt: skip


def server_bench(options: ServerBenchOptions) -> ServerBenchResult:
    """Every model, with dynamic batching (and batch-1 serving with `compare_batching`)."""
    pytriton()
    loadgen()
    modes = (True, False) if options.compare_batching else (True,)
    rows = [bench_served(model, mode, options) for model in options.models for mode in modes]
    return ServerBenchResult(
        scenario="server",
        latency_budget_ms=options.latency_budget_ms,
        run_s=options.run_s,
        rows=rows,
        ratios_vs_baseline=_ratios(rows),
        batching_gain=_batching_gain(rows),
        notes=[
            f"Each LoadGen run lasted {options.run_s:g} s; MLPerf's Server scenario needs at "
            f"least {MLPERF_MIN_DURATION_S} s, so LoadGen reports these runs INVALID "
            "('Min duration satisfied : NO'): the figures are indicative, not MLPerf results.",
            "p99 intervals: 95% order-statistic (distribution-free) intervals over each run's "
            "query latencies from LoadGen's trace; an open upper end means too few queries.",
        ],
        environment=machine_environment(("nvidia-pytriton", "tritonclient", "mlcommons-loadgen")),
    )


def _ratio(value: float, base: float) -> float | None:
    return round(value / base, 3) if base > 0 else None


def _ratios(rows: list[ServerRow]) -> dict[str, float | None]:
    """Each row's queries/s at budget over the first model's, with the same batching."""
    first = rows[0].model
    base = {r.dynamic_batching: r.qps_at_budget for r in rows if r.model == first}
    return {_key(r): _ratio(r.qps_at_budget, base[r.dynamic_batching]) for r in rows}


def _batching_gain(rows: list[ServerRow]) -> dict[str, float | None]:
    single = {r.model: r.qps_at_budget for r in rows if not r.dynamic_batching}
    return {r.label: _ratio(r.qps_at_budget, single[r.model])
            for r in rows if r.dynamic_batching and r.model in single}  # fmt: skip


def _key(row: ServerRow) -> str:
    return f"{row.label} ({'dynamic batching' if row.dynamic_batching else 'batch 1'})"
