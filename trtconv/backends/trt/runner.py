"""Runs a serialized TensorRT engine with cuda-python: device buffers once, one CUDA stream."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import trtconv.backends.trt.rules as rules
from trtconv.backends import registry
from trtconv.core.errors import ConversionError, InputError, MissingDependencyError
from trtconv.core.lazy import require
from trtconv.core.model_io import Feeds, ModelSignature
from trtconv.protocol.runner import CallTimings, Runner, RunOptions, check_device

if TYPE_CHECKING:
    from trtconv.artifact.manifest import Manifest


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
            f"cuda-python is not importable; fix: {rules.TRT_FIX} (it installs cuda-python)."
        ) from exc


OLD_DRIVER_FIX = "pip install 'trtconv[trt-cu12]' for CUDA 12, or update the driver"


def old_driver_error(what: str) -> MissingDependencyError:
    """The one sentence (exit 3) for a CUDA 13 library on a driver older than R580."""
    return MissingDependencyError(
        f"{what} failed: the NVIDIA driver is too old for CUDA 13 (cuda-python 13 and TensorRT "
        f"for CUDA 13 need driver R580+); fix: {OLD_DRIVER_FIX}."
    )


class _Cuda:
    """Error-checked cuda-python runtime calls (each returns (error, *results))."""

    def __init__(self, cudart: Any) -> None:
        self.rt = cudart

    def __call__(self, name: str, *args: Any) -> Any:
        error, *results = getattr(self.rt, name)(*args)
        if error != self.rt.cudaError_t.cudaSuccess:
            if error == self.rt.cudaError_t.cudaErrorInsufficientDriver:
                raise old_driver_error(f"CUDA call {name}")
            raise ConversionError(f"CUDA call {name} failed: {getattr(error, 'name', error)}.")
        return results[0] if len(results) == 1 else tuple(results) or None


def cuda_ready() -> _Cuda:
    """cuda-python's runtime, checked against the driver: `cudaGetDeviceCount` is the cheapest
    call that fails (cudaErrorInsufficientDriver) where cuda-python 13 meets a driver older
    than R580. Raises MissingDependencyError (exit 3) without cuda-python or with that driver."""
    cuda = _Cuda(cudart_module())
    cuda("cudaGetDeviceCount")
    return cuda


def create_builder(trt: Any, logger: Any) -> Any:
    """`trt.Builder(logger)`, with its failure said in one sentence.

    TensorRT's factory returns nullptr when it cannot use the GPU, which pybind11 reports as a
    TypeError ("factory function returned nullptr"): what TensorRT for CUDA 13 does on a driver
    older than R580 even where cuda-python 12 works. Raises MissingDependencyError (exit 3).
    """
    try:
        return trt.Builder(logger)
    except TypeError as exc:
        if "nullptr" not in str(exc):
            raise
        raise old_driver_error(f"TensorRT {trt.__version__} could not create a builder") from exc


def device_memory_bytes(engine: Any) -> int:
    """The device memory an engine's execution context needs: `device_memory_size_v2` from
    TensorRT 10.1 on; 10.0, which the `trt-cu12` extra allows, has only `device_memory_size`
    (11 removed that)."""
    size = getattr(engine, "device_memory_size_v2", None)
    return int(size if size is not None else getattr(engine, "device_memory_size", 0))


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
    copies outputs back and waits for the stream; `last_timings` holds the H2D, compute and D2H
    times measured with CUDA events. An engine does not keep the SavedModel's signature (names
    and dtypes, but not which dimension is the batch), so the manifest's is given.
    """

    def __init__(self, path: Path, signature: ModelSignature, precision: str = "fp32") -> None:
        super().__init__(path)
        self.model_signature = signature
        self.precision = precision
        self._context: Any = None
        self._engine: Any = None
        self._bindings: dict[str, _Binding] = {}
        self._cuda: _Cuda | None = None
        self._stream: Any = None
        self._events: list[Any] = []

    def activate_impl(self) -> ModelSignature:
        rules.runtime_support(registry.facts_here(), self.precision).require()
        trt = require("tensorrt")
        self._cuda = cuda_ready()
        logger = trt.Logger(trt.Logger.WARNING)
        self._engine = trt.Runtime(logger).deserialize_cuda_engine(self.path.read_bytes())
        if self._engine is None:
            raise InputError(
                f"{self.path} could not be deserialized: built for another TensorRT version or "
                "GPU; rebuild it with trtconv convert --backend trt."
            )
        self._context = self._engine.create_execution_context()
        if self._context is None:
            free, total = self._cuda("cudaMemGetInfo")
            raise ConversionError(
                f"TensorRT could not create an execution context for {self.path} (it needs "
                f"{device_memory_bytes(self._engine) / 2**20:.0f} MiB of GPU memory; "
                f"{free / 2**20:.0f} of {total / 2**20:.0f} MiB are free)."
            )
        self._stream = self._cuda("cudaStreamCreate")
        self._events = [self._cuda("cudaEventCreate") for _ in range(4)]
        names = [self._engine.get_tensor_name(i) for i in range(self._engine.num_io_tensors)]
        # Inputs first: an output's largest shape follows from the inputs' profile maxima.
        is_input = {n: self._engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT for n in names}
        for name in sorted(names, key=lambda n: not is_input[n]):
            self._allocate(trt, name)
        return self.model_signature

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
        self.last_timings = CallTimings(
            host_to_device_ms=float(cuda("cudaEventElapsedTime", start, copied)),
            compute_ms=float(cuda("cudaEventElapsedTime", copied, computed)),
            device_to_host_ms=float(cuda("cudaEventElapsedTime", computed, done)),
        )
        del keep
        return outputs

    def sync(self) -> None:
        """Wait for everything enqueued on this runner's stream."""
        if self._cuda is not None and self._stream is not None:
            self._cuda("cudaStreamSynchronize", self._stream)

    def deactivate_impl(self) -> None:
        """Free the device buffers, events and stream, then the context and engine."""
        if self._cuda is not None:
            for binding in self._bindings.values():
                self._cuda("cudaFree", binding.device)
            for event in self._events:
                self._cuda("cudaEventDestroy", event)
            self._cuda("cudaStreamDestroy", self._stream)
        self._bindings, self._events, self._cuda, self._stream = {}, [], None, None
        self._context, self._engine = None, None


def trt_runner(payload: Path, manifest: Manifest | None, options: RunOptions) -> Runner:
    """The runner factory: the engine with its manifest's signature and precision.

    Raises InputError without a manifest: an engine alone does not say which dimension is the
    batch or what the SavedModel called its tensors.
    """
    check_device("trt", options.device, ("tensorrt",))
    if manifest is None:
        raise InputError(f"{payload}: a TensorRT engine runs from its artifact (manifest.json).")
    runner = TrtRunner(payload, manifest.model_signature, manifest.precision)
    runner.device = "tensorrt"
    return runner
