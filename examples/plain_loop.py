"""Cross-check trtconv bench against plain loops over the libraries themselves.

    python examples/plain_loop.py RESULTS.json [--iterations N] [--tolerance 5]

For every native SavedModel (without XLA) and every ONNX Runtime artifact in a `trtconv bench`
results.json, this runs a plain loop in a fresh process, on the same inputs (same data source,
same batches) with the same thread count:

- SavedModel: `loaded.signatures["serving_default"](**feeds)` and `.numpy()` on each output;
- ONNX Runtime: `InferenceSession.run(None, feeds)` with the session options OrtRunner uses
  (ORT_ENABLE_ALL, intra-op threads, denormals as zero).

It prints trtconv's and the plain loop's median latency and throughput side by side, and exits
with 1 when any differs by more than the tolerance (default 5%). Nothing here goes through
trtconv's runners or timing code; only the input preparation is shared, so that both see the
same arrays.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def load_batches(settings: dict[str, Any], signature: Any, batch_size: int) -> list[dict]:
    """The batches trtconv timed: same data source, same batching (shared preparation code)."""
    from trtconv.bench.inputs import load_inputs
    from trtconv.bench.models import ModelEntry
    from trtconv.bench.worker import make_batches

    entry = ModelEntry("plain", Path("."), "saved_model", "tf", "fp32", Path("."), signature)
    data = load_inputs(settings["data"], entry, max(settings["batch_sizes"]), None)
    return make_batches(data.inputs, batch_size, 8)


def tf_loop(path: str, threads: int | None) -> tuple[Any, Any]:
    """A plain call of the serving signature; `.numpy()` makes each call finish."""
    import tensorflow as tf

    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    loaded = tf.saved_model.load(path)
    function = loaded.signatures["serving_default"]

    def call(feeds: dict) -> None:
        for tensor in function(**feeds).values():
            tensor.numpy()

    from trtconv.bench.signature import read_signature

    call.loaded = loaded  # type: ignore[attr-defined]  # keep the variables alive
    return call, read_signature(Path(path))


def ort_loop(artifact: str, threads: int | None) -> tuple[Any, Any]:
    """A plain `InferenceSession.run` with the session options trtconv's OrtRunner uses."""
    import onnxruntime as ort

    from trtconv.manifest import read_manifest

    manifest = read_manifest(Path(artifact))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads:
        options.intra_op_num_threads = threads
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    session = ort.InferenceSession(
        str(Path(artifact) / manifest.payload), options, providers=["CPUExecutionProvider"]
    )
    names = [i.name for i in session.get_inputs()]

    def call(feeds: dict) -> None:
        # Feed by position: the artifact may name its inputs differently from the SavedModel.
        session.run(None, dict(zip(names, feeds.values(), strict=True)))

    return call, manifest.model_signature


def run_one(spec: dict[str, Any]) -> dict[str, Any]:
    """Inside a fresh process: time a plain loop at every batch size."""
    loop = tf_loop if spec["backend"] == "tf" else ort_loop
    call, signature = loop(spec["model"], spec["threads"])
    figures = {}
    for batch_size in spec["settings"]["batch_sizes"]:
        batches = load_batches(spec["settings"], signature, batch_size)
        for index in range(spec["warmup"]):
            call(batches[index % len(batches)])
        latencies = []
        start = time.perf_counter_ns()
        for index in range(spec["iterations"]):
            begin = time.perf_counter_ns()
            call(batches[index % len(batches)])
            latencies.append(time.perf_counter_ns() - begin)
        wall = time.perf_counter_ns() - start
        figures[str(batch_size)] = {
            "latency_ms_p50": float(np.median(latencies)) / 1e6,
            "throughput_per_s": batch_size * len(latencies) / (wall / 1e9),
        }
    return figures


def compare(results_path: Path, iterations: int | None, tolerance: float) -> int:
    """Run a plain loop per comparable model and print the comparison; 1 if any is off."""
    results = json.loads(results_path.read_text())
    settings = results["settings"]
    worst = 0.0
    print(f"{'model':24} {'batch':>5} {'trtconv p50':>12} {'plain p50':>10} {'Δ%':>6} "
          f"{'trtconv /s':>11} {'plain /s':>10} {'Δ%':>6}")  # fmt: skip
    for model in results["models"]:
        if model["xla"] or model["backend"] not in ("tf", "ort"):
            continue
        rows = [r for r in results["results"] if r["label"] == model["label"]]
        spec = {
            "backend": model["backend"],
            "model": model["model"],
            "threads": results["threads"],
            "settings": settings,
            "iterations": iterations or max(r["iterations"] for r in rows),
            "warmup": settings.get("warmup_iterations") or 10,
        }
        completed = subprocess.run(
            [sys.executable, __file__, "--one", json.dumps(spec)],
            capture_output=True,
            text=True,
            check=True,
        )
        plain = json.loads(completed.stdout.strip().splitlines()[-1])
        for row in rows:
            mine = plain[str(row["batch_size"])]
            d_p50 = (mine["latency_ms_p50"] / row["latency_ms_p50"] - 1) * 100
            d_tput = (mine["throughput_per_s"] / row["throughput_per_s"] - 1) * 100
            worst = max(worst, abs(d_p50), abs(d_tput))
            print(
                f"{model['label']:24} {row['batch_size']:>5} {row['latency_ms_p50']:>12.4f} "
                f"{mine['latency_ms_p50']:>10.4f} {d_p50:>+6.1f} {row['throughput_per_s']:>11.1f} "
                f"{mine['throughput_per_s']:>10.1f} {d_tput:>+6.1f}"
            )
    verdict = "agree" if worst <= tolerance else "DISAGREE"
    print(f"largest difference {worst:.1f}% (tolerance {tolerance:g}%): {verdict}")
    return 0 if worst <= tolerance else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="?", type=Path, help="trtconv bench results.json")
    parser.add_argument("--iterations", type=int, help="Plain-loop iterations (default: same).")
    parser.add_argument("--tolerance", type=float, default=5.0, help="Allowed difference, %%.")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: one model in this process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one))))
        return 0
    if args.results is None:
        parser.error("give a results.json written by `trtconv bench --report DIR`")
    return compare(args.results, args.iterations, args.tolerance)


if __name__ == "__main__":
    sys.exit(main())
