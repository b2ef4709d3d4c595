"""The shadow check in the `trtconv serve` process: the native SavedModel run on what the model
instances offered (link.py), judged against what they served (judge.py), into the live verdict
(verdict.py); with `--on-failing fallback` the instances are told to serve the native model once
it fails; with `--shadow-capture` the disagreeing samples are kept (capture.py).

Everything runs in one thread of its own, at a lower priority (nice link.SHADOW_NICE) than the
served path: the native model is opened in it, so TensorFlow's thread pools, created then,
inherit that priority. Its queue is the inbox's, bounded: what the native model cannot keep up
with is dropped and counted, never queued without bound.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trtconv.backends.registry import open_runner
from trtconv.core.errors import TrtconvError
from trtconv.core.model_io import InputValue, Outputs
from trtconv.core.results import JsonResult
from trtconv.options.serve import OnFailing
from trtconv.outputs.confidence import proportion_interval
from trtconv.protocol.runner import RunOptions
from trtconv.serving.repository.fixed_inputs import served
from trtconv.serving.server.batch_runner import Answer, Traffic, infer_function, warm_up
from trtconv.serving.server.shadow.capture import Capture
from trtconv.serving.server.shadow.judge import ShadowJudge
from trtconv.serving.server.shadow.link import Inbox, Offered, lower_priority, new_address
from trtconv.serving.server.shadow.verdict import FAILING, FigureVerdict, LiveVerdict

LOG = logging.getLogger(__name__)
BATCH_SAMPLES = 64  # samples the check takes from its queue at once
# The native model runs what waited together: at low rates the samples arrive one by one, and a
# batch of one costs the native model several times a sample of a batch (MobileNetV2 in
# TensorFlow on 2 cores: 4.6 ms at batch 1, 1.4 ms a sample at batch 8). The check waits up to
# GATHER_S for GATHER_SAMPLES before it runs: the live verdict lags by at most that.
GATHER_SAMPLES = 32
GATHER_S = 1.0
POLL_S = 0.1
START_TIMEOUT_S = 600.0  # a large native model loads and warms up
STOP_TIMEOUT_S = 30.0


class ShadowError(TrtconvError):
    """The native model could not be opened or warmed up for the shadow check (exit 1)."""


@dataclass(frozen=True)
class NativeModel:
    """The native model the check runs: its SavedModel, its intra-op threads (None: the
    runner's default), the input values and the signature the artifact was converted with."""

    path: Path
    threads: int | None
    input_values: dict[str, InputValue] = field(default_factory=dict)
    signature: str | None = None  # the signature the artifact was converted from


@dataclass
class ShadowResult(JsonResult):
    """The shadow check of a `serve`, as its summary and `--json` carry it, and as its metrics
    page shows it now: the live verdict (`state`, and per output and figure in `figures`), the
    samples compared and dropped, the fallback and the capture."""

    rate: float
    on_failing: str  # an OnFailing (--on-failing)
    reference: str  # the native SavedModel
    confidence: float  # the level the live verdict is decided at
    state: str
    compared_samples: int
    dropped_samples: int
    native_failed_requests: int
    figures: list[FigureVerdict]
    unjudged: list[str]
    fallback: bool  # the native model serves (--on-failing fallback, once failing)
    fallback_at_samples: int | None
    capture: str | None
    captured_samples: int
    capture_dropped_samples: int
    queued_requests: int = 0
    error: str | None = None


class ShadowCheck:
    """One `serve`'s shadow check: `start` opens the native model and warms it up, the
    instances connect to `address` with `key`, `stop` ends it and returns its result."""

    def __init__(
        self,
        judge: ShadowJudge,
        native: NativeModel,
        rate: float,
        on_failing: OnFailing,
        capture: Path | None,
        announce: Callable[[str], None],
    ) -> None:
        self.judge, self.native, self.rate, self.on_failing = judge, native, rate, on_failing
        self.announce = announce
        self.capture = Capture(capture) if capture is not None else None
        self.address, self.key = new_address(), os.urandom(16)
        self.inbox = Inbox(self.address, self.key)
        self.verdict = LiveVerdict(judge.confidence)
        self.lock = threading.Lock()  # the counts: the metrics page and the summary read them
        self.compared = self.native_failed = 0
        self.fallback_at: int | None = None
        self.error: str | None = None
        self.failure: Exception | None = None  # what stopped the native model at start
        self.native_warm = (0.0, 0.0)
        self.native_traffic = Traffic()  # the batches the native model ran
        self.ready, self.stopping = threading.Event(), threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, largest: int, batched: bool) -> tuple[float, float]:
        """Open the native model in the check's thread and warm it up at batch 1 and `largest`:
        the medians in ms. Raises ShadowError when it cannot."""
        self.thread = threading.Thread(
            target=self._run, args=(largest, batched), daemon=True, name="trtconv-shadow"
        )
        self.thread.start()
        self.ready.wait(START_TIMEOUT_S)
        if self.failure is not None or not self.ready.is_set():
            self.stop()
            if isinstance(self.failure, TrtconvError):  # its own exit code (3: no TensorFlow)
                raise self.failure
            raise ShadowError(f"the shadow check's native model {self.native.path}: {self.error}")
        return self.native_warm

    def _run(self, largest: int, batched: bool) -> None:
        lower_priority()
        try:
            run = RunOptions(threads=self.native.threads, signature=self.native.signature)
            runner = open_runner(self.native.path, run)
            runner.activate()
        except Exception as exc:
            self.error = f"could not be opened: {type(exc).__name__}: {exc}"
            self.failure = exc
            self.ready.set()
            return
        try:
            model = served(runner, self.native.input_values)
            self.native_warm = warm_up(model, largest, batched)
            infer = infer_function(model, batched, self.native_traffic)
            proportion_interval(1, 2)  # scipy's first call pays its imports here, not at traffic
        except Exception as exc:
            self.error = f"failed its warm-up on random inputs: {type(exc).__name__}: {exc}"
            self.failure = exc
            self.ready.set()
            runner.deactivate()
            return
        self.ready.set()
        try:
            self._loop(infer)
        finally:
            runner.deactivate()

    def _loop(self, infer: Callable[[Sequence[dict[str, np.ndarray]]], list[Answer]]) -> None:
        while not self.stopping.is_set():
            offered = self._gathered()
            if not offered:
                continue
            try:
                self._check(offered, infer([o.feeds for o in offered]))
            except Exception as exc:  # a judging error stops the check, never the server
                self.error = f"{type(exc).__name__}: {exc}"
                self.announce(f"shadow: the check stopped: {self.error}")
                LOG.debug("shadow check failed", exc_info=True)
                return
            if self.capture is not None:
                self.capture.flush()

    def _gathered(self) -> list[Offered]:
        """What waits in the inbox, once GATHER_SAMPLES have come or GATHER_S has passed since
        the first (at most about BATCH_SAMPLES); [] when nothing came within POLL_S."""
        offered = self.inbox.take(BATCH_SAMPLES, POLL_S)
        deadline = time.monotonic() + GATHER_S
        count = sum(o.samples for o in offered)
        while offered and count < GATHER_SAMPLES and not self.stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            more = self.inbox.take(BATCH_SAMPLES - count, min(left, POLL_S))
            offered += more
            count += sum(o.samples for o in more)
        return offered

    def _check(self, offered: list[Offered], answers: list[Answer]) -> None:
        pairs = [(o, a) for o, a in zip(offered, answers, strict=True) if isinstance(a, dict)]
        with self.lock:
            self.native_failed += len(offered) - len(pairs)
        for group in groups(pairs):
            feeds = joined([o.feeds for o, _ in group])
            served_outputs = joined([o.outputs for o, _ in group])
            reference = joined([a for _, a in group])
            counts = self.judge.counts(reference, served_outputs, feeds)
            with self.lock:
                lines = self.verdict.add(counts)
                self.compared += len(next(iter(reference.values())))
            for line in lines:
                self.announce(line)
            if self.capture is not None and not all(count.all_within for count in counts):
                rows = self.judge.disagreeing(reference, served_outputs, feeds)
                self.capture.add(feeds, served_outputs, reference, rows)
        if (
            self.verdict.state == FAILING
            and self.on_failing == OnFailing.FALLBACK
            and not self.fell_back
        ):
            self._fall_back()

    @property
    def fell_back(self) -> bool:
        return self.fallback_at is not None

    def _fall_back(self) -> None:
        with self.lock:
            self.fallback_at = self.compared
        self.inbox.tell_fallback()
        self.announce(
            f"shadow: the live verdict is failing after {self.fallback_at} compared samples: the "
            f"native model {self.native.path} serves every request from now on "
            "(--on-failing fallback)"
        )

    def stop(self) -> ShadowResult:
        """End the check (the samples it holds are not compared), write the capture, and
        return the result."""
        if not self.stopping.is_set():
            self.stopping.set()
            if self.thread is not None:
                self.thread.join(STOP_TIMEOUT_S)
            self.inbox.close()
            if self.capture is not None:
                self.capture.flush(force=True)
        return self.result()

    def result(self) -> ShadowResult:
        """The check now (the metrics page calls it from its own thread)."""
        capture = self.capture
        with self.lock:
            figures = self.verdict.snapshot()
            return ShadowResult(
                rate=self.rate,
                on_failing=self.on_failing,
                reference=str(self.native.path),
                confidence=self.verdict.confidence,
                state=self.verdict.state,
                compared_samples=self.compared,
                dropped_samples=self.inbox.dropped,
                native_failed_requests=self.native_failed,
                figures=figures,
                unjudged=list(self.judge.unjudged),
                fallback=self.fell_back,
                fallback_at_samples=self.fallback_at,
                capture=str(capture.path) if capture is not None else None,
                captured_samples=capture.samples if capture is not None else 0,
                capture_dropped_samples=capture.dropped if capture is not None else 0,
                queued_requests=self.inbox.waiting.qsize(),
                error=self.error,
            )


def groups(pairs: list[tuple[Offered, Outputs]]) -> list[list[tuple[Offered, Outputs]]]:
    """The pairs in runs whose arrays can be joined along the batch axis (same shapes past it):
    usually one run."""
    found: list[list[tuple[Offered, Outputs]]] = []
    for pair in pairs:
        if found and _shapes(found[-1][0]) == _shapes(pair):
            found[-1].append(pair)
        else:
            found.append([pair])
    return found


def _shapes(pair: tuple[Offered, Outputs]) -> tuple[object, ...]:
    offered, answer = pair
    arrays = {**offered.feeds, **{f"out:{k}": v for k, v in offered.outputs.items()}}
    arrays |= {f"native:{k}": v for k, v in answer.items()}
    return tuple(sorted((name, array.shape[1:], array.dtype.str) for name, array in arrays.items()))


def joined(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays of `parts` joined along the batch axis, by name."""
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
