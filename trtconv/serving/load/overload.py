"""Offered load against a served model: what a server does with more than it can serve.

A closed loop (`capacity`) measures what the server answers per second with many requests in
flight; an open loop (`offered_run`) then sends Poisson arrivals at a multiple of it for a
fixed time, each one request of one sample through Triton's asyncio gRPC client, and sorts every
answer: served (and its latency), refused at a full queue, timed out in the queue (both
UNAVAILABLE, told apart by Triton's message), or another error. Goodput is what was served
within the latency budget, per second of the run.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from trtconv.measure.server_bench_result import OfferedRun
from trtconv.serving.load.latency import percentile_ms

# Triton's answers to a request its queue policy turned away (gRPC UNAVAILABLE, HTTP 503).
QUEUE_FULL = "Exceeds maximum queue size"
QUEUE_TIMEOUT = "Request timeout expired"
CLOSED_LOOP_IN_FLIGHT = 16
REFUSED_PAUSE_S = 0.001
CLOSED_LOOP_WARMUP_S = 0.5
# How long an open-loop run waits for its last answers after it stops sending.
SETTLE_S = 5.0


def classify(error: BaseException | None) -> str:
    """'served', 'refused', 'timed_out' or 'error' for one answer."""
    if error is None:
        return "served"
    text = str(error)
    if QUEUE_FULL in text:
        return "refused"
    if QUEUE_TIMEOUT in text:
        return "timed_out"
    return "error"


def tally(
    offered_qps: float,
    answers: Sequence[tuple[str, float]],
    budget_ms: float,
    run_s: float,
) -> OfferedRun:
    """An OfferedRun from (kind, latency ms) per request sent."""
    kinds = [kind for kind, _ in answers]
    served = np.array([ms for kind, ms in answers if kind == "served"])
    refused = np.array([ms for kind, ms in answers if kind == "refused"])

    def p(values: np.ndarray, level: float) -> float | None:
        return round(percentile_ms(values, level), 3) if len(values) else None

    sent = len(answers)
    return OfferedRun(
        offered_qps=round(offered_qps, 3),
        sent=sent,
        served=kinds.count("served"),
        refused=kinds.count("refused"),
        timed_out=kinds.count("timed_out"),
        refused_share=round(kinds.count("refused") / sent, 4) if sent else 0.0,
        timed_out_share=round(kinds.count("timed_out") / sent, 4) if sent else 0.0,
        errors=kinds.count("error"),
        goodput_qps=round(float(np.sum(served <= budget_ms)) / run_s, 3),
        latency_ms_p50=p(served, 0.5),
        latency_ms_p99=p(served, 0.99),
        refused_latency_ms_p99=p(refused, 0.99),
        run_s=run_s,
    )


def capacity(
    url: str,
    name: str,
    arrays: dict[str, np.ndarray],
    seconds: float,
    in_flight: int = CLOSED_LOOP_IN_FLIGHT,
) -> float:
    """Requests/s the server serves with `in_flight` requests in flight for `seconds` (keep it
    within the server's queue: a refused request is retried after REFUSED_PAUSE_S)."""
    return asyncio.run(_closed_loop(url, name, arrays, seconds, in_flight))


def offered_run(
    url: str,
    name: str,
    arrays: dict[str, np.ndarray],
    qps: float,
    seconds: float,
    budget_ms: float,
    seed: int = 0,
) -> OfferedRun:
    """Poisson arrivals at `qps` for `seconds`, every answer sorted (see the module)."""
    answers = asyncio.run(_open_loop(url, name, arrays, qps, seconds, seed))
    return tally(qps, answers, budget_ms, seconds)


def _inputs(arrays: dict[str, np.ndarray]) -> list[Any]:
    import tritonclient.grpc.aio as grpc
    from tritonclient.utils import np_to_triton_dtype

    inputs = []
    for tensor, array in arrays.items():
        request = grpc.InferInput(tensor, list(array.shape), np_to_triton_dtype(array.dtype))
        request.set_data_from_numpy(array)
        inputs.append(request)
    return inputs


async def _one(client: Any, name: str, inputs: list[Any]) -> tuple[str, float]:
    start = time.perf_counter()
    try:
        await client.infer(name, inputs)
        error: BaseException | None = None
    except Exception as exc:  # the server's answer, sorted by classify
        error = exc
    return classify(error), (time.perf_counter() - start) * 1000


async def _closed_loop(
    url: str, name: str, arrays: dict[str, np.ndarray], seconds: float, in_flight: int
) -> float:
    """Served requests/s over `seconds`, after CLOSED_LOOP_WARMUP_S not counted (the client's
    connection and the server's first batches)."""
    import tritonclient.grpc.aio as grpc

    client = grpc.InferenceServerClient(url)
    inputs = _inputs(arrays)
    done = 0
    counted_from = time.perf_counter() + CLOSED_LOOP_WARMUP_S
    deadline = counted_from + seconds

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            kind, _ = await _one(client, name, inputs)
            done += kind == "served" and time.perf_counter() >= counted_from
            if kind != "served":
                await asyncio.sleep(REFUSED_PAUSE_S)  # no spinning on refusals

    try:
        await asyncio.gather(*(worker() for _ in range(in_flight)))
    finally:
        await client.close()
    return done / seconds


async def _open_loop(
    url: str, name: str, arrays: dict[str, np.ndarray], qps: float, seconds: float, seed: int
) -> list[tuple[str, float]]:
    import tritonclient.grpc.aio as grpc

    client = grpc.InferenceServerClient(url)
    inputs = _inputs(arrays)
    rng = np.random.default_rng(seed)
    tasks: list[asyncio.Task[tuple[str, float]]] = []
    start = time.perf_counter()
    due = 0.0
    try:
        while True:
            due += float(rng.exponential(1 / qps))
            if due >= seconds:
                break
            wait = start + due - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            tasks.append(asyncio.create_task(_one(client, name, inputs)))
        finished, late = await asyncio.wait(tasks, timeout=SETTLE_S) if tasks else (set(), set())
        for task in late:
            task.cancel()
        return [task.result() if task in finished else ("error", float("nan")) for task in tasks]
    finally:
        await client.close()
