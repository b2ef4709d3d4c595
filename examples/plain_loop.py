"""Cross-check trtconv bench against plain loops over the libraries themselves.

    python examples/plain_loop.py RESULTS.json [--rounds 3] [--seconds 3] [--batch-sizes 1,8]
                                               [--tolerance 5]

For every native SavedModel (without XLA) and every ONNX Runtime artifact in a `trtconv bench`
results.json, this times the model with trtconv's own worker process and with a plain loop in a
separate fresh process, on the same input file and thread count:

- SavedModel: `loaded.signatures["serving_default"](**feeds)` and `.numpy()` on each output;
- ONNX Runtime: `InferenceSession.run(None, feeds)` with the session options OrtRunner uses
  (ORT_ENABLE_ALL, intra-op threads, denormals as zero);
- OpenVINO: `InferRequest.infer(feeds)` on the CPU plugin compiled with the configuration
  OpenVinoRunner uses (LATENCY hint, the artifact's inference precision, denormals flushed,
  threads). Rows run in the throughput mode are left out.

This machine's speed drifts by up to 2x between identical runs minutes apart, so the two are
interleaved (trtconv, plain, trtconv, plain, ...) for `--rounds` rounds, each running
`--seconds` per batch size, and the medians over rounds are compared. It prints both median
latencies and throughputs side by side with the round-to-round spread, and exits 1 when any
median differs by more than the tolerance (default 5%). The plain loop shares nothing with
trtconv's runners or timing code; both read the same .npz of inputs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

MAX_BATCHES = 8  # distinct batches cycled through, as trtconv's worker does
WARMUP_CALLS = 3


def plain_batches(npz: str, names: list[str], batch_size: int) -> list[dict[str, np.ndarray]]:
    """Batches cut from the shared input file, keyed by `names`: the file's arrays of those
    names, else its arrays in file order (no trtconv code)."""
    with np.load(npz) as archive:
        keys = names if set(names) <= set(archive.files) else archive.files
        arrays = [archive[key] for key in keys if key != "__labels__"]
    total = len(arrays[0])
    count = max(1, min(MAX_BATCHES, -(-total // batch_size)))
    batches = []
    for index in range(count):
        rows = np.arange(index * batch_size, (index + 1) * batch_size) % total
        batches.append(
            {name: np.ascontiguousarray(a[rows]) for name, a in zip(names, arrays, strict=True)}
        )
    return batches


def tf_call(path: str, threads: int | None) -> tuple[Any, list[str]]:
    """A plain call of the serving signature; `.numpy()` makes each call finish."""
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    loaded = tf.saved_model.load(path)
    function = loaded.signatures["serving_default"]

    def call(feeds: dict[str, np.ndarray]) -> None:
        for tensor in function(**feeds).values():
            tensor.numpy()

    call.loaded = loaded  # type: ignore[attr-defined]  # keep the variables alive
    _, kwargs = function.structured_input_signature
    return call, sorted(kwargs)


def ort_call(onnx_path: str, threads: int | None) -> tuple[Any, list[str]]:
    """A plain `InferenceSession.run` with the session options trtconv's OrtRunner uses."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])

    def call(feeds: dict[str, np.ndarray]) -> None:
        session.run(None, feeds)

    return call, [i.name for i in session.get_inputs()]


# trtconv precision -> OpenVINO's INFERENCE_PRECISION_HINT (int8: the plugin's default).
OV_PRECISION = {"fp32": "f32", "bf16": "bf16", "fp16": "f16", "int8": None}


def ov_call(
    xml: str, threads: int | None, precision: str | None, pinned: str | None = None
) -> tuple[Any, list[str]]:
    """A plain synchronous `InferRequest.infer` on OpenVINO's CPU plugin, LATENCY hint.

    `precision` None: OpenVINO's defaults (what an OpenVINO user gets); otherwise the
    configuration trtconv's OpenVinoRunner compiles an artifact of that precision with, and
    `pinned` the inference precision its manifest pins (an int8 model with ops kept in float).
    """
    import openvino as ov

    config: dict[str, Any] = {"PERFORMANCE_HINT": "LATENCY"}
    if precision is not None:
        config["CPU_DENORMALS_OPTIMIZATION"] = True
        if pinned or OV_PRECISION[precision]:
            config["INFERENCE_PRECISION_HINT"] = pinned or OV_PRECISION[precision]
    if threads:
        config["INFERENCE_NUM_THREADS"] = threads
    compiled = ov.Core().compile_model(xml, "CPU", config)
    request = compiled.create_infer_request()

    def call(feeds: dict[str, np.ndarray]) -> None:
        request.infer(feeds)

    return call, [port.get_any_name() for port in compiled.inputs]


