"""ONNX Runtime: fp32 with graph optimisations saved, int8 as explicit Q/DQ, fp16 on GPU providers.

Optimisation level of the saved fp32 model: ORT_ENABLE_EXTENDED. Its fusions (Conv+BN+ReLU,
Gemm+activation, ...) hold on any x86 CPU; ORT_ENABLE_ALL adds layout transforms (NCHWc blocking)
sized for *this* CPU's vector width, which would make the artifact wrong-footed on another machine.
The runner still asks for ALL at load time, so the machine that runs the model adds them itself.

INT8 is static Q/DQ (QuantizeLinear/DequantizeLinear around float ops), per-channel weights. For
ORT CPU: uint8 activations and int8 weights (U8S8): on this x86 CPU S8S8 ran 3.6x slower
(DESIGN.md). TensorRT only reads signed, symmetric int8 Q/DQ, so the `trt` backend gets its own
S8S8 symmetric model (`quantize_qdq(..., scheme="s8s8")`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from trtconv.backends.base import (
    CalibrationFeed,
    ConversionOutcome,
    ConversionRequest,
    Feeds,
    Runner,
)
from trtconv.errors import ConversionError, InputError, MissingDependencyError, UsageError
from trtconv.lazy import require
from trtconv.model_io import ModelSignature, TensorSpec

log = logging.getLogger(__name__)

PAYLOAD = "model.onnx"
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
CALIB_METHODS = ("entropy", "minmax", "percentile")
QDQ_SCHEMES = ("u8s8", "s8s8")
SAVED_OPTIMIZATION = "extended"
ORT_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


def providers_for(precision: str) -> list[str]:
    """Execution providers for a precision: fp16/tf32 need CUDA; fp32 and int8 run on the CPU."""
    ort = require("onnxruntime")
    available = ort.get_available_providers()
    if precision in ("fp16", "tf32"):
        if CUDA not in available:
            raise MissingDependencyError(
                f"ONNX Runtime {precision} needs the CUDA execution provider; available: "
                f"{', '.join(available)} (install trtconv[gpu] on a GPU machine)."
            )
        return [CUDA, CPU]
    return [CPU]


def provider_options(precision: str, providers: list[str]) -> list[dict[str, str]]:
    """CUDA allows TF32 unless told not to: fp32 must turn it off, tf32 turns it on."""
    options = []
    for provider in providers:
        if provider == CUDA:
            options.append({"use_tf32": "1" if precision == "tf32" else "0"})
        else:
            options.append({})
    return options


class OrtRunner(Runner):
    """Runs an ONNX model with ONNX Runtime, inputs fed by name.

    `providers` default to what the artifact's manifest recorded, else the CPU provider. The session
    must really use every provider asked for: onnxruntime-gpu silently falls back to the CPU when
    CUDA libraries are missing, and that is an error here, not a slow surprise.
    """

    backend: ClassVar[str] = "ort"

    def __init__(
        self,
        path: Path,
        providers: list[str] | None = None,
        threads: int | None = None,
        denormal_as_zero: bool = True,
        options: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(path)
        recorded = _recorded_providers(self.path)
        self.providers = providers or (recorded[0] if recorded else [CPU])
        self.options = options or (recorded[1] if recorded and not providers else None)
        self.threads = threads
        self.denormal_as_zero = denormal_as_zero
        self.session: Any = None

    def activate_impl(self) -> ModelSignature:
        ort = require("onnxruntime")
        if not self.path.is_file():
            raise InputError(f"ONNX model {self.path} does not exist.")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.threads is not None:
            options.intra_op_num_threads = self.threads
        if self.denormal_as_zero:
            # Denormal floats take a slow path on x86: a random-weight model ran 2x slower.
            options.add_session_config_entry("session.set_denormal_as_zero", "1")
        try:
            self.session = ort.InferenceSession(
                str(self.path),
                sess_options=options,
                providers=self.providers,
                provider_options=self.options,
            )
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"ONNX Runtime could not load {self.path}: {first[:300]}") from exc
        used = self.session.get_providers()
        absent = [p for p in self.providers if p not in used]
        if absent:
            raise MissingDependencyError(
                f"ONNX Runtime did not enable {', '.join(absent)} for {self.path} (it uses "
                f"{', '.join(used)}); check the CUDA/TensorRT libraries."
            )
        return ModelSignature(
            inputs=tuple(_spec(value) for value in self.session.get_inputs()),
            outputs=tuple(_spec(value) for value in self.session.get_outputs()),
        )

    def infer_impl(self, feeds: Feeds) -> dict[str, np.ndarray]:
        names = self.signature.output_names
        results = self.session.run(names, feeds)
        return dict(zip(names, results, strict=True))


def _spec(value: Any) -> TensorSpec:
    shape = tuple(d if isinstance(d, int) else None for d in value.shape)
    return TensorSpec(value.name, shape, ORT_TYPES.get(value.type, value.type))


def _recorded_providers(payload: Path) -> tuple[list[str], list[dict[str, str]]] | None:
    """Providers the artifact's manifest recorded at conversion time, if the payload has one."""
    import json

    manifest = payload.parent / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        summary = json.loads(manifest.read_text()).get("conversion_summary", {})
    except (OSError, ValueError):
        return None
    providers = summary.get("providers")
    if not providers:
        return None
    return list(providers), list(summary.get("provider_options") or [{} for _ in providers])


