"""Small ONNX models and feeds for calibration tests, and the ranges ONNX Runtime's own
calibrator finds in one pass over every batch (what trtconv's calibration must reproduce)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from trtconv.calib.readers import calibration_feed
from trtconv.calib.sources import ArraySet
from trtconv.quantize.qdq import ENTROPY_BINS, ENTROPY_QUANTIZED_BINS

Feed = Callable[[], Iterator[dict[str, np.ndarray]]]
METHODS = {"entropy": "Entropy", "minmax": "MinMax", "percentile": "Percentile"}


def conv_net(path: Path, size: int, channels: int = 4) -> None:
    """NHWC [N, size, size, 3] -> Transpose -> Conv -> Relu -> Conv -> pooled -> 5 classes."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.normal(0, 0.3, shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["nchw", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w3", "b3"], ["logits"]),
    ]
    inits = [weight("w1", channels, 3, 3, 3), weight("b1", channels),
             weight("w2", channels, channels, 3, 3), weight("b2", channels),
             weight("w3", channels, 5), weight("b3", 5)]  # a layer a line # fmt: skip
    graph = helper.make_graph(
        nodes,
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", size, size, 3])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(onnx.shape_inference.infer_shapes(model), str(path))


def spread_feed(samples: int, size: int, batch: int) -> Feed:
    """`samples` random images in batches of `batch`, of growing spread (a later batch exceeds
    the first one's range)."""
    rng = np.random.default_rng(1)
    inputs = rng.normal(0, 1, (samples, size, size, 3)).astype(np.float32)
    inputs *= np.linspace(0.5, 3.0, samples, dtype=np.float32)[:, None, None, None]
    return calibration_feed(ArraySet({"x": inputs}, None, "test"), batch)


def one_shot_ranges(model: Path, feed: Feed, method: str, work: Path) -> dict:
    """ONNX Runtime's own collect_data over every batch at once (what calibrate() did before)."""
    from onnxruntime import quantization

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = feed()

        def get_next(self) -> dict | None:
            return next(self.batches, None)

    extra = {"num_bins": ENTROPY_BINS, "num_quantized_bins": ENTROPY_QUANTIZED_BINS}
    calibrator = quantization.create_calibrator(
        model,
        [],
        augmented_model_path=str(work / "one-shot.onnx"),
        calibrate_method=getattr(quantization.CalibrationMethod, METHODS[method]),
        extra_options=extra if method == "entropy" else {},
    )
    calibrator.collect_data(Reader())
    ranges = calibrator.compute_data()
    return {name: [np.asarray(v).item() for v in data.range_value] for name, data in ranges.items()}


def cached_ranges(cache: Path) -> dict:
    """The ranges of trtconv's calibration cache, as `one_shot_ranges` gives them."""
    from onnxruntime.quantization.calibrate import load_tensors_data

    ranges = load_tensors_data(cache)
    return {name: [np.asarray(v).item() for v in data.range_value] for name, data in ranges.items()}


def matmul_chain(path: Path, layers: int, rows: int, width: int) -> None:
    """[N, rows, width] -> (MatMul -> Tanh) x `layers`: every activation of a batch is
    `rows x width` float32, and each is read once, by the next layer."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, weights, previous = [], [], "x"
    for layer in range(layers):
        weight = rng.normal(0, 1 / np.sqrt(width), (width, width)).astype(np.float32)
        weights.append(numpy_helper.from_array(weight, f"w{layer}"))
        nodes.append(helper.make_node("MatMul", [previous, f"w{layer}"], [f"m{layer}"]))
        nodes.append(helper.make_node("Tanh", [f"m{layer}"], [f"t{layer}"]))
        previous = f"t{layer}"
    shape = ["N", rows, width]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, shape)],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(onnx.shape_inference.infer_shapes(model), str(path))