def ov_pipeline(spec: dict[str, Any]) -> dict[str, Any]:
    """OpenVINO's own throughput mode as its benchmark_app runs it: THROUGHPUT hint, its optimal
    number of requests in flight through an `AsyncInferQueue`, each on a whole batch; the
    throughput is the batches completed in the wall time, the latency each request's own."""
    import openvino as ov

    config: dict[str, Any] = {"PERFORMANCE_HINT": "THROUGHPUT"}
    if spec["threads"]:
        config["INFERENCE_NUM_THREADS"] = spec["threads"]
    compiled = ov.Core().compile_model(spec["payload"], "CPU", config)
    queue = ov.AsyncInferQueue(
        compiled, int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    )
    latencies: list[int] = []
    queue.set_callback(lambda _request, begin: latencies.append(time.perf_counter_ns() - begin))
    names = [port.get_any_name() for port in compiled.inputs]
    figures = {}
    for batch_size in spec["batch_sizes"]:
        batches = plain_batches(spec["data"], names, batch_size)
        for index in range(WARMUP_CALLS * len(queue)):
            queue.start_async(batches[index % len(batches)], time.perf_counter_ns())
        queue.wait_all()
        latencies.clear()
        started = 0
        start = time.perf_counter_ns()
        deadline = start + int(spec["seconds"] * 1e9)
        while time.perf_counter_ns() < deadline or started < 10:
            queue.start_async(batches[started % len(batches)], time.perf_counter_ns())
            started += 1
        queue.wait_all()
        wall = time.perf_counter_ns() - start
        figures[str(batch_size)] = {
            "p50_ms": float(np.median(latencies)) / 1e6,
            "per_s": batch_size * started / (wall / 1e9),
        }
    return figures


def plain_process(spec: dict[str, Any]) -> dict[str, Any]:
    """Inside a fresh process: time the plain loop for `seconds` at every batch size."""
    if spec.get("throughput"):
        return ov_pipeline(spec)
    if spec["backend"] == "openvino":
        call, names = ov_call(
            spec["payload"], spec["threads"], spec.get("precision"), spec.get("pinned")
        )
    else:
        load = tf_call if spec["backend"] == "tf" else ort_call
        call, names = load(spec["payload"], spec["threads"])
    figures = {}
    for batch_size in spec["batch_sizes"]:
        batches = plain_batches(spec["data"], names, batch_size)
        for index in range(WARMUP_CALLS):
            call(batches[index % len(batches)])
        latencies: list[int] = []
        start = time.perf_counter_ns()
        deadline = start + int(spec["seconds"] * 1e9)
        while time.perf_counter_ns() < deadline or len(latencies) < 10:
            begin = time.perf_counter_ns()
            call(batches[len(latencies) % len(batches)])
            latencies.append(time.perf_counter_ns() - begin)
        wall = time.perf_counter_ns() - start
        figures[str(batch_size)] = {
            "p50_ms": float(np.median(latencies)) / 1e6,
            "per_s": batch_size * len(latencies) / (wall / 1e9),
        }
    return figures


def plain_round(spec: dict[str, Any]) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, __file__, "--one", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def trtconv_round(model: str, spec: dict[str, Any], workdir: Path, index: int) -> dict[str, Any]:
    """The same model, inputs and budget through trtconv's own worker process."""
    from trtconv.bench import harness
    from trtconv.bench.inputs import input_map
    from trtconv.bench.models import resolve_entry
    from trtconv.measure import stats

    entry = resolve_entry(Path(model))
    settings = harness.Settings(
        batch_sizes=tuple(spec["batch_sizes"]),
        warmup_iterations=WARMUP_CALLS,
        duration_s=spec["seconds"],
        min_iterations=10,
        threads=spec["threads"],
        data=spec["data"],
        device="auto",
    )
    mapping = input_map(entry.signature, entry)
    worker = harness.worker_spec(entry, settings, Path(spec["data"]), None, mapping)
    document = harness.run_worker(worker, workdir, index)
    figures = {}
    for measured in document.batches:
        latencies = measured.latencies_ms
        figures[str(measured.batch_size)] = {
            "p50_ms": stats.percentile(latencies, 50),
            "per_s": stats.throughput_per_s(measured.batch_size, len(latencies), measured.wall_ns),
        }
    return figures


def shared_inputs(results: dict[str, Any], model: dict[str, Any], path: Path) -> Path:
    """The inputs trtconv bench used (its data source, fitted to the model), as one .npz."""
    from trtconv.bench.inputs import load_inputs, save_arrays
    from trtconv.bench.models import resolve_entry

    entry = resolve_entry(Path(model["model"]))
    settings = results["settings"]
    data = load_inputs(settings["data"], entry, max(settings["batch_sizes"]), None)
    return save_arrays(path, data.inputs, None)


