"""OpenVINO's own int8 against trtconv's best artifact, timed in the same run (BENCHMARKS.md).

    python examples/openvino_own.py build SAVED_MODEL CALIB.npz OUT_DIR [--model-type transformer]
    python examples/openvino_own.py race ARTIFACT OUT_DIR/model.xml DATA.npz
                                    [--batch-size 8] [--rounds 5] [--seconds 10] [--threads N]
                                    [--goal 1.0] [--json RESULT.json] [--own-throughput]

`build` does what an OpenVINO user does, with no trtconv code: `ov.convert_model` on the
SavedModel's loaded `serving_default` function (OpenVINO's SavedModel reader fails on Keras 3
models written by `tf.saved_model.save`), `nncf.quantize` with NNCF's defaults on the calibration
data one sample per item (NNCF's default subset of 300), `ov.save_model`. With
`--model-type transformer`, NNCF's transformer mode (`model_type=nncf.ModelType.TRANSFORMER`:
SmoothQuant, the attention's inputs kept out, what OpenVINO's guides use for BERT). A model of
several inputs (BERT's token_ids, segment_ids, padding_mask) takes the calibration file's
arrays of the same names; a model of one input takes the file's first array.

`race` times, at one batch size, trtconv's own bench worker on ARTIFACT and a plain loop over
the OpenVINO model (`compile_model` with the LATENCY hint and nothing else, synchronous
`InferRequest.infer`), each in a fresh process, on the same input file and thread count. This
machine's speed drifts between runs, so the two are interleaved (trtconv, OpenVINO, trtconv, ...)
for `--rounds` rounds and compared by medians, with the round-to-round spread. With
`--own-throughput`, each round also times OpenVINO's own in its throughput mode as its
benchmark_app runs it (THROUGHPUT hint, its optimal number of whole batches in flight through an
`AsyncInferQueue`), and the goal is judged against the faster of its two modes. It prints the
verdict of the goal "trtconv's best >= OpenVINO's own int8" (exit 0 either way).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plain_loop import plain_round, trtconv_round

NNCF_DEFAULT_SUBSET = 300


def build(saved_model: Path, calibration: Path, output: Path, model_type: str | None) -> Path:
    """OpenVINO's own int8 IR of `saved_model` in `output`; returns the .xml path."""
    import nncf
    import openvino as ov
    import tensorflow as tf

    loaded = tf.saved_model.load(str(saved_model))
    model = ov.convert_model(loaded.signatures["serving_default"], share_weights=False)
    arrays = named_arrays(calibration, [port.get_any_name() for port in model.inputs])
    count = min(len(next(iter(arrays.values()))), NNCF_DEFAULT_SUBSET)
    items = [{name: array[i : i + 1] for name, array in arrays.items()} for i in range(count)]
    kind = {"model_type": nncf.ModelType.TRANSFORMER} if model_type == "transformer" else {}
    quantized = nncf.quantize(model, nncf.Dataset(items), **kind)
    output.mkdir(parents=True, exist_ok=True)
    path = output / "model.xml"
    ov.save_model(quantized, str(path))
    return path


def named_arrays(npz: Path, names: list[str]) -> dict[str, np.ndarray]:
    """The file's arrays named `names` (a model of several inputs), else its first array as
    float32 under the one name (images in trtconv's data files: `x`)."""
    with np.load(npz) as archive:
        if set(names) <= set(archive.files):
            return {name: archive[name] for name in names}
    (name,) = names
    return {name: first_array(npz).astype(np.float32)}


def shared_inputs(artifact: Path, data: Path, path: Path) -> Path:
    """DATA's arrays keyed by the artifact's input names (see `named_arrays`)."""
    from trtconv.artifact.manifest import read_manifest

    names = list(read_manifest(artifact).model_signature.input_names)
    np.savez(path, **named_arrays(data, names))
    return path


def first_array(npz: Path) -> np.ndarray:
    """The first array of an .npz (the images: `x` in trtconv's data files)."""
    with np.load(npz) as archive:
        return archive[next(key for key in archive.files if key != "__labels__")]


def race(args: argparse.Namespace) -> dict[str, Any]:
    """Interleaved rounds of trtconv's worker on the artifact and the plain OpenVINO loop."""
    with tempfile.TemporaryDirectory(prefix="openvino-own-") as tmp:
        data = shared_inputs(args.artifact, args.data, Path(tmp) / "inputs.npz")
        mine, own, pipelined = rounds(args, data, Path(tmp))
    return summary(mine, own, pipelined, args)


