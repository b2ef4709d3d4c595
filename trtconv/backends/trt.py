"""TensorRT >= 10 engines built from the validated ONNX export, and a runner for them.

Written against the TensorRT 10 Python API (as used by Polygraphy's backend/trt and NVIDIA's
samples/python/common_runtime.py): networks are explicit-batch by default, INT8 is *explicit*
(the ONNX carries QuantizeLinear/DequantizeLinear nodes; no calibrator, which TensorRT 10
deprecated and 11 removed), TF32 is on by default and must be cleared for fp32.

The builder configuration (flags per precision, optimisation profile from batch sizes, timing
cache) lives in small functions that take the `tensorrt` module as an argument, so they can be
checked here with a recording stand-in; importing this module never imports tensorrt.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from trtconv.backends.base import ConversionOutcome, ConversionRequest, Feeds, Runner
from trtconv.capabilities import TRT_FIX, check_supported, probe
from trtconv.errors import ConversionError, InputError, MissingDependencyError, UsageError
from trtconv.fsutil import write_atomic
from trtconv.lazy import require
from trtconv.model_io import ModelSignature

log = logging.getLogger(__name__)

PAYLOAD = "model.plan"
TIMING_CACHE = "timing.cache"
# Builder flags per precision: (set, clear). TF32 is on by default in TensorRT, so fp32 clears it.
# fp16/int8 leave TF32 allowed for the layers that stay in float32.
PRECISION_FLAGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "fp32": ((), ("TF32",)),
    "tf32": (("TF32",), ()),
    "fp16": (("FP16",), ()),
    "int8": (("INT8",), ()),
}
WORKSPACE_BYTES = 4 << 30
ProfileShapes = dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


def shared_timing_cache() -> Path:
    """Where timing caches are shared between builds (TRTCONV_TRT_TIMING_CACHE overrides)."""
    default = Path.home() / ".cache" / "trtconv" / "trt-timing.cache"
    return Path(os.environ.get("TRTCONV_TRT_TIMING_CACHE", default))


def precision_flags(precision: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(flags to set, flags to clear) on the IBuilderConfig; UsageError for an unknown one."""
    if precision not in PRECISION_FLAGS:
        raise UsageError(
            f"Unknown precision '{precision}'; TensorRT takes {list(PRECISION_FLAGS)}."
        )
    return PRECISION_FLAGS[precision]


def profile_shapes(
    inputs: list[tuple[str, tuple[int, ...]]], batch_sizes: tuple[int, ...]
) -> ProfileShapes:
    """(min, opt, max) per input: batch from min to max of `batch_sizes`, optimal at the max.

    `inputs` are (name, shape) with -1 (or None) for dynamic dimensions, as the parsed network
    reports them. Raises InputError when a non-batch dimension is dynamic: TensorRT needs it
    fixed and we have no size for it.
    """
    if not batch_sizes or min(batch_sizes) < 1:
        raise UsageError(f"Batch sizes must be positive integers, got {list(batch_sizes)}.")
    low, high = min(batch_sizes), max(batch_sizes)
    shapes: ProfileShapes = {}
    for name, shape in inputs:
        dims = [-1 if dim is None else int(dim) for dim in shape]
        if any(dim < 0 for dim in dims[1:]):
            raise InputError(
                f"ONNX input '{name}' has dynamic dimensions {dims}; a TensorRT engine needs all "
                "but the batch dimension fixed: export the model with a fixed input size."
            )
        if dims and dims[0] >= 0 and not low == high == dims[0]:
            raise InputError(
                f"ONNX input '{name}' has a fixed batch of {dims[0]}, but batch sizes "
                f"{list(batch_sizes)} were asked for: export with a dynamic batch."
            )
        rest = tuple(dims[1:])
        shapes[name] = ((low, *rest), (high, *rest), (high, *rest))
    return shapes


