"""Does saving only ORT_ENABLE_BASIC optimisations cost an `ort` fp32 artifact any speed?

    python examples/ort_saved_levels.py mobilenetv2|resnet50 BATCH ROUNDS

Exports the model (random weights) with tf2onnx, saves it at the basic and the extended level,
opens both with ORT_ENABLE_ALL (what trtconv's runner does), and prints one JSON line: the
contrib operators each saved file holds, whether the graphs the two sessions run are identical op
for op, the largest output difference, and interleaved latencies (median, p10) per file.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

LEVELS = ("basic", "extended")


def export(name: str, output: Path) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf
    import tf2onnx

    if name == "mobilenetv2":
        model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3))
    else:
        from trtconv.zoo.resnet import build_resnet50_v15

        model = build_resnet50_v15((224, 224, 3), 1000)
    spec = (tf.TensorSpec((None, 224, 224, 3), tf.float32, name="image"),)
    tf2onnx.convert.from_keras(model, input_signature=spec, opset=17, output_path=str(output))


def session(path: Path, level: str, saved: Path | None = None) -> object:
    """An ONNX Runtime CPU session at `level` ("basic", "extended", "all")."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel, f"ORT_ENABLE_{level.upper()}"
    )
    if saved is not None:
        options.optimized_model_filepath = str(saved)
    options.add_session_config_entry("session.set_denormal_as_zero", "1")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ops(path: Path) -> Counter[str]:
    import onnx

    return Counter(f"{n.domain or 'ai.onnx'}:{n.op_type}" for n in onnx.load(str(path)).graph.node)


def main(name: str, batch: int, rounds: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="ort-levels-"))
    source = work / f"{name}.onnx"
    export(name, source)
    import onnxruntime as ort

    saved, final, sessions = {}, {}, {}
    for label in LEVELS:
        saved[label] = work / f"{name}.{label}.onnx"
        session(source, label, saved[label])
        final[label] = work / f"{name}.{label}.all.onnx"
        session(saved[label], "all", final[label])
        sessions[label] = session(saved[label], "all")
    x = np.random.default_rng(0).random((batch, 224, 224, 3), dtype=np.float32)
    outputs = {label: s.run(None, {"image": x})[0] for label, s in sessions.items()}  # type: ignore[attr-defined]
    times: dict[str, list[float]] = {label: [] for label in sessions}
    for _ in range(rounds):
        for label, s in sessions.items():
            start = time.perf_counter()
            s.run(None, {"image": x})  # type: ignore[attr-defined]
            times[label].append((time.perf_counter() - start) * 1000)
    contrib = {
        k: {op: n for op, n in ops(p).items() if "com.microsoft" in op} for k, p in saved.items()
    }
    print(
        json.dumps(
            {
                "model": name,
                "batch": batch,
                "onnxruntime": ort.__version__,
                "contrib_ops_saved": contrib,
                "same_graph_after_all": ops(final["basic"]) == ops(final["extended"]),
                "max_abs_diff": float(np.abs(outputs["basic"] - outputs["extended"]).max()),
                "median_ms": {k: round(float(np.median(v)), 2) for k, v in times.items()},
                "p10_ms": {k: round(float(np.percentile(v, 10)), 2) for k, v in times.items()},
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