def convert(request: ConversionRequest) -> ConversionOutcome:
    """Write `model.onnx` for the request's precision into `request.output_dir`.

    fp32/tf32: the validated export, optimised offline; int8: the Q/DQ model (built here from
    `request.calibration` unless `request.qdq_onnx_path` is given); fp16: float16 weights and
    compute with float32 inputs/outputs. Raises MissingDependencyError for a precision no
    available provider runs, ConversionError when ONNX Runtime fails.
    """
    if request.onnx_path is None:
        raise ConversionError("The ort backend needs the ONNX export (request.onnx_path unset).")
    providers = providers_for(request.precision)
    output = Path(request.output_dir) / PAYLOAD
    summary: dict[str, Any] = {
        "providers": providers,
        "provider_options": provider_options(request.precision, providers),
    }
    if request.precision in ("fp32", "tf32"):
        summary.update(optimize_offline(request.onnx_path, output, providers))
    elif request.precision == "int8":
        qdq = request.qdq_onnx_path
        if qdq is None:
            if request.calibration is None:
                raise UsageError("INT8 conversion needs calibration data (--calib-data).")
            qdq = Path(request.output_dir) / ".qdq.onnx"
            summary["quantization"] = quantize_qdq(
                request.onnx_path, qdq, request.calibration, request.calib_method
            )
        # Kept as pure Q/DQ (no offline fusion into QLinearConv): the same file runs on any EP
        # and is what TensorRT builds explicit-precision engines from.
        shutil.copyfile(qdq, output)
        if qdq.parent == Path(request.output_dir):
            qdq.unlink()
    elif request.precision == "fp16":
        summary.update(to_float16(request.onnx_path, output))
    else:
        raise UsageError(f"The ort backend does not support precision '{request.precision}'.")
    summary["op_counts"] = op_counts(output)
    return ConversionOutcome(payload=PAYLOAD, summary=summary, device=_device(providers))


def _device(providers: list[str]) -> dict[str, Any]:
    from trtconv.environment import cpu_info, nvidia_gpus

    device: dict[str, Any] = {"provider": providers[0], "cpu": cpu_info()["model"]}
    if providers[0] != CPU:
        gpus = nvidia_gpus()
        device["gpu"] = gpus[0]["name"] if gpus else None
    return device