def network_inputs(network: Any) -> list[tuple[str, tuple[int, ...]]]:
    """(name, shape) of a parsed network's inputs, -1 for dynamic dimensions."""
    inputs = []
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        inputs.append((str(tensor.name), tuple(int(dim) for dim in tensor.shape)))
    return inputs


def configure_builder(
    trt: Any,
    builder: Any,
    precision: str,
    shapes: ProfileShapes,
    timing_cache: bytes = b"",
    workspace_bytes: int = WORKSPACE_BYTES,
) -> tuple[Any, Any]:
    """Create and fill the IBuilderConfig; returns (config, timing_cache_object).

    Flags from PRECISION_FLAGS, one optimisation profile from `shapes`, a workspace limit, and
    the timing cache loaded from `timing_cache` (empty bytes: a fresh cache the build fills).
    """
    to_set, to_clear = precision_flags(precision)
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    for flag in to_set:
        config.set_flag(getattr(trt.BuilderFlag, flag))
    for flag in to_clear:
        config.clear_flag(getattr(trt.BuilderFlag, flag))
    profile = builder.create_optimization_profile()
    for name, (low, opt, high) in shapes.items():
        profile.set_shape(name, low, opt, high)
    config.add_optimization_profile(profile)
    cache = config.create_timing_cache(timing_cache)
    # ignore_mismatch=False: a cache from another GPU or TensorRT version is refused, not used.
    config.set_timing_cache(cache, False)
    return config, cache


def parse_onnx(trt: Any, builder: Any, logger: Any, path: Path) -> tuple[Any, Any]:
    """Parse an ONNX file into a new explicit-batch network; (network, parser).

    The parser must outlive the network's use (it owns the weights), so it is returned too.
    Raises ConversionError with the parser's errors.
    """
    network = builder.create_network(0)  # TensorRT 10: explicit batch is the only mode
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise ConversionError(
            f"TensorRT could not parse {path}: {'; '.join(errors) or 'unknown parser error'}."
        )
    return network, parser


def has_qdq(trt: Any, network: Any) -> bool:
    """True when the network holds Quantize/Dequantize layers (explicit INT8)."""
    kinds = (trt.LayerType.QUANTIZE, trt.LayerType.DEQUANTIZE)
    return any(network.get_layer(i).type in kinds for i in range(network.num_layers))


def source_onnx(request: ConversionRequest) -> Path:
    """The ONNX TensorRT builds from: the Q/DQ model for int8, the fp32 export otherwise."""
    source = request.qdq_onnx_path if request.precision == "int8" else request.onnx_path
    if source is None:
        what = "Q/DQ int8 ONNX model" if request.precision == "int8" else "ONNX export"
        raise UsageError(f"The trt backend needs the {what}; the conversion request has none.")
    return Path(source)


def convert(request: ConversionRequest) -> ConversionOutcome:
    """Build a TensorRT engine from the request's ONNX into output_dir/model.plan.

    Raises MissingDependencyError (exit 3) without TensorRT >= 10 or a GPU, ConversionError when
    parsing or building fails.
    """
    check_supported("trt", request.precision)
    source = source_onnx(request)
    trt = require("tensorrt")
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network, _parser = parse_onnx(trt, builder, logger, source)
    if request.precision == "int8" and not has_qdq(trt, network):
        raise ConversionError(
            f"{source} has no QuantizeLinear/DequantizeLinear nodes; TensorRT int8 here is "
            "explicit quantisation only."
        )
    shapes = profile_shapes(network_inputs(network), request.batch_sizes)
    shared = shared_timing_cache()
    cached = shared.read_bytes() if shared.is_file() else b""
    config, cache = configure_builder(trt, builder, request.precision, shapes, cached)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ConversionError(f"TensorRT failed to build an engine from {source} (see its log).")
    (request.output_dir / PAYLOAD).write_bytes(bytes(plan))
    timing = bytes(cache.serialize())
    (request.output_dir / TIMING_CACHE).write_bytes(timing)
    _update_shared_cache(shared, timing)
    to_set, to_clear = precision_flags(request.precision)
    gpu = probe().best_gpu
    summary = {
        "tensorrt_version": str(trt.__version__),
        "layers": int(network.num_layers),
        "builder_flags_set": list(to_set),
        "builder_flags_cleared": list(to_clear),
        "explicit_quantization": request.precision == "int8",
        "profile": {name: [list(s) for s in shape] for name, shape in shapes.items()},
        "timing_cache_reused": bool(cached),
        "source_onnx": source.name,
    }
    return ConversionOutcome(PAYLOAD, summary, gpu.to_dict() if gpu else {})


