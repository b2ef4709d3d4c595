"""Interleaved rounds: every model's worker stays loaded, and each is timed one round at a time.

A round times each model in turn at one batch size (native, A, B, native, A, B, ...): whatever
makes the machine faster or slower for a while (other load, clocks, thermal state) hits every
model within the same round, and the round-to-round spread is what the bootstrap intervals of
`trtconv.measure.stats` are drawn from. The timed budget of a batch size (seconds or calls) is split
between the rounds, so interleaving costs about what one long loop per model cost, plus the
warm-up and a few milliseconds of messages per round.

With a speed goal (a release's `min_speedup` / `max_latency_ms_p99` gates), rounds are added at
the goal's batch size while some model's interval straddles a threshold, until every one is
decided or the goal's time limit would be passed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, TypeVar

import numpy as np

from trtconv.backends import registry
from trtconv.bench.messages import (
    FINISH,
    ROUND,
    Finished,
    Loaded,
    Request,
    RoundSamples,
    WorkerFailure,
    WorkerSpec,
)
from trtconv.core import errors
from trtconv.core.errors import TrtconvError
from trtconv.core.lazy import TF_LOG_LEVEL
from trtconv.core.results import JsonResult
from trtconv.measure import stats
from trtconv.measure.bench_result import Settings
from trtconv.measure.loop_budget import Budget
from trtconv.options.bench import SpeedGoal
from trtconv.outputs.confidence import INCONCLUSIVE, at_least, at_most

log = logging.getLogger(__name__)

WORKER_MODULE = "trtconv.cli.bench_worker"
# A worker whose stdin closed ends within a round; one that does not is killed after this long.
CLOSE_TIMEOUT_S = 5.0
# Extra rounds are added in blocks of this many (at least), the intervals recomputed after each.
MIN_EXTRA_BLOCK = 2
# The first round of each batch size starts with the full warm-up. Later rounds start with
# REWARM_CALLS untimed calls: the first call after another model ran was 3-6x slower than the rest
# (digits-cnn: TF 1.8 vs 0.65 ms, ONNX Runtime 0.26 vs 0.04 ms; the second TF call 1.2 ms), as
# caches and thread pools wake up. They are skipped when they would cost more than REWARM_SHARE of
# the round (a slow model: its wake-up is a small part of one call).
REWARM_CALLS = 2
REWARM_SHARE = 0.05
NO_WARMUP = Budget(iterations=0)

# One round of one model, as the worker reports it (trtconv.bench.worker.measure_batch).
Round = RoundSamples
Reply = TypeVar("Reply", bound=JsonResult)


def worker_error(failure: WorkerFailure, label: str) -> TrtconvError:
    """The error a worker reported, as its trtconv type."""
    cls = getattr(errors, failure.error.type, None)
    if not (isinstance(cls, type) and issubclass(cls, TrtconvError)):
        cls = TrtconvError
    return cls(f"Benchmark of {label} failed: {failure.error.message}")


def read_reply(stdout: str, reply: type[Reply], label: str) -> Reply | None:
    """The worker's reply in the last JSON line of its output `stdout`, read as `reply`; None
    when there is none. Raises the worker's error (as its trtconv type) when it reported one."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    try:
        document = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    if not isinstance(document, dict):
        return None
    if "error" in document:
        raise worker_error(WorkerFailure.from_json(document), label)
    return reply.from_json(document)


def worker_command(spec: WorkerSpec, workdir: Path, index: int, *flags: str) -> list[str]:
    """The command line of the worker for `spec` (written to workdir/spec-INDEX.json)."""
    spec_path = workdir / f"spec-{index}.json"
    spec.save(spec_path)
    return [sys.executable, "-m", WORKER_MODULE, str(spec_path), *flags]


def worker_environment() -> dict[str, str]:
    """The worker's environment: ours, backends registered at run time, quiet TensorFlow."""
    env = {**os.environ, **registry.worker_environment()}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", TF_LOG_LEVEL)
    return env


