"""What `serve` decides before the server starts: the batch limit, the warm-up figures, admission
control and the model instances.

A runner in trtconv's process is warmed up at batch 1 and at the largest batch; the medians are
what admission control derives from (serving/repository/admission.py) and what the instance
count is chosen from. With `--on-failing fallback` the native model may serve too: the slower of
the two decides, so that admission control guards the native model's own capacity once it serves.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from trtconv.core.numbers import human
from trtconv.options.serve import OnFailing, ServeOptions
from trtconv.serving.repository.admission import ADMISSION_OFF, Admission, admission
from trtconv.serving.repository.fixed_inputs import ServedModel
from trtconv.serving.server.batch_runner import warm_up as timed_warm_up
from trtconv.serving.server.served_from import ServedFrom
from trtconv.serving.server.start_check import Expected, expected_answers
from trtconv.serving.server.triton_process import ServingError

WARMUP_ERROR_CHARS = 400  # of a model's error in the warm-up, on the one line that says it
# Instances chosen at start (serve without --instances): at most this many, and as many as keep
# a request at batch 1 within this share of the latency budget.
MAX_AUTO_INSTANCES = 4
INSTANCE_BUDGET_SHARE = 0.5

# The native model's warm-up (batch 1 and `largest` medians in ms) for a fallback, given the
# largest batch and whether requests are batched.
NativeWarmUp = Callable[[int, bool], tuple[float, float]]


@dataclass(frozen=True)
class Plan:
    """What serving one runner was decided with before the server starts: the batch limit
    (and why), the warm-up medians in ms (batch 1, largest batch) and the queue policy; with a
    fallback, the native model's medians (`native_warm`); the answers the served warm-up must
    reproduce (`expected`: start_check.py)."""

    batched: bool
    max_batch: int  # 0: a fixed-batch model, not batched
    cap_why: str
    warm: tuple[float, float]
    policy: Admission
    instances: int = 1
    instances_why: str = ""
    native_warm: tuple[float, float] | None = None
    expected: tuple[Expected, ...] = ()


def instance_threads(threads: int | None, instances: int) -> int | None:
    """Intra-op threads per instance: `threads` (else the cores) divided between the
    instances, at least 1; None (the runner's default) for one instance without --threads."""
    if instances == 1:
        return threads
    return max(1, (threads or len(os.sched_getaffinity(0))) // instances)


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


def plan(
    runner: ServedModel,
    options: ServeOptions,
    source: ServedFrom,
    native_warm_up: NativeWarmUp | None = None,
) -> Plan:
    """Cap the batch at the artifact's range, warm the runner up (and, with a shadow check, its
    native model: `native_warm_up`), derive admission control and the instances; with
    `--on-failing fallback` from the slower of the two, which may serve."""
    signature = runner.signature
    batched = signature.fixed_batch is None
    cap, cap_why = source.batch_cap()
    max_batch = min(options.max_batch_size, cap) if cap else options.max_batch_size
    max_batch = max_batch if batched else 0
    largest = max_batch or signature.fixed_batch or 1
    warm = warm_up(runner, largest, batched)
    expected = expected_answers(runner, largest, batched)  # warm: it ran these shapes
    native = native_warm_up(largest, batched) if native_warm_up is not None else None
    fallback = native is not None and options.on_failing == OnFailing.FALLBACK
    slower = (max(warm[0], native[0]), max(warm[1], native[1])) if native and fallback else warm
    measured = " measured at start" + (
        ", the slower of the artifact and its native model (--on-failing fallback)"
        if fallback
        else ""
    )
    policy = (
        admission(
            options.latency_budget_ms,
            max_batch or 1,
            slower[1],
            measured=measured,
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
        else auto_instances(slower[0], options.latency_budget_ms, cores)
    )
    return Plan(
        batched=batched,
        max_batch=max_batch,
        cap_why=cap_why,
        warm=warm,
        policy=policy,
        instances=count,
        instances_why=why,
        native_warm=native,
        expected=expected,
    )


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