def pinned_precision(model: Path) -> str | None:
    """The inference precision an artifact's manifest pins (OpenVINO int8 with ops in float)."""
    from trtconv.artifact.manifest import MANIFEST, read_manifest

    if not (model / MANIFEST).is_file():
        return None
    pinned = (read_manifest(model).conversion_summary or {}).get("inference_precision")
    return str(pinned) if pinned else None


def payload_of(model: Path) -> Path:
    """The file or folder a model's library loads: an artifact's payload, or the SavedModel."""
    from trtconv.artifact.manifest import MANIFEST, read_manifest

    return model / read_manifest(model).payload if (model / MANIFEST).is_file() else model


def compare(results_path: Path, args: argparse.Namespace) -> int:
    """Interleave trtconv and plain rounds per comparable model; 1 if any median is off."""
    results = json.loads(results_path.read_text())
    sizes = [int(s) for s in args.batch_sizes.split(",")] if args.batch_sizes else None
    worst = 0.0
    header = f"{'model':22} {'batch':>5} {'trtconv p50 ms':>15} {'plain p50 ms':>13} {'Δ%':>6} "
    header += f"{'trtconv /s':>11} {'plain /s':>10} {'Δ%':>6}  spread (trtconv, plain)"
    print(f"{args.rounds} interleaved rounds of {args.seconds:g} s per batch size\n{header}")
    with tempfile.TemporaryDirectory(prefix="plain-loop-") as tmp:
        workdir = Path(tmp)
        for index, model in enumerate(results["models"]):
            if model["xla"] or model.get("throughput_mode"):
                continue
            if model["backend"] not in ("tf", "ort", "openvino"):
                continue
            spec = {
                "backend": model["backend"],
                "precision": model["precision"],
                "payload": str(payload_of(Path(model["model"]))),
                "pinned": pinned_precision(Path(model["model"])),
                "threads": results["threads"],
                "batch_sizes": sizes or results["settings"]["batch_sizes"],
                "seconds": args.seconds,
                "data": str(shared_inputs(results, model, workdir / f"inputs-{index}.npz")),
            }
            mine, plain = [], []
            for round_index in range(args.rounds):
                mine.append(trtconv_round(model["model"], spec, workdir, round_index))
                plain.append(plain_round(spec))
            for batch in spec["batch_sizes"]:
                worst = max(worst, report_row(model["label"], str(batch), mine, plain))
    verdict = "agree" if worst <= args.tolerance else "DISAGREE"
    print(f"largest difference of medians {worst:.1f}% (tolerance {args.tolerance:g}%): {verdict}")
    return 0 if worst <= args.tolerance else 1


def report_row(label: str, batch: str, mine: list[dict], plain: list[dict]) -> float:
    """Print one comparison line; return the larger of the two relative differences (%)."""

    def median(rounds: list[dict], key: str) -> float:
        return float(np.median([r[batch][key] for r in rounds]))

    def spread(rounds: list[dict]) -> float:
        values = [r[batch]["per_s"] for r in rounds]
        return (max(values) / min(values) - 1) * 100

    t_p50, p_p50 = median(mine, "p50_ms"), median(plain, "p50_ms")
    t_tput, p_tput = median(mine, "per_s"), median(plain, "per_s")
    d_p50, d_tput = (p_p50 / t_p50 - 1) * 100, (p_tput / t_tput - 1) * 100
    print(
        f"{label:22} {batch:>5} {t_p50:>15.4f} {p_p50:>13.4f} {d_p50:>+6.1f} {t_tput:>11.1f} "
        f"{p_tput:>10.1f} {d_tput:>+6.1f}  {spread(mine):.0f}%, {spread(plain):.0f}%"
    )
    return max(abs(d_p50), abs(d_tput))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", type=Path, help="trtconv bench results.json")
    parser.add_argument("--rounds", type=int, default=3, help="Interleaved rounds per model.")
    parser.add_argument("--seconds", type=float, default=3.0, help="Timed seconds per batch.")
    parser.add_argument("--batch-sizes", help="Subset of the results' batch sizes, e.g. 1,8.")
    parser.add_argument("--tolerance", type=float, default=5.0, help="Allowed difference, %%.")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one plain process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(plain_process(json.loads(args.one))))
        return 0
    if args.results is None:
        parser.error("give a results.json written by `trtconv bench --report DIR`")
    return compare(args.results, args)


if __name__ == "__main__":
    sys.exit(main())