class Worker:
    """One model's worker process, loaded and waiting for rounds (`worker.serve`).

    A context manager: leaving it ends the process (killed if it is still running), also when
    the parent is interrupted. `loaded` holds what the worker reported once loaded.
    """

    def __init__(self, spec: WorkerSpec, workdir: Path, index: int) -> None:
        self.label = spec.label
        self.log_path = workdir / f"worker-{index}.log"
        command = worker_command(spec, workdir, index, "--serve")
        log.debug("running %s", " ".join(command))
        with self.log_path.open("w") as stderr:  # a file: a full pipe would block the worker
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=worker_environment(),
            )
        self.loaded: Loaded | None = None

    def __enter__(self) -> Worker:
        try:
            self.loaded = self._read(Loaded)
        except BaseException:  # a load error or an interrupt: the process must not outlive us
            self.close(kill=True)
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def request(self, message: Request, reply: type[Reply]) -> Reply:
        """Send one request; return the worker's reply, read as `reply`. Raises the worker's
        error."""
        stdin: IO[str] | None = self.process.stdin
        try:
            assert stdin is not None
            stdin.write(json.dumps(message.to_json()) + "\n")
            stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died: _read says why
        return self._read(reply)

    def ready(self) -> Loaded:
        """What the worker reported once loaded (it is loaded inside the `with` block)."""
        assert self.loaded is not None, "the worker is used inside its with block"
        return self.loaded

    def round(self, batch_size: int, warmup: Budget, measure: Budget) -> Round:
        """One timed round at `batch_size`: its raw samples."""
        request = Request(op=ROUND, batch_size=batch_size, warmup=warmup, measure=measure)
        return self.request(request, RoundSamples)

    def finish(self) -> Finished:
        """Peak memory, the evaluation outputs' file, warnings; the worker then exits."""
        return self.request(Request(op=FINISH), Finished)

    def _read(self, reply: type[Reply]) -> Reply:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        received = read_reply(stdout.readline(), reply, self.label)
        if received is None:
            code = self.process.wait()
            tail = self.log_path.read_text().strip().splitlines()[-1:] or ["no output"]
            raise TrtconvError(
                f"The benchmark worker for {self.label} exited with code {code} and no result "
                f"(last message: {tail[0][:200]})."
            )
        return received

    def close(self, kill: bool = False) -> None:
        """End the process: it exits by itself after `finish` or when its stdin closes (within
        CLOSE_TIMEOUT_S), else, or at once with `kill` (an error or an interrupt), it is killed."""
        if kill:
            self.process.kill()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        try:
            self.process.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.returncode:
            log.debug("worker %s log:\n%s", self.label, self.log_path.read_text())


