"""The functions behind every command: what the CLI, scripts and tests call.

Each takes its command's options object (trtconv.options: ConvertOptions, ValidateOptions,
BenchOptions, TrainOptions, TrainBenchmarkOptions, ReleaseOptions) and returns a typed result:
a dataclass subclassing trtconv.core.results.JsonResult whose `to_json()` is the command's
--json document (`from_json()` reads one back). inspect, doctor and merge_reports take their
few arguments directly.

    convert(ConvertOptions, progress=None) -> ConvertResult
    validate(ValidateOptions) -> ValidateResult
    bench(BenchOptions, progress=None) -> BenchResult
    train(TrainOptions) -> TrainResult
    train_benchmark(TrainBenchmarkOptions) -> TrainBenchmarkResult
    release(ReleaseOptions, progress=None) -> ReleaseResult
    inspect(path) -> InspectResult
    doctor(deep=True) -> DoctorReport
    merge_reports(directories, output, force=False) -> MergeResult

The modules behind them import TensorFlow, tf2onnx, ONNX Runtime and TensorRT only inside the
functions that need them, so importing this module stays cheap.
"""

from __future__ import annotations

from trtconv.bench.harness import bench
from trtconv.convert import convert
from trtconv.doctor import doctor
from trtconv.inspect_model import inspect_path as inspect
from trtconv.options import (
    BenchOptions,
    ClusterOptions,
    Contest,
    ConvertOptions,
    ReleaseOptions,
    TrainBenchmarkOptions,
    TrainOptions,
    ValidateOptions,
)
from trtconv.release.pipeline import release
from trtconv.report.merge import merge_reports
from trtconv.train.benchmark import TrainBenchmarkResult, train_benchmark
from trtconv.train.pipeline import TrainResult, train
from trtconv.validation import validate

__all__ = [
    "BenchOptions",
    "ClusterOptions",
    "Contest",
    "ConvertOptions",
    "ReleaseOptions",
    "TrainBenchmarkOptions",
    "TrainBenchmarkResult",
    "TrainOptions",
    "TrainResult",
    "ValidateOptions",
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