def _update_shared_cache(path: Path, data: bytes) -> None:
    """Best effort: a cache we cannot write only makes the next build slower."""
    try:
        write_atomic(path, data)  # concurrent builds each rename a whole cache into place
    except OSError as exc:
        log.info("could not update the shared TensorRT timing cache %s (%s)", path, exc)


# --------------------------------------------------------------------------------------------
# Runtime


def cudart_module() -> Any:
    """cuda-python's runtime bindings: `cuda.bindings.runtime` (12.6+) or `cuda.cudart`."""
    try:
        return require("cuda.bindings.runtime")
    except MissingDependencyError:
        pass
    try:
        return require("cuda.cudart")
    except MissingDependencyError as exc:
        raise MissingDependencyError(
            f"cuda-python is not importable; fix: {TRT_FIX} (it installs cuda-python)."
        ) from exc


class _Cuda:
    """Error-checked cuda-python runtime calls (each returns (error, *results))."""

    def __init__(self, cudart: Any) -> None:
        self.rt = cudart

    def __call__(self, name: str, *args: Any) -> Any:
        error, *results = getattr(self.rt, name)(*args)
        if error != self.rt.cudaError_t.cudaSuccess:
            raise ConversionError(f"CUDA call {name} failed: {error}.")
        return results[0] if len(results) == 1 else tuple(results) or None


@dataclass
class _Binding:
    name: str
    dtype: np.dtype
    is_input: bool
    max_shape: tuple[int, ...]
    device: int = 0


