"""What runs inside each benchmark subprocess (`python -m trtconv.cli.bench_worker SPEC.json`).

One process per model keeps thread pools, allocators and memory of one model away from the next.
The worker loads the model, times `infer()` + `sync()` with `time.perf_counter_ns` on batches
prepared before timing, and prints JSON lines on stdout: the raw samples (statistics are computed
by the parent, in one place) or `{"error": {"type", "message"}}`. `run` times each batch size in
one loop and prints one document; `serve` (`--serve`) keeps the model loaded and times one round
at a time as the parent asks, so that bench can interleave the models round by round. The
messages are typed in trtconv.bench.messages.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from trtconv import facts
from trtconv.backends import registry
from trtconv.bench.messages import (
    FINISH,
    Finished,
    Loaded,
    Request,
    RoundSamples,
    WorkerReport,
    WorkerSpec,
)
from trtconv.core.lazy import require
from trtconv.core.model_io import Feeds, ModelSignature, Outputs
from trtconv.core.results import JsonResult
from trtconv.measure.loop_budget import Budget
from trtconv.protocol.runner import Runner, RunOptions

# The null runner is timed over this many calls (after as many warm-up calls): short enough to
# cost ~10 ms, long enough for a stable median of a ~µs operation.
OVERHEAD_CALLS = 2000


@dataclass
class Timing:
    """Raw measurements of one timed loop."""

    latencies_ns: list[int]
    wall_ns: int
    warmup_iterations: int
    transfer_ms: list[float]
    compute_ms: list[float]


class NullRunner(Runner):
    """A runner that does nothing: timing it gives the harness's own cost per call."""

    def __init__(self, signature: ModelSignature) -> None:
        super().__init__(Path("<null>"))
        self._null_signature = signature

    def activate_impl(self) -> ModelSignature:
        """Nothing to load: the signature given at construction."""
        return self._null_signature

    def infer_impl(self, feeds: Feeds) -> Outputs:
        """Return at once, with no outputs."""
        return {}


def time_loop(runner: Runner, batches: list[Feeds], warmup: Budget, measure: Budget) -> Timing:
    """Warm up (dropped), then time each inference call + `sync()`; cycles through `batches`.

    Every batch is checked once, before timing (`check_inputs`); the timed call is then
    `infer(feeds, check_inputs=False)`, the runner's protocol without the per-call check, which
    cost 3.8 µs here (10% of a 37 µs ORT call). A runner that times its device copies reports
    them in `last_timings` after each call (trtexec's H2D/D2H apart from compute); CPU runners
    report none and `transfer_ms` stays empty.
    """
    runner.activate()
    for feeds in batches:
        runner.check_inputs(feeds)
    infer, sync = runner.infer, runner.sync
    count = len(batches)
    calls = 0
    start = time.perf_counter_ns()
    while not warmup.done(calls, time.perf_counter_ns() - start):
        infer(batches[calls % count], False)
        sync()
        calls += 1
    warmup_calls = calls
    latencies: list[int] = []
    transfers: list[float] = []
    computes: list[float] = []
    clock = time.perf_counter_ns
    wall_start = clock()
    while not measure.done(len(latencies), clock() - wall_start):
        feeds = batches[(warmup_calls + len(latencies)) % count]
        begin = clock()
        infer(feeds, False)
        sync()
        latencies.append(clock() - begin)
        timings = runner.last_timings
        if timings is not None:
            transfers.append(timings.transfer_ms)
            computes.append(timings.compute_ms)
    wall_ns = clock() - wall_start
    return Timing(latencies, wall_ns, warmup_calls, transfers, computes)