@dataclass
class Schedule:
    """The rounds of a bench run: per batch size, each model timed once per round, in order."""

    workers: list[Worker]
    settings: Settings
    baseline: str  # label of the baseline model
    announce: Callable[[str], None] = lambda _label: None
    measured: dict[str, list[Round]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # goals left undecided, for the warnings
    last_round_s: float = 0.0  # wall time of the last round (all models)

    def run(self) -> dict[str, list[Round]]:
        """Time every batch size in rounds (and the goal's extra rounds); returns each model's
        rounds in the order they ran (each carries its `batch_size`)."""
        self.measured = {worker.label: [] for worker in self.workers}
        budgets = self.settings.round_budgets()
        goal = self.settings.goal
        for batch_size in self.settings.batch_sizes:
            for index, budget in enumerate(budgets):
                self.announce(f"batch {batch_size}: round {index + 1} of {len(budgets)}")
                self.one_round(batch_size, budget, first=index == 0)
            if goal is not None and goal.batch_size == batch_size:
                self.extend(goal, budgets[0])
        return self.measured

    def one_round(self, batch_size: int, budget: Budget, first: bool = False) -> None:
        """Each model once, in order: the full warm-up in the `first` round of a batch size,
        else a re-warm-up (`rewarm`)."""
        begun = time.monotonic()
        for worker in self.workers:
            done = self.measured[worker.label]
            warmup = self.settings.warmup if first else rewarm(done[-1], budget)
            done.append(worker.round(batch_size, warmup, budget))
        self.last_round_s = time.monotonic() - begun

    def extend(self, goal: SpeedGoal, budget: Budget) -> None:
        """Add rounds at the goal's batch size while some model's figure is undecided and the
        next block of rounds (timed like the last round) still fits in the goal's time limit;
        a note names the models still undecided at the end."""
        block = max(MIN_EXTRA_BLOCK, self.settings.rounds // 2)
        started, added = time.monotonic(), 0
        while undecided := self.undecided(goal):
            spent = time.monotonic() - started
            if spent + block * self.last_round_s > goal.time_limit_s:
                self.notes.append(
                    f"{', '.join(undecided)}: still undecided against the speed goal at batch "
                    f"{goal.batch_size} after {added} extra round(s) ({spent:.0f} s; the limit is "
                    f"{goal.time_limit_s:g} s)."
                )
                return
            for _ in range(block):
                added += 1
                self.announce(f"batch {goal.batch_size}: extra round {added}")
                self.one_round(goal.batch_size, budget)
        log.info("speed goal decided after %d extra round(s)", added)

    def undecided(self, goal: SpeedGoal) -> list[str]:
        """The models (not the baseline) whose speed-up or p99 latency interval at the goal's
        batch size straddles the goal's threshold."""
        base = rounds_at(self.measured[self.baseline], goal.batch_size)
        found = []
        for label, measured in self.measured.items():
            if label == self.baseline:
                continue
            mine = rounds_at(measured, goal.batch_size)
            verdicts = goal_verdicts(goal, mine, base)
            if INCONCLUSIVE in verdicts.values():
                found.append(label)
        return found


def rewarm(previous: Round, budget: Budget) -> Budget:
    """The warm-up of a round after the first: REWARM_CALLS calls, unless at the previous round's
    median latency they would take more than REWARM_SHARE of the round's budget."""
    median_ms = float(np.median(previous.latencies_ms))
    if budget.iterations is not None:
        round_ms = budget.iterations * median_ms
    else:
        round_ms = max((budget.seconds or 0.0) * 1000, budget.min_iterations * median_ms)
    if REWARM_CALLS * median_ms > REWARM_SHARE * round_ms:
        return NO_WARMUP
    return Budget(iterations=REWARM_CALLS)


def rounds_at(measured: list[Round], batch_size: int) -> list[Round]:
    """The rounds of one model at `batch_size`, in order."""
    return [r for r in measured if r.batch_size == batch_size]


def totals(rounds: list[Round]) -> tuple[list[int], list[int]]:
    """Calls and wall nanoseconds of each round."""
    return [len(r.latencies_ms) for r in rounds], [r.wall_ns for r in rounds]


def goal_verdicts(goal: SpeedGoal, rounds: list[Round], baseline: list[Round]) -> dict[str, str]:
    """Per goal threshold ("min_speedup", "max_latency_ms_p99"): the verdict of the model's
    interval at the goal's batch size (fewer than 2 rounds: none)."""
    verdicts: dict[str, str] = {}
    if goal.min_speedup is not None:
        interval = stats.speedup_interval(*totals(rounds), *totals(baseline))
        if interval is not None:
            verdicts["min_speedup"] = at_least(interval[0], interval, goal.min_speedup)
    if goal.max_latency_ms_p99 is not None:
        interval = stats.percentile_interval([r.latencies_ms for r in rounds], 99)
        if interval is not None:
            limit = goal.max_latency_ms_p99
            verdicts["max_latency_ms_p99"] = at_most(interval[1], interval, limit)
    return verdicts
