"""`trtconv bench --scenario single-stream|offline`: MLPerf LoadGen's SingleStream and Offline
scenarios against each model served as `trtconv serve` serves it.

SingleStream sends one query of one sample and the next when it is answered: latency without
queueing (its 90th percentile, with LoadGen's early-stopping estimate). Offline sends every
sample at once and reports samples/s: the server's batcher forms the largest batches it can.
Each is one LoadGen run of `--duration` seconds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from trtconv.facts.environment import machine_environment
from trtconv.measure.server_bench_result import ScenarioBenchResult, ScenarioRow
from trtconv.options.server_bench import MLPERF_MIN_DURATION_S, OFFLINE, ScenarioBenchOptions
from trtconv.serving.load.latency import p99_interval
from trtconv.serving.load.loadgen_driver import (
    batch_counts,
    drive,
    loadgen,
    parse_summary,
    probe_latency_s,
    sample_inputs,
    served,
)
from trtconv.serving.server.served_from import served_kind
from trtconv.serving.server.triton_install import binaries

# Offline: LoadGen issues one query of expected rate x minimum duration samples. A pilot run
# of PILOT_S seconds at PILOT_HEADROOM / (one request's latency) measures the served rate, and
# the run expects RUN_HEADROOM times it, so its query lasts at least the run asked for.
PILOT_S, PILOT_HEADROOM, RUN_HEADROOM = 1.0, 4.0, 1.2


def scenario_settings(lg: Any, scenario: str, run_s: float, rate: float) -> Any:
    """LoadGen's settings for one run of `run_s` seconds at about `rate` samples/s (Offline)
    or `1 / rate` s per query (SingleStream). SingleStream keeps MLPerf's 600 s minimum (a
    short run is INVALID and says so); Offline's minimum is the run itself, since LoadGen sizes
    its one query by it."""
    settings = lg.TestSettings()
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_query_count = 1
    if scenario == OFFLINE:
        settings.scenario = lg.TestScenario.Offline
        settings.offline_expected_qps = rate
        settings.min_duration_ms = int(run_s * 1000)
    else:
        settings.scenario = lg.TestScenario.SingleStream
        settings.single_stream_expected_latency_ns = int(1e9 / rate)
        settings.min_duration_ms = MLPERF_MIN_DURATION_S * 1000
        settings.max_duration_ms = int(run_s * 1000)
    return settings


def scenario_row(model: Path, options: ScenarioBenchOptions) -> ScenarioRow:
    """Serve `model` with dynamic batching and run it once in the scenario."""
    import tritonclient.grpc as grpc

    lg = loadgen()
    # Offline queues every sample at once and SingleStream has no budget: the server holds
    # whatever is queued, with no queue policy (serve's default: serving/repository/admission.py).
    with served(model, options.max_batch_size, options.queue_delay_us) as server:
        client = grpc.InferenceServerClient(server.grpc_url)
        try:
            warm = batch_counts(client, server.name)  # serve's warm-up
            inputs = sample_inputs(client, server.name)
            rate = 1 / max(probe_latency_s(client, server.name, inputs), 1e-4)
            if options.scenario == OFFLINE:
                pilot = scenario_settings(lg, OFFLINE, PILOT_S, PILOT_HEADROOM * rate)
                rate = RUN_HEADROOM * throughput(drive(client, server.name, inputs, pilot)[0])
            settings = scenario_settings(lg, options.scenario, options.run_s, rate)
            summary, latencies, errors = drive(client, server.name, inputs, settings)
            batches = batch_counts(client, server.name, since=warm)
        finally:
            client.close()
    run = parse_summary(summary, 0.0, float("inf"), errors)
    backend, precision = served_kind(model)
    return ScenarioRow(
        model=str(model),
        label=server.name,
        backend=backend,
        precision=precision,
        completed_qps=round(throughput(summary), 3),
        latency_ms_p50=run.latency_ms_p50,
        latency_ms_p90=run.latency_ms_p90,
        latency_ms_p99=run.latency_ms_p99,
        latency_ms_p99_ci95=p99_interval(latencies),
        early_stopping=early_stopping(summary),
        loadgen_result=run.loadgen_result,
        loadgen_reasons=run.loadgen_reasons,
        queries=len(latencies),
        errors=errors,
        batches=batches,
    )


def throughput(summary: str) -> float:
    """Offline's "Samples per second", SingleStream's "QPS w/ loadgen overhead"."""
    for label in ("Samples per second", "QPS w/ loadgen overhead"):
        match = re.search("^" + re.escape(label) + r"\s*:\s*([0-9.eE+-]+)", summary, re.M)
        if match:
            return float(match.group(1))
    return float("nan")


def early_stopping(summary: str) -> list[str]:
    """LoadGen's early-stopping result lines, joined where it wraps them."""
    block = summary.split("Early Stopping Result:", 1)
    if len(block) < 2:
        return []
    text = block[1].split("\n\n", 1)[0]
    items = [" ".join(item.split()) for item in text.split("*")[1:]]
    return [item for item in items if item]


def scenario_bench(options: ScenarioBenchOptions) -> ScenarioBenchResult:
    """Every model, one LoadGen run each in `options.scenario`."""
    binaries()  # PyTriton's Triton, or one sentence naming the install
    loadgen()
    rows = [scenario_row(model, options) for model in options.models]
    base = rows[0].completed_qps
    ratios = {r.label: round(r.completed_qps / base, 3) if base > 0 else None for r in rows}
    minimum = (
        f"MLPerf's Offline scenario needs at least {MLPERF_MIN_DURATION_S} s; LoadGen was given "
        f"{options.run_s:g} s as its minimum (it sizes its one query by it), so its VALID here "
        "is not an MLPerf VALID."
        if options.scenario == OFFLINE
        else f"Each LoadGen run lasted {options.run_s:g} s; MLPerf's SingleStream scenario needs "
        f"at least {MLPERF_MIN_DURATION_S} s, so LoadGen reports it INVALID ('Min duration "
        "satisfied : NO'): the figures are indicative, not MLPerf results."
    )
    return ScenarioBenchResult(
        scenario=options.scenario,
        run_s=options.run_s,
        rows=rows,
        ratios_vs_baseline=ratios,
        notes=[
            minimum,
            "p99 intervals: 95% order-statistic intervals over the query latencies "
            "from LoadGen's trace (open: too few queries).",
        ],
        environment=machine_environment(("nvidia-pytriton", "tritonclient", "mlcommons-loadgen")),
    )