class TrtRunner(Runner):
    """Runs a serialized TensorRT engine: device buffers allocated once, one CUDA stream.

    `infer` copies inputs to the device, sets the input shapes, enqueues `execute_async_v3`,
    copies outputs back and waits for the stream; `last_timings_ms` holds the H2D, compute and
    D2H times measured with CUDA events.
    """

    backend: ClassVar[str] = "trt"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._context: Any = None
        self._engine: Any = None
        self._bindings: dict[str, _Binding] = {}
        self._cuda: _Cuda | None = None
        self._stream: Any = None
        self._events: list[Any] = []
        self.last_timings_ms: dict[str, float] = {}

    def activate_impl(self) -> ModelSignature:
        check_supported("trt", _artifact_field(self.path, "precision") or "fp32")
        signature_data = _artifact_field(self.path, "signature")
        if not signature_data:
            raise InputError(f"{self.path}: no manifest.json with a signature beside the engine.")
        trt = require("tensorrt")
        self._cuda = _Cuda(cudart_module())
        logger = trt.Logger(trt.Logger.WARNING)
        self._engine = trt.Runtime(logger).deserialize_cuda_engine(self.path.read_bytes())
        if self._engine is None:
            raise InputError(
                f"{self.path} could not be deserialized: built for another TensorRT version or "
                "GPU; rebuild it with trtconv convert --backend trt."
            )
        self._context = self._engine.create_execution_context()
        self._stream = self._cuda("cudaStreamCreate")
        self._events = [self._cuda("cudaEventCreate") for _ in range(4)]
        names = [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]
        # Inputs first: an output's largest shape follows from the inputs' profile maxima.
        is_input = {n: self._engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        for name in sorted(names, key=lambda n: not is_input[n]):
            self._allocate(trt, name)
        return ModelSignature.from_dict(signature_data)

    def _allocate(self, trt: Any, name: str) -> None:
        assert self._cuda is not None
        is_input = self._engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
        dtype = np.dtype(trt.nptype(self._engine.get_tensor_dtype(name)))
        shape = tuple(self._engine.get_tensor_shape(name))
        if is_input and any(dim < 0 for dim in shape):
            shape = tuple(self._engine.get_tensor_profile_shape(name, 0)[2])  # profile max
        elif not is_input and any(dim < 0 for dim in shape):
            shape = self._max_output_shape(name)
        binding = _Binding(name, dtype, is_input, shape)
        binding.device = int(self._cuda("cudaMalloc", int(np.prod(shape)) * dtype.itemsize))
        self._context.set_tensor_address(name, binding.device)
        self._bindings[name] = binding

    def _max_output_shape(self, name: str) -> tuple[int, ...]:
        """An output's shape with every input at its profile maximum."""
        for index in range(self._engine.num_io_tensors):
            other = self._engine.get_tensor_name(index)
            if other in self._bindings and self._bindings[other].is_input:
                self._context.set_input_shape(other, self._bindings[other].max_shape)
        return tuple(self._context.get_tensor_shape(name))

    def infer_impl(self, feeds: Feeds) -> dict[str, np.ndarray]:
        assert self._cuda is not None
        cuda, rt = self._cuda, self._cuda.rt
        start, copied, computed, done = self._events
        cuda("cudaEventRecord", start, self._stream)
        keep = []  # host arrays must live until the copies complete
        for name, array in feeds.items():
            binding = self._bindings[name]
            host = np.ascontiguousarray(array, dtype=binding.dtype)
            keep.append(host)
            if not self._context.set_input_shape(name, host.shape):
                low, _, high = self._engine.get_tensor_profile_shape(name, 0)
                raise InputError(
                    f"{self.path}: input '{name}' of shape {list(host.shape)} lies outside the "
                    f"engine's profile {list(low)}..{list(high)}; rebuild with --batch-sizes."
                )
            kind = rt.cudaMemcpyKind.cudaMemcpyHostToDevice
            cuda(
                "cudaMemcpyAsync", binding.device, host.ctypes.data, host.nbytes, kind, self._stream
            )
        cuda("cudaEventRecord", copied, self._stream)
        if not self._context.execute_async_v3(int(self._stream)):
            raise ConversionError(f"TensorRT execution of {self.path} failed.")
        cuda("cudaEventRecord", computed, self._stream)
        outputs = {}
        for binding in self._bindings.values():
            if binding.is_input:
                continue
            host = np.empty(tuple(self._context.get_tensor_shape(binding.name)), binding.dtype)
            kind = rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
            cuda(
                "cudaMemcpyAsync", host.ctypes.data, binding.device, host.nbytes, kind, self._stream
            )
            outputs[binding.name] = host
        cuda("cudaEventRecord", done, self._stream)
        self.sync()
        self.last_timings_ms = {
            "h2d_ms": float(cuda("cudaEventElapsedTime", start, copied)),
            "compute_ms": float(cuda("cudaEventElapsedTime", copied, computed)),
            "d2h_ms": float(cuda("cudaEventElapsedTime", computed, done)),
        }
        del keep
        return outputs

    def sync(self) -> None:
        """Wait for everything enqueued on this runner's stream."""
        if self._cuda is not None and self._stream is not None:
            self._cuda("cudaStreamSynchronize", self._stream)

    def close(self) -> None:
        """Free the device buffers, events and stream."""
        if self._cuda is None:
            return
        for binding in self._bindings.values():
            self._cuda("cudaFree", binding.device)
        for event in self._events:
            self._cuda("cudaEventDestroy", event)
        self._cuda("cudaStreamDestroy", self._stream)
        self._bindings, self._events, self._cuda = {}, [], None


def _artifact_field(payload: Path, key: str) -> Any:
    """A field of the manifest beside the payload, or None."""
    try:
        return json.loads((Path(payload).parent / "manifest.json").read_text()).get(key)
    except (OSError, ValueError):
        return None
