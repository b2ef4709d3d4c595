"""The functions behind every command: what the CLI, scripts and tests call.

Each takes its command's options object (trtconv.options: ConvertOptions, ValidateOptions,
BenchOptions, TrainOptions, TrainBenchmarkOptions, ReleaseOptions, and for serving
DeployOptions, ServeOptions, ServerBenchOptions, ScenarioBenchOptions) and returns a typed result:
a dataclass subclassing trtconv.core.results.JsonResult whose `to_json()` is the command's
--json document (`from_json()` reads one back). inspect, doctor and merge_reports take their
few arguments directly.

    convert(ConvertOptions, progress=None) -> ConvertResult
    validate(ValidateOptions) -> ValidateResult
    bench(BenchOptions, progress=None) -> BenchResult
    train(TrainOptions) -> TrainResult
    train_benchmark(TrainBenchmarkOptions) -> TrainBenchmarkResult
    release(ReleaseOptions, progress=None) -> ReleaseResult
    deploy(DeployOptions) -> DeployResult
    serve(ServeOptions, announce=print) -> ServeResult      (blocks while the server runs)
    server_bench(ServerBenchOptions) -> ServerBenchResult   (bench --scenario server)
    scenario_bench(ScenarioBenchOptions) -> ScenarioBenchResult  (single-stream, offline)
    inspect(path) -> InspectResult
    doctor(deep=True) -> DoctorReport
    merge_reports(directories, output, force=False) -> MergeResult

The modules behind them import TensorFlow, tf2onnx, ONNX Runtime and TensorRT only inside the
functions that need them, so importing this module stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable

from trtconv.bench.harness import bench
from trtconv.convert import convert
from trtconv.doctor.pipeline import doctor
from trtconv.inspect.pipeline import inspect_path as inspect
from trtconv.options.bench import BenchOptions
from trtconv.options.convert import Contest, ConvertOptions
from trtconv.options.deploy import DeployOptions
from trtconv.options.release import ReleaseOptions
from trtconv.options.serve import ServeOptions
from trtconv.options.server_bench import ScenarioBenchOptions, ServerBenchOptions
from trtconv.options.train import ClusterOptions, TrainBenchmarkOptions, TrainOptions
from trtconv.options.validate import ValidateOptions
from trtconv.release.pipeline import release
from trtconv.report.merge import merge_reports
from trtconv.serving.load.rate_search import server_bench
from trtconv.serving.load.scenarios import scenario_bench
from trtconv.serving.repository.deploy import deploy
from trtconv.serving.server.serve import serve as serve_with
from trtconv.serving.server.serve_result import ServeResult
from trtconv.train.benchmark import TrainBenchmarkResult, train_benchmark
from trtconv.train.pipeline import TrainResult, train
from trtconv.validate.pipeline import validate


def serve(options: ServeOptions, announce: Callable[[str], None] = print) -> ServeResult:
    """`trtconv serve`: serve `options.model` until stopped (or `options.stop_after_s`);
    `announce` gets the line that says where the server listens."""
    return serve_with(options, announce)


__all__ = [
    "BenchOptions",
    "ClusterOptions",
    "Contest",
    "ConvertOptions",
    "DeployOptions",
    "ReleaseOptions",
    "ScenarioBenchOptions",
    "ServeOptions",
    "ServerBenchOptions",
    "TrainBenchmarkOptions",
    "TrainBenchmarkResult",
    "TrainOptions",
    "TrainResult",
    "ValidateOptions",
    "bench",
    "convert",
    "deploy",
    "doctor",
    "inspect",
    "merge_reports",
    "release",
    "scenario_bench",
    "serve",
    "server_bench",
    "train",
    "train_benchmark",
    "validate",
]