def optimize_offline(source: Path, output: Path, providers: list[str]) -> dict[str, Any]:
    """Apply ORT_ENABLE_EXTENDED graph optimisations to `source` and save them as `output`."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(output)
    started = time.perf_counter()
    try:
        ort.InferenceSession(str(source), sess_options=options, providers=providers)
    except Exception as exc:
        raise ConversionError(f"ONNX Runtime could not optimise {source}: {exc}") from exc
    if not output.is_file():
        raise ConversionError(f"ONNX Runtime wrote no optimised model to {output}.")
    return {
        "optimization_level": SAVED_OPTIMIZATION,
        "optimize_seconds": round(time.perf_counter() - started, 3),
    }


def _calibration_reader(feed: CalibrationFeed) -> Any:
    """An onnxruntime CalibrationDataReader over `feed` (class built here: import stays lazy)."""
    quantization = require("onnxruntime.quantization")

    base: Any = quantization.CalibrationDataReader

    class FeedReader(base):
        def __init__(self) -> None:
            self.batches = feed()
            self.count = 0

        def get_next(self) -> dict[str, np.ndarray] | None:
            batch = next(self.batches, None)
            if batch is not None:
                self.count += len(next(iter(batch.values())))
            return batch

        def rewind(self) -> None:
            self.batches = feed()

    return FeedReader()


def quantize_qdq(
    source: Path,
    output: Path,
    feed: CalibrationFeed,
    method: str = "entropy",
    scheme: str = "u8s8",
) -> dict[str, Any]:
    """Calibrate on `feed` and write an explicit Q/DQ int8 model of `source` to `output`.

    `scheme` "u8s8" (uint8 activations, int8 weights: fast on ORT CPU) or "s8s8" (int8,
    symmetric activations: what TensorRT accepts). Weights are per-channel and symmetric.
    Returns a summary for the manifest; raises UsageError for an unknown method or scheme and
    ConversionError when calibration or quantisation fails.
    """
    quantization = require("onnxruntime.quantization")
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if method not in CALIB_METHODS:
        raise UsageError(f"Unknown calibration method '{method}'; expected {CALIB_METHODS}.")
    if scheme not in QDQ_SCHEMES:
        raise UsageError(f"Unknown Q/DQ scheme '{scheme}'; expected {QDQ_SCHEMES}.")
    methods = {
        "entropy": quantization.CalibrationMethod.Entropy,
        "minmax": quantization.CalibrationMethod.MinMax,
        "percentile": quantization.CalibrationMethod.Percentile,
    }
    activation = quantization.QuantType.QUInt8 if scheme == "u8s8" else quantization.QuantType.QInt8
    prepared = output.with_name(output.stem + ".pre.onnx")
    reader = _calibration_reader(feed)
    started = time.perf_counter()
    chatter = io.StringIO()
    try:
        # Shape inference and ORT's basic fusions first (Conv+BN, ...): fewer, better-placed Q/DQ.
        quant_pre_process(str(source), str(prepared))
        float_nodes = softmax_nodes(prepared)
        # The calibrators print progress to stdout, which belongs to the result (--json).
        with contextlib.redirect_stdout(chatter):
            quantization.quantize_static(
                str(prepared),
                str(output),
                reader,
                quant_format=quantization.QuantFormat.QDQ,
                per_channel=True,
                activation_type=activation,
                weight_type=quantization.QuantType.QInt8,
                calibrate_method=methods[method],
                extra_options={"ActivationSymmetric": scheme == "s8s8", "WeightSymmetric": True},
                nodes_to_exclude=float_nodes,
            )
    except Exception as exc:
        raise ConversionError(f"INT8 quantisation of {source} failed: {exc}") from exc
    finally:
        log.debug("quantize_static: %s", chatter.getvalue().strip())
        prepared.unlink(missing_ok=True)
        # quantize_static leaves its augmented calibration model beside the output.
        for leftover in output.parent.glob("augmented_model*.onnx"):
            leftover.unlink(missing_ok=True)
    if reader.count == 0:
        raise ConversionError(f"INT8 quantisation of {source} saw no calibration samples.")
    counts = op_counts(output)
    if not counts.get("QuantizeLinear") or not counts.get("DequantizeLinear"):
        raise ConversionError(f"Quantised model {output} holds no QuantizeLinear/Dequantize nodes.")
    return {
        "format": "qdq",
        "scheme": scheme,
        "activations": "uint8" if scheme == "u8s8" else "int8 (symmetric)",
        "weights": "int8 per-channel symmetric",
        "calib_method": method,
        "kept_float": float_nodes,
        "calibration_samples_seen": reader.count,
        "quantize_seconds": round(time.perf_counter() - started, 3),
    }


def softmax_nodes(path: Path) -> list[str]:
    """Names of the Softmax nodes, which quantisation must leave in float.

    A quantised Softmax maps every probability of a low-confidence output (a random-weight
    ResNet-50: ~0.001 each) to the same uint8 step, so the top-1 class degenerates to index 0
    (top-1 agreement 0.0 measured); in float it costs nothing measurable on ORT CPU and the
    class ranking survives.
    """
    onnx = require("onnx")
    model = onnx.load(str(path), load_external_data=False)
    return [node.name for node in model.graph.node if node.op_type == "Softmax"]


def to_float16(source: Path, output: Path) -> dict[str, Any]:
    """float16 weights and compute, float32 inputs and outputs (for GPU providers)."""
    onnx = require("onnx")
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = convert_float_to_float16(onnx.load(str(source)), keep_io_types=True)
    onnx.save(model, str(output))
    return {"float16": "weights and compute; inputs and outputs stay float32"}


def op_counts(path: Path) -> dict[str, int]:
    """How many nodes of each op type the ONNX model holds (sorted by type)."""
    onnx = require("onnx")
    model = onnx.load(str(path), load_external_data=False)
    return dict(sorted(Counter(node.op_type for node in model.graph.node).items()))
