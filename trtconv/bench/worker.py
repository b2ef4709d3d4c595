"""What runs inside each benchmark subprocess (`python -m trtconv.cli.bench_worker SPEC.json`).

One process per model keeps thread pools, allocators and memory of one model away from the next.
The worker loads the model, times `infer()` + `sync()` with `time.perf_counter_ns` on batches
prepared before timing, and prints exactly one JSON line on stdout: the raw samples (statistics
are computed by the parent, in one place) or `{"error": {"type", "message"}}`.
"""

from __future__ import annotations

import inspect
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from trtconv.backends.base import Feeds, Runner
from trtconv.errors import InputError
from trtconv.model_io import ModelSignature

# The null runner is timed over this many calls (after as many warm-up calls): short enough to
# cost ~10 ms, long enough for a stable median of a ~µs operation.
OVERHEAD_CALLS = 2000


@dataclass(frozen=True)
class Budget:
    """How long a loop runs: `iterations` calls, or `seconds` (and at least `min_iterations`)."""

    iterations: int | None = None
    seconds: float | None = None
    min_iterations: int = 1

    def done(self, calls: int, elapsed_ns: int) -> bool:
        """True when the loop has made enough calls for this budget."""
        if self.iterations is not None:
            return calls >= self.iterations
        seconds = self.seconds or 0.0
        return calls >= self.min_iterations and elapsed_ns >= seconds * 1e9

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Budget:
        """A budget from its spec form: {"iterations"} or {"seconds", "min_iterations"}."""
        return cls(data.get("iterations"), data.get("seconds"), data.get("min_iterations", 1))


@dataclass
class Timing:
    """Raw measurements of one timed loop."""

    latencies_ns: list[int]
    wall_ns: int
    warmup_iterations: int
    transfer_ms: list[float]


