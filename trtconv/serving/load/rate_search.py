"""`trtconv bench --scenario server`: serving load measured the MLPerf way.

Each model is served as `trtconv serve` serves it, and LoadGen sends it Poisson arrivals in its
Server scenario, one sample per query (serving/load/loadgen_driver.py). A search over LoadGen runs
finds the highest rate whose p99 latency meets the budget.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trtconv.core.numbers import human
from trtconv.facts.environment import machine_environment
from trtconv.measure.server_bench_result import LoadRun, OverloadRow, ServerBenchResult, ServerRow
from trtconv.options.server_bench import MLPERF_MIN_DURATION_S, ServerBenchOptions
from trtconv.outputs.confidence import FAILED, PASSED
from trtconv.serving.load.latency import budget_verdict, next_search_rate, rate_bounds, run_line
from trtconv.serving.load.loadgen_driver import (
    batch_counts,
    load_run,
    loadgen,
    probe_latency_s,
    queue_policy,
    sample_arrays,
    sample_inputs,
    served,
    served_totals,
)
from trtconv.serving.load.overload import capacity, offered_run
from trtconv.serving.server.served_from import served_kind
from trtconv.serving.server.triton_install import binaries

LOG = logging.getLogger(__name__)
# A miss is taken for a stall when the p90 stayed within this share of the budget.
STALL_P90_SHARE = 0.5


def search(
    client: Any, name: str, inputs: list[Any], options: ServerBenchOptions, start_qps: float
) -> list[LoadRun]:
    """LoadGen runs at rates chosen to find the highest whose p99 surely meets the budget, from
    `start_qps` (`next_search_rate`), each decided on its p99's interval (`search_step`). A run
    that missed in its tail only (`missed_by_a_stall`) is run again at once at the same rate,
    and the second run decides: two searches back to back then agree."""
    runs: list[LoadRun] = []
    rate, met, missed = start_qps, 0.0, None
    budget = options.latency_budget_ms
    for index in range(options.search_runs):
        told = f"{name}: run {index + 1} of {options.search_runs}"
        run = load_run(client, name, inputs, rate, budget, options.run_s)
        LOG.info("%s %s", told, run_line(run, budget))
        if missed_by_a_stall(run, budget):
            runs.append(run)
            run = load_run(client, name, inputs, rate, budget, options.run_s)
            LOG.info(
                "%s again (the miss was in the tail only, p90 within half the budget: a stall?) %s",
                told,
                run_line(run, budget),
            )
        runs.append(run)
        met, missed = search_step(rate, run, budget, met, missed)
        rate = next_search_rate(rate, run, met, missed, options.run_s)
    return runs


def search_step(
    rate: float, run: LoadRun, budget_ms: float, met: float, missed: float | None
) -> tuple[float, float | None]:
    """(the best rate surely met, the lowest not shown met) after `run` at `rate`. Met: the p99's
    interval lies within the budget, without errors. Not met: the rest, a straddling interval
    included (the search goes below it), except a run whose interval is open above: too few
    queries to say either way, it moves neither bound (the next rate rises to where one can)."""
    verdict = budget_verdict(run, budget_ms)
    if verdict == PASSED and not run.errors:
        return max(met, rate), missed
    interval = run.latency_ms_p99_ci95
    if verdict != FAILED and interval is not None and interval[1] is None and not run.errors:
        return met, missed
    return met, rate if missed is None else min(missed, rate)


def missed_by_a_stall(run: LoadRun, budget_ms: float) -> bool:
    """A run whose p99 surely missed the budget while its p90 stayed within half of it, without
    errors: a pause of the shared machine delays the last percent of queries by much; a server
    near its capacity lengthens its whole tail (its p90 close to its p99)."""
    return (
        budget_verdict(run, budget_ms) == FAILED
        and run.latency_ms_p90 <= STALL_P90_SHARE * budget_ms
        and not run.errors
    )


def bench_served(model: Path, batching: bool, options: ServerBenchOptions) -> ServerRow:
    """Serve `model` (dynamic batching, or batch 1) and search its rate at the budget."""
    import tritonclient.grpc as grpc

    max_batch = options.max_batch_size if batching else 1
    how = f"dynamic batching up to {max_batch}" if batching else "batch 1"
    LOG.info("serving %s (%s) under LoadGen's Server scenario", model, how)
    # No queue policy (serve's default): the search measures how fast the served path answers
    # within the budget, where a burst would time out with one (serving/repository/admission.py).
    flags = ["--latency-budget-ms", str(options.latency_budget_ms)]
    flags += ["--shadow", str(options.shadow)] if options.shadow is not None else []
    with served(model, max_batch, options.queue_delay_us, flags) as server:
        client = grpc.InferenceServerClient(server.grpc_url)
        try:
            warm = batch_counts(client, server.name)  # serve's warm-up
            inputs = sample_inputs(client, server.name)
            alone_s = probe_latency_s(client, server.name, inputs)
            start = 0.5 / max(alone_s, 1e-4)
            LOG.info("%s: one request at a time takes %s ms", server.name, human(alone_s * 1e3))
            runs = search(client, server.name, inputs, options, start)
            batches = batch_counts(client, server.name, since=warm)
        finally:
            client.close()
    best = headline_run(runs, options.latency_budget_ms)
    backend, precision = served_kind(model)
    return ServerRow(
        model=str(model),
        label=server.name,
        backend=backend,
        precision=precision,
        dynamic_batching=batching,
        max_batch_size=max_batch,
        max_queue_delay_us=options.queue_delay_us,
        qps_at_budget=best.completed_qps if best else 0.0,
        latency_ms_p50=best.latency_ms_p50 if best else None,
        latency_ms_p90=best.latency_ms_p90 if best else None,
        latency_ms_p99=best.latency_ms_p99 if best else None,
        loadgen_result=best.loadgen_result if best else None,
        loadgen_reasons=best.loadgen_reasons if best else [],
        batches=batches,
        runs=runs,
        latency_ms_p99_ci95=best.latency_ms_p99_ci95 if best else None,
        qps_at_budget_bounds=rate_bounds(runs, options.latency_budget_ms),
        shadow_rate=options.shadow,
    )


def headline_run(runs: Sequence[LoadRun], budget_ms: float) -> LoadRun | None:
    """The run whose rate is reported: the fastest that surely met the budget (its p99's
    interval within it, no errors), as the search decides; where no run was decided so, the
    fastest whose point p99 met it (short runs hold too few queries to bound their p99)."""
    surely = [r for r in runs if budget_verdict(r, budget_ms) == PASSED and not r.errors]
    candidates = surely or [r for r in runs if r.meets_budget]
    return max(candidates, key=lambda r: r.completed_qps, default=None)


def overload_row(model: Path, options: ServerBenchOptions) -> OverloadRow:
    """Serve `model` (dynamic batching, the bench's budget), measure its capacity with a closed
    loop, then offer each multiple of it for a run (serving/load/overload.py)."""
    import tritonclient.grpc as grpc

    # The overload curve is what admission control holds: the server's queue policy on.
    budget = ["--latency-budget-ms", str(options.latency_budget_ms), "--admission"]
    with served(model, options.max_batch_size, options.queue_delay_us, budget) as server:
        client = grpc.InferenceServerClient(server.grpc_url)
        try:
            arrays = sample_arrays(client, server.name)
            size, timeout = queue_policy(client, server.name)
            rate = capacity(server.grpc_url, server.name, arrays, options.run_s)
            LOG.info("%s: capacity %s requests/s (closed loop)", server.name, human(rate))
            runs = []
            for multiple in options.offered:
                count, ns = served_totals(client, server.name)
                run = offered_run(
                    server.grpc_url,
                    server.name,
                    arrays,
                    multiple * rate,
                    options.run_s,
                    options.latency_budget_ms,
                )
                after_count, after_ns = served_totals(client, server.name)
                run.multiple = multiple
                if after_count > count:
                    run.server_latency_ms_mean = round(
                        (after_ns - ns) / (after_count - count) / 1e6, 3
                    )
                LOG.info("%s: offered %gx: %s", server.name, multiple, run.to_json())
                runs.append(run)
        finally:
            client.close()
    return OverloadRow(
        model=str(model),
        label=server.name,
        capacity_qps=round(rate, 3),
        max_queue_size=size,
        queue_timeout_ms=timeout,
        runs=runs,
    )


def server_bench(options: ServerBenchOptions) -> ServerBenchResult:
    """Every model, with dynamic batching (and batch-1 serving with `compare_batching`); with
    `offered`, each model's overload curve instead of the rate search."""
    binaries()  # PyTriton's Triton, or one sentence naming the install
    loadgen()
    if options.offered:
        return ServerBenchResult(
            scenario="server",
            latency_budget_ms=options.latency_budget_ms,
            run_s=options.run_s,
            rows=[],
            ratios_vs_baseline={},
            batching_gain={},
            overload=[overload_row(model, options) for model in options.models],
            notes=[
                "Offered load: Poisson arrivals of one-sample requests at each multiple of the "
                "capacity (served requests/s with 16 in flight, closed loop), from a Python "
                "client on the same machine; goodput counts the requests served within the "
                "budget. Refused: the queue was full; timed out: still queued at the queue "
                "timeout (both UNAVAILABLE). The served latencies are the client's, its own "
                "delays included; 'server mean' is what the server took for them (queue and "
                "compute, Triton's statistics): where the two part, the client is the bound."
            ],
            environment=machine_environment(("nvidia-pytriton", "tritonclient")),
        )
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
    return {
        r.label: _ratio(r.qps_at_budget, single[r.model])
        for r in rows
        if r.dynamic_batching and r.model in single
    }


def _key(row: ServerRow) -> str:
    return f"{row.label} ({'dynamic batching' if row.dynamic_batching else 'batch 1'})"
