"""Peak memory of int8 calibration against one batch's activations (BENCHMARKS.md).

Builds a small conv net on NHWC 256x256x8 inputs (the shape tf2onnx gives a Keras model: a
Transpose, two 3x3 convolutions with ReLU, a pooled classifier head), calibrates it on random
samples in whole batches, as `convert` does, and prints one JSON line: the peak RSS while
calibrating, its growth over the RSS before, one batch's calibrated activations and the model
size. Run each way in its own process so the peaks do not mix:

    python examples/calib_memory.py --method entropy --way streaming   # trtconv's calibrate()
    python examples/calib_memory.py --method entropy --way one-shot    # ORT's collect_data, as
                                                                       # trtconv did before

`--onnx MODEL.onnx --npz DATA.npz` calibrates that model (pre-processed as `convert` does) on
the first `--samples` of that data's arrays (named as the model's inputs) instead: BERT-base's
tf2onnx export and examples/bert_model.py's calib.npz in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from trtconv.calib.readers import calibration_feed, whole_batches
from trtconv.calib.sources import ArraySet
from trtconv.core.memory import MIB, PeakRss
from trtconv.quantize.preprocess import prepare_for_quantization
from trtconv.quantize.qdq import ENTROPY_BINS, ENTROPY_QUANTIZED_BINS, calibrate


def conv_net(path: Path, channels: int) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.normal(0, 0.2, shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w3", "b3"], ["logits"]),
    ]
    inits = [weight("w1", channels, 8, 3, 3), weight("b1", channels),
             weight("w2", channels, channels, 3, 3), weight("b2", channels),
             weight("w3", channels, 10), weight("b3", 10)]  # a layer a line # fmt: skip
    graph = helper.make_graph(
        nodes,
        "calib_memory",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 256, 256, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(onnx.shape_inference.infer_shapes(model), str(path))


def one_shot(model: Path, feed, method: str, work: Path) -> None:
    """What trtconv's calibrate() did before it streamed: ORT's collect_data over every batch."""
    from onnxruntime import quantization

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = feed()

        def get_next(self):
            return next(self.batches, None)

    extra = {"num_bins": ENTROPY_BINS, "num_quantized_bins": ENTROPY_QUANTIZED_BINS}
    names = {"entropy": "Entropy", "minmax": "MinMax", "percentile": "Percentile"}
    calibrator = quantization.create_calibrator(
        model,
        [],
        augmented_model_path=str(work / "augmented.onnx"),
        calibrate_method=getattr(quantization.CalibrationMethod, names[method]),
        extra_options=extra if method == "entropy" else {},
    )
    calibrator.collect_data(Reader())
    calibrator.compute_data()


def batch_activations_mb(model: Path, batch: dict, work: Path) -> float:
    """Bytes of every float tensor the calibrator reads (the model's inputs and every node's
    outputs) for one batch."""
    from onnxruntime.quantization import CalibrationMethod, create_calibrator

    calibrator = create_calibrator(
        model,
        [],
        augmented_model_path=str(work / "one.onnx"),
        calibrate_method=CalibrationMethod.Entropy,
    )
    names = [output.name for output in calibrator.infer_session.get_outputs()]
    outputs = calibrator.infer_session.run(None, batch)
    wanted = calibrator.tensors_to_calibrate
    return sum(a.nbytes for n, a in zip(names, outputs, strict=True) if n in wanted) / MIB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="entropy", choices=("entropy", "percentile", "minmax"))
    parser.add_argument("--way", default="streaming", choices=("streaming", "one-shot"))
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--onnx", type=Path, default=None)
    parser.add_argument("--npz", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="calib-memory-") as name:
        work = Path(name)
        model = work / "model.onnx"
        if args.onnx is None:
            conv_net(model, args.channels)
            rng = np.random.default_rng(1)
            arrays = {"x": rng.random((args.samples, 256, 256, 8), dtype=np.float32)}
        else:
            model, _ = prepare_for_quantization(args.onnx, model, str(args.onnx))
            with np.load(args.npz) as archive:
                arrays = {key: archive[key][: args.samples] for key in archive.files}
        data = whole_batches(ArraySet(arrays, None, "data"), args.batch)
        feed = calibration_feed(data, args.batch)
        started = time.perf_counter()
        with PeakRss() as memory:
            if args.way == "streaming":
                calibrate(model, feed, args.method, work, "conv net")
            else:
                one_shot(model, feed, args.method, work)
        seconds = time.perf_counter() - started
        figures = {
            "way": args.way,
            "method": args.method,
            "samples": len(data),
            "batch": args.batch,
            "data_mb": round(sum(a.nbytes for a in arrays.values()) / MIB, 1),
            "model_mb": round(model.stat().st_size / MIB, 3),
            # (a whole batch through the histogram calibrator: 14 GB for BERT-base; not run)
            "batch_activations_mb": None
            if args.onnx
            else round(batch_activations_mb(model, next(feed()), work), 1),
            "peak_rss_mb": memory.peak_mb,
            "rss_growth_mb": memory.growth_mb,
            "seconds": round(seconds, 1),
        }
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