def rounds(args: argparse.Namespace, data: Path, workdir: Path) -> tuple[list, list, list]:
    """(trtconv's figures, OpenVINO's, OpenVINO's in its throughput mode or nothing) at the
    batch size, one of each per round."""
    spec = {
        "backend": "openvino",
        "precision": None,  # OpenVINO's defaults: its own int8, as its users run it
        "payload": str(args.own),
        "threads": args.threads,
        "batch_sizes": [args.batch_size],
        "seconds": args.seconds,
        "data": str(data),
    }
    batch = str(args.batch_size)
    mine, own, pipelined = [], [], []
    for index in range(args.rounds):
        mine.append(trtconv_round(str(args.artifact), spec, workdir, index)[batch])
        own.append(plain_round(spec)[batch])
        if args.own_throughput:
            pipelined.append(plain_round({**spec, "throughput": True})[batch])
    return mine, own, pipelined


def summary(
    mine: list[dict], own: list[dict], pipelined: list[dict], args: argparse.Namespace
) -> dict[str, Any]:
    """Medians and spreads of each, and the goal's verdict: against the faster of OpenVINO's
    two modes when its throughput mode was timed too."""

    def figures(rounds: list[dict]) -> dict[str, Any]:
        per_s = [r["per_s"] for r in rounds]
        return {
            "throughput_per_s_median": float(np.median(per_s)),
            "throughput_per_s_rounds": per_s,
            "spread_percent": (max(per_s) / min(per_s) - 1) * 100,
            "latency_ms_p50_median": float(np.median([r["p50_ms"] for r in rounds])),
        }

    result = {
        "artifact": str(args.artifact),
        "openvino_own": str(args.own),
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "seconds": args.seconds,
        "threads": args.threads,
        "trtconv_best": figures(mine),
        "openvino_own_int8": figures(own),
    }
    rival = result["openvino_own_int8"]["throughput_per_s_median"]
    if pipelined:
        result["openvino_own_int8_throughput_mode"] = figures(pipelined)
        rival = max(rival, result["openvino_own_int8_throughput_mode"]["throughput_per_s_median"])
    ratio = result["trtconv_best"]["throughput_per_s_median"] / max(rival, 1e-9)
    result["ratio"] = ratio
    result["goal"] = args.goal
    result["goal_met"] = ratio >= args.goal
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("build", help="OpenVINO's own int8 IR (NNCF defaults).")
    make.add_argument("saved_model", type=Path)
    make.add_argument("calibration", type=Path)
    make.add_argument("output", type=Path)
    make.add_argument("--model-type", choices=("transformer",), default=None)
    timed = sub.add_parser("race", help="Interleaved timing against a trtconv artifact.")
    timed.add_argument("artifact", type=Path)
    timed.add_argument("own", type=Path)
    timed.add_argument("data", type=Path)
    timed.add_argument("--batch-size", type=int, default=8)
    timed.add_argument("--rounds", type=int, default=5)
    timed.add_argument("--seconds", type=float, default=10.0)
    timed.add_argument("--threads", type=int, default=None)
    timed.add_argument("--goal", type=float, default=1.0)
    timed.add_argument("--json", type=Path, default=None)
    timed.add_argument(
        "--own-throughput",
        action="store_true",
        help="Also time OpenVINO's own in its throughput mode (async, whole batches in flight).",
    )
    args = parser.parse_args()
    if args.command == "build":
        path = build(args.saved_model, args.calibration, args.output, args.model_type)
        print(f"OpenVINO's own int8: {path}")
        return 0
    result = race(args)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    best, own = result["trtconv_best"], result["openvino_own_int8"]
    print(f"batch {args.batch_size}, {args.rounds} interleaved rounds of {args.seconds:g} s")
    rows = [("trtconv best", best), ("OpenVINO own int8", own)]
    if "openvino_own_int8_throughput_mode" in result:
        rows.append(("  its throughput mode", result["openvino_own_int8_throughput_mode"]))
    for name, figures in rows:
        print(
            f"  {name:18} {figures['throughput_per_s_median']:8.1f} samples/s (median; spread "
            f"{figures['spread_percent']:.0f}%), p50 {figures['latency_ms_p50_median']:.2f} ms"
        )
    verdict = "met" if result["goal_met"] else "MISSED"
    ratio, goal = result["ratio"], args.goal
    faster = " (the faster of its two modes)" if len(rows) > 2 else ""
    print(f"  trtconv best / OpenVINO own{faster} = {ratio:.3f} (goal >= {goal:g}): {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