class NullRunner(Runner):
    """A runner that does nothing: timing it gives the harness's own cost per call."""

    backend: ClassVar[str] = "null"

    def __init__(self, signature: ModelSignature) -> None:
        super().__init__(Path("<null>"))
        self._null_signature = signature

    def activate_impl(self) -> ModelSignature:
        """Nothing to load: the signature given at construction."""
        return self._null_signature

    def infer_impl(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """Return at once, with no outputs."""
        return {}


def time_loop(runner: Runner, batches: list[Feeds], warmup: Budget, measure: Budget) -> Timing:
    """Warm up (dropped), then time each inference call + `sync()`; cycles through `batches`.

    Every batch is checked once, before timing, by the runner's own `check_feeds`; the timed call
    is then the backend's `infer_impl`, which is all a plain loop over the library pays. Checking
    names, dtypes and shapes on every call cost 3.8 µs here, 10% of a 37 µs ORT call.
    """
    runner.activate()
    for feeds in batches:
        runner.check_feeds(feeds)
    infer, sync = runner.infer_impl, runner.sync
    count = len(batches)
    calls = 0
    start = time.perf_counter_ns()
    while not warmup.done(calls, time.perf_counter_ns() - start):
        infer(batches[calls % count])
        sync()
        calls += 1
    warmup_calls = calls
    latencies: list[int] = []
    transfers: list[float] = []
    # Runners that move data to a device may expose the last call's transfer time (trtexec
    # reports H2D/D2H apart from compute); CPU runners do not, and the list stays empty.
    has_transfer = hasattr(runner, "last_transfer_ms")
    clock = time.perf_counter_ns
    wall_start = clock()
    while not measure.done(len(latencies), clock() - wall_start):
        feeds = batches[(warmup_calls + len(latencies)) % count]
        begin = clock()
        infer(feeds)
        sync()
        latencies.append(clock() - begin)
        if has_transfer:
            transfer = getattr(runner, "last_transfer_ms", None)
            if transfer is not None:
                transfers.append(float(transfer))
    wall_ns = clock() - wall_start
    return Timing(latencies, wall_ns, warmup_calls, transfers)


def make_batches(inputs: dict[str, np.ndarray], batch_size: int, max_batches: int) -> list[Feeds]:
    """Up to `max_batches` distinct batches of `batch_size`, wrapping around small data sets."""
    total = len(next(iter(inputs.values())))
    count = max(1, min(max_batches, -(-total // batch_size)))
    batches = []
    for index in range(count):
        rows = np.arange(index * batch_size, (index + 1) * batch_size) % total
        batches.append({name: np.ascontiguousarray(array[rows]) for name, array in inputs.items()})
    return batches


# The library each backend loads; imported before the load clock starts (see `run`).
LIBRARIES = {
    "tf": "tensorflow",
    "tftrt": "tensorflow",
    "ort": "onnxruntime",
    "onnx": "onnxruntime",
    "trt": "tensorrt",
}


def make_runner(spec: dict[str, Any]) -> Runner:
    """The runner for the spec's model: native SavedModel (optionally XLA) or artifact backend."""
    from trtconv.backends.base import runner_class

    backend = spec["backend"]
    payload = Path(spec["payload"])
    if backend == "tf":
        from trtconv.backends.tf_native import SavedModelRunner

        return SavedModelRunner(payload, xla=bool(spec.get("xla")))
    cls = runner_class(backend)
    if spec.get("threads") is not None and "threads" in inspect.signature(cls).parameters:
        return cls(payload, threads=spec["threads"])  # type: ignore[call-arg]
    return cls(payload)


def import_backend(spec: dict[str, Any]) -> None:
    """Import the backend's runner module and library: process start-up, not model loading."""
    from trtconv.backends.base import runner_class
    from trtconv.lazy import require

    runner_class(spec["backend"])
    library = LIBRARIES.get(spec["backend"])
    if library is not None:
        require(library)


def configure_threads(spec: dict[str, Any]) -> None:
    """Apply --threads to TensorFlow's pools before anything runs (other runners take an arg)."""
    threads = spec.get("threads")
    if threads is None or spec["backend"] not in ("tf", "tftrt"):
        return
    from trtconv.lazy import require

    tf = require("tensorflow")
    tf.config.threading.set_intra_op_parallelism_threads(int(threads))
    tf.config.threading.set_inter_op_parallelism_threads(int(threads))


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
    """GPU memory nvidia-smi attributes to `pid`; None without an NVIDIA GPU."""
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
    return 0.0


def top1(runner: Runner, inputs: dict[str, np.ndarray], batch_size: int) -> list[int]:
    """Argmax of the first rank-2 output over `inputs`, in batches padded to `batch_size`."""
    outputs = [spec for spec in runner.signature.outputs if len(spec.shape) == 2]
    if not outputs:
        raise InputError(
            f"{runner.path}: no output of shape [batch, classes] to take a top-1 from."
        )
    name = outputs[0].name
    total = len(next(iter(inputs.values())))
    predictions: list[int] = []
    for start in range(0, total, batch_size):
        rows = np.arange(start, start + batch_size) % total  # pad the last batch by wrapping
        result = runner.infer({key: array[rows] for key, array in inputs.items()})
        runner.sync()
        keep = min(batch_size, total - start)
        predictions.extend(int(v) for v in np.argmax(result[name], axis=-1)[:keep])
    return predictions


def load_arrays(path: str, input_map: dict[str, str] | None = None) -> dict[str, np.ndarray]:
    """The parent's npz, re-keyed by this model's input names (`input_map`: model -> npz key)."""
    with np.load(path, allow_pickle=False) as archive:
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


def load(spec: dict[str, Any], first_batch: Feeds) -> tuple[Runner, float, float]:
    """The activated runner, its load time and its load + first call time, in ms.

    Importing TensorFlow or ONNX Runtime is left out: it is process start-up, seconds that every
    caller pays once whatever the model.
    """
    import_backend(spec)
    configure_threads(spec)
    started = time.perf_counter_ns()
    runner = make_runner(spec)
    runner.activate()
    loaded = time.perf_counter_ns()
    runner.infer(first_batch)
    runner.sync()
    first = time.perf_counter_ns()
    return runner, (loaded - started) / 1e6, (first - started) / 1e6


def run(spec: dict[str, Any], progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Benchmark one model as `spec` says; return the raw measurements (one JSON document)."""
    note = progress or (lambda _message: None)
    inputs = load_arrays(spec["data"], spec.get("input_map"))
    batch_sizes = [int(b) for b in spec["batch_sizes"]]
    all_batches = {b: make_batches(inputs, b, int(spec.get("max_batches", 8))) for b in batch_sizes}
    warmup = Budget.from_dict(spec["warmup"])
    measure = Budget.from_dict(spec["measure"])

    runner, load_ms, first_inference_ms = load(spec, all_batches[batch_sizes[0]][0])
    note(f"loaded in {load_ms:.0f} ms")

    overhead_ms = measure_overhead(runner, all_batches[batch_sizes[0]])
    measured = []
    for batch_size in batch_sizes:
        note(f"batch {batch_size}")
        timing = time_loop(runner, all_batches[batch_size], warmup, measure)
        measured.append(
            {
                "batch_size": batch_size,
                "latencies_ms": [ns / 1e6 for ns in timing.latencies_ns],
                "wall_ns": timing.wall_ns,
                "warmup_iterations": timing.warmup_iterations,
                "transfer_ms": timing.transfer_ms or None,
            }
        )
    # Read the peak before evaluation so that it reflects the timed runs, not the eval set.
    peak = peak_rss_mb()
    predictions = None
    if spec.get("eval"):
        eval_inputs = load_arrays(spec["eval"], spec.get("input_map"))
        predictions = top1(runner, eval_inputs, max(batch_sizes))
    return {
        "label": spec["label"],
        "pid": os.getpid(),
        "load_ms": load_ms,
        "first_inference_ms": first_inference_ms,
        "peak_rss_mb": peak,
        "gpu_memory_mb": gpu_memory_mb(os.getpid()),
        "harness_overhead_ms": overhead_ms,
        "batches": measured,
        "predictions": predictions,
    }