def make_batches(inputs: dict[str, np.ndarray], batch_size: int, max_batches: int) -> list[Feeds]:
    """Up to `max_batches` distinct batches of `batch_size`, wrapping around small data sets."""
    total = len(next(iter(inputs.values())))
    count = max(1, min(max_batches, -(-total // batch_size)))
    batches = []
    for index in range(count):
        rows = np.arange(index * batch_size, (index + 1) * batch_size) % total
        batches.append({name: np.ascontiguousarray(array[rows]) for name, array in inputs.items()})
    return batches


def import_backend(backend: str) -> None:
    """Import the backend's library and probe the machine's facts (nvidia-smi, TensorFlow asked
    in a subprocess): process start-up, not model loading, so neither counts in `load_ms`."""
    require(registry.get(backend).library)
    registry.facts_here()


def peak_rss_mb(status: Path = Path("/proc/self/status")) -> float:
    """Peak resident set size of this process so far, in MB.

    Linux reads `VmHWM`: `ru_maxrss` survives fork and exec, so a worker started by a release
    (whose process holds TensorFlow, ~800 MB) reported the parent's peak, not its own.
    """
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def gpu_memory_mb(pid: int) -> float | None:
    """GPU memory nvidia-smi attributes to `pid` (the whole process: the library's pools
    included); None without an NVIDIA GPU or when nvidia-smi does not list the process."""
    if not facts.probe_gpus():
        return None
    try:
        completed = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    for line in completed.stdout.strip().splitlines():
        found_pid, _, used = (part.strip() for part in line.partition(","))
        if found_pid == str(pid):
            return float(used)
    return None  # not listed (in a container nvidia-smi often shows no processes): unknown


def eval_outputs(runner: Runner, inputs: dict[str, np.ndarray], batch_size: int) -> Outputs:
    """Every output over `inputs`, in batches padded to `batch_size` (wrapping around): the
    parent judges them against the baseline's by each output's role."""
    total = len(next(iter(inputs.values())))
    collected: dict[str, list[np.ndarray]] = {}
    for start in range(0, total, batch_size):
        rows = np.arange(start, start + batch_size) % total  # pad the last batch by wrapping
        result = runner.infer({key: array[rows] for key, array in inputs.items()})
        runner.sync()
        keep = min(batch_size, total - start)
        for name, array in result.items():
            collected.setdefault(name, []).append(np.asarray(array)[:keep])
    return {name: np.concatenate(parts) for name, parts in collected.items()}


def load_arrays(path: str, input_map: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """The parent's npz, re-keyed by this model's input names (`input_map`: model -> npz key)."""
    # The parent wrote it: string inputs are object arrays of bytes, which .npz pickles.
    with np.load(path, allow_pickle=True) as archive:
        arrays = {key: archive[key] for key in archive.files if key != "__labels__"}
    if not input_map:
        return arrays
    return {name: arrays[key] for name, key in input_map.items()}


def measure_overhead(runner: Runner, batches: list[Feeds]) -> float:
    """Median cost in ms of one timed call of a do-nothing runner: the floor of what we measure."""
    null = NullRunner(runner.signature)
    budget = Budget(iterations=OVERHEAD_CALLS)
    timing = time_loop(null, batches, budget, budget)
    return float(np.median(timing.latencies_ns)) / 1e6


def load(spec: WorkerSpec, first_batch: Feeds) -> tuple[Runner, float, float]:
    """The activated runner, its load time and its load + first call time, in ms.

    Importing TensorFlow or ONNX Runtime is left out: it is process start-up, seconds that every
    caller pays once whatever the model.
    """
    import_backend(spec.backend)
    options = RunOptions(
        threads=spec.threads,
        xla=spec.xla,
        device=spec.device or "auto",
        throughput=spec.throughput,
        signature=spec.signature,
    )
    started = time.perf_counter_ns()
    runner = registry.open_runner(Path(spec.model), options)
    runner.activate()
    loaded = time.perf_counter_ns()
    runner.infer(first_batch)
    runner.sync()
    first = time.perf_counter_ns()
    return runner, (loaded - started) / 1e6, (first - started) / 1e6


def measure_batch(
    runner: Runner, batches: list[Feeds], warmup: Budget, measure: Budget
) -> RoundSamples:
    """The raw samples of one batch size: latencies, wall time, warm-up calls, transfers."""
    timing = time_loop(runner, batches, warmup, measure)
    return RoundSamples(
        batch_size=len(next(iter(batches[0].values()))),
        latencies_ms=[ns / 1e6 for ns in timing.latencies_ns],
        wall_ns=timing.wall_ns,
        warmup_iterations=timing.warmup_iterations,
        transfer_ms=timing.transfer_ms or None,
        compute_ms=timing.compute_ms or None,
    )


@dataclass
class Session:
    """One loaded model in a worker: its runner, batches per batch size and load figures."""

    spec: WorkerSpec
    runner: Runner
    batches: dict[int, list[Feeds]]
    load_ms: float
    first_inference_ms: float
    overhead_ms: float = 0.0

    def loaded(self) -> Loaded:
        """What is known once the model is loaded: process, load times, harness floor."""
        return Loaded(
            label=self.spec.label,
            pid=os.getpid(),
            load_ms=self.load_ms,
            first_inference_ms=self.first_inference_ms,
            harness_overhead_ms=self.overhead_ms,
            device=self.runner.device,
        )

    def measure(self, batch_size: int, warmup: Budget, measure: Budget) -> RoundSamples:
        """The raw samples of one timed loop (a round) at `batch_size`."""
        return measure_batch(self.runner, self.batches[batch_size], warmup, measure)

    def finish(self) -> Finished:
        """Peak memory (of the timed runs: read before evaluation), the outputs on the
        evaluation data when the spec asks for them, and the runner's warnings."""
        peak, gpu_memory = peak_rss_mb(), gpu_memory_mb(os.getpid())
        written = None
        if self.spec.eval and self.spec.eval_outputs:
            eval_inputs = load_arrays(self.spec.eval, self.spec.input_map)
            outputs: dict[str, Any] = eval_outputs(self.runner, eval_inputs, max(self.batches))
            written = self.spec.eval_outputs
            np.savez(written, **outputs)
        return Finished(peak, gpu_memory, written, list(self.runner.warnings))


def open_session(spec: WorkerSpec) -> Session:
    """Load the model `spec` names, prepare its batches and time the harness's own floor.
    The caller closes `session.runner` (a context manager) when done."""
    inputs = load_arrays(spec.data, spec.input_map)
    batch_sizes = [int(b) for b in spec.batch_sizes]
    all_batches = {b: make_batches(inputs, b, spec.max_batches) for b in batch_sizes}
    runner, load_ms, first_inference_ms = load(spec, all_batches[batch_sizes[0]][0])
    session = Session(spec, runner, all_batches, load_ms, first_inference_ms)
    session.overhead_ms = measure_overhead(runner, all_batches[batch_sizes[0]])
    return session


def run(spec: WorkerSpec, progress: Callable[[str], None] | None = None) -> WorkerReport:
    """Benchmark one model as `spec` says, each batch size in one timed loop; return the raw
    measurements (one JSON document)."""
    note = progress or (lambda _message: None)
    session = open_session(spec)
    note(f"loaded in {session.load_ms:.0f} ms")
    with session.runner:  # deactivated (device memory freed) when done
        measured = []
        for batch_size in session.batches:
            note(f"batch {batch_size}")
            measured.append(session.measure(batch_size, spec.warmup, spec.measure))
        finished = session.finish()
    return WorkerReport(session.loaded(), finished, measured)


def serve(spec: WorkerSpec, requests: TextIO, reply: Callable[[JsonResult], None]) -> None:
    """Keep one model loaded and time it a round at a time, as the parent asks (bench's
    interleaved rounds). Replies `loaded()` first; then reads one `Request` per line: a round
    is answered with its raw samples, finish with `finish()`, after which it returns; so does
    the end of `requests` (the parent is gone)."""
    session = open_session(spec)
    with session.runner:
        reply(session.loaded())
        for line in requests:
            request = Request.from_json(json.loads(line))
            if request.op == FINISH:
                reply(session.finish())
                return
            reply(session.measure(request.batch_size, request.warmup, request.measure))
