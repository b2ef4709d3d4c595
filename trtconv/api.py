"""The plain functions behind every command: what the CLI, release pipelines and tests call.

Each returns a dict. The modules behind them import TensorFlow, tf2onnx, ONNX Runtime and
TensorRT only inside the functions that need them, so importing this module stays cheap.
"""

from __future__ import annotations

from trtconv.bench.harness import bench
from trtconv.convert import convert
from trtconv.doctor import doctor
from trtconv.inspect_model import inspect_path as inspect
from trtconv.options import ClusterOptions, TrainBenchmarkOptions, TrainOptions
from trtconv.release.pipeline import release
from trtconv.report.merge import merge_reports
from trtconv.train.benchmark import TrainBenchmarkResult, train_benchmark
from trtconv.train.pipeline import TrainResult, train
from trtconv.validation import validate

__all__ = [
    "ClusterOptions",
    "TrainBenchmarkOptions",
    "TrainBenchmarkResult",
    "TrainOptions",
    "TrainResult",
    "bench",
    "convert",
    "doctor",
    "inspect",
    "merge_reports",
    "release",
    "train",
    "train_benchmark",
    "validate",
]
