"""The plain functions behind every command: what the CLI, release pipelines and tests call.

Each returns a dict. The modules behind them import TensorFlow, tf2onnx, ONNX Runtime and
TensorRT only inside the functions that need them, so importing this module stays cheap.
"""

from __future__ import annotations

from trtconv.bench.harness import bench
from trtconv.convert import convert
from trtconv.doctor import doctor
from trtconv.inspect_model import inspect_path as inspect
from trtconv.release.pipeline import release
from trtconv.report.merge import merge_reports
from trtconv.train.benchmark import train_benchmark
from trtconv.train.pipeline import train
from trtconv.validation import validate

__all__ = [
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
