"""Runs an OpenVINO IR on the CPU with a performance hint (OpenVINO's own tuning knob).

- LATENCY (default): one stream using every thread, one synchronous infer request per call.
- THROUGHPUT: OpenVINO splits the cores into streams and suggests as many requests
  (OPTIMAL_NUMBER_OF_INFER_REQUESTS). One `infer` call still takes and returns a whole batch: the
  batch is cut into that many slices along its first axis, each slice is started on its own
  request, and the call returns when every slice has finished. So the bench's per-call timing
  stays honest (a call's latency is the batch's, its throughput is batch / latency) and the
  outputs are the whole batch's; a batch smaller than the number of streams uses fewer streams.

The artifact's precision sets OpenVINO's inference precision: fp32 computes in f32 (OpenVINO's
default on CPUs with bf16 would be bf16), bf16 and fp16 in those types; int8 runs its quantised
operations in int8 and leaves the rest at OpenVINO's default for the CPU it runs on (bf16 where
the CPU has it, f32 elsewhere), unless the int8 ladder kept operations in float: then the
artifact pins f32 (NNCF's accuracy control judges reverted operations in f32, and bf16 is not
float enough for them). `OpenVinoRunner.runtime_properties()` says what the CPU computes it in.
Denormals are flushed to zero, as in the ONNX Runtime runner (random-weight models ran 2x slower
with them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trtconv.backends.openvino.ir import first_line
from trtconv.backends.openvino.rules import NATIVE_BF16
from trtconv.core.errors import InputError, UsageError
from trtconv.core.lazy import require
from trtconv.core.model_io import Feeds, ModelSignature, Outputs, TensorSpec, samples_in
from trtconv.core.precision import Precision
from trtconv.facts import probe_cpu
from trtconv.protocol.runner import Runner, RunOptions, check_device

if TYPE_CHECKING:
    from trtconv.artifact.manifest import Manifest

log = logging.getLogger(__name__)

DEVICE = "CPU"
LATENCY, THROUGHPUT = "latency", "throughput"
HINTS = (LATENCY, THROUGHPUT)
# trtconv precision -> OpenVINO's INFERENCE_PRECISION_HINT, pinned on every machine. An int8
# artifact records the precision of its float parts it was validated at (bf16 where made for a
# CPU that computes it natively, else f32: rules.int8_float_parts; a music tagger's int8 agreed
# 0.642 in bf16 and 0.545 in f32); one that records none runs them in f32.
INFERENCE_PRECISION = {"fp32": "f32", "bf16": "bf16", "fp16": "f16", "int8": "f32"}
# `compile_model`'s configuration: OpenVINO property names and their values.
CompileConfig = dict[str, str | bool | int]


@dataclass(frozen=True)
class RuntimeProperties:
    """What OpenVINO chose for a compiled model (its property values as OpenVINO spells them),
    the inference requests trtconv keeps and the performance hint it asked for."""

    inference_precision_hint: str
    num_streams: str
    inference_num_threads: str
    infer_requests: int
    performance_hint: str


class OpenVinoRunner(Runner):
    """Loads `model.xml` (+ `.bin`) and runs it on OpenVINO's CPU plugin, inputs fed by name."""

    def __init__(
        self,
        path: Path,
        precision: str = "fp32",
        hint: str = LATENCY,
        threads: int | None = None,
        inference_precision: str | None = None,
    ) -> None:
        super().__init__(path)
        if hint not in HINTS:
            raise UsageError(f"OpenVINO performance hint must be one of {', '.join(HINTS)}.")
        if precision not in INFERENCE_PRECISION:
            raise InputError(
                f"{path}: OpenVINO runs {', '.join(INFERENCE_PRECISION)}, not {precision}."
            )
        self.precision = precision
        self.hint = hint
        self.threads = threads
        # OpenVINO's inference precision when the artifact pins one (None: the precision's own).
        self.inference_precision = inference_precision
        self.compiled: Any = None
        self._requests: list[Any] = []

    def activate_impl(self) -> ModelSignature:
        ov = require("openvino")
        if not self.path.is_file():
            raise InputError(f"OpenVINO model {self.path} does not exist.")
        core = ov.Core()
        try:
            config = compile_config(
                self.precision, self.hint, self.threads, self.inference_precision
            )
            self.compiled = core.compile_model(str(self.path), DEVICE, config)
        except Exception as exc:
            raise InputError(f"OpenVINO could not load {self.path}: {first_line(exc)}") from exc
        count = 1
        if self.hint == THROUGHPUT:
            count = int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        self._requests = [self.compiled.create_infer_request() for _ in range(max(1, count))]
        return ModelSignature(
            inputs=tuple(_spec(port) for port in self.compiled.inputs),
            outputs=tuple(_spec(port) for port in self.compiled.outputs),
        )

    def runtime_properties(self) -> RuntimeProperties:
        """What OpenVINO chose for this compiled model: precision, streams, threads, requests."""
        read = self.compiled.get_property
        return RuntimeProperties(
            inference_precision_hint=_text(read("INFERENCE_PRECISION_HINT")),
            num_streams=_text(read("NUM_STREAMS")),
            inference_num_threads=_text(read("INFERENCE_NUM_THREADS")),
            infer_requests=len(self._requests),
            performance_hint=self.hint,
        )

    def deactivate_impl(self) -> None:
        self._requests, self.compiled = [], None

    def infer_impl(self, feeds: Feeds) -> Outputs:
        names = self.signature.output_names
        batch = samples_in(feeds)
        if len(self._requests) == 1 or batch < 2:
            results = self._requests[0].infer(feeds, share_inputs=True)
            return {name: np.array(results[name]) for name in names}
        return self._infer_split(feeds, batch, names)

    def _infer_split(self, feeds: Feeds, batch: int, names: list[str]) -> Outputs:
        """Start one slice of the batch per request, wait for all, join the outputs in order."""
        edges = np.linspace(0, batch, min(batch, len(self._requests)) + 1).astype(int)
        started = []
        for request, start, stop in zip(self._requests, edges[:-1], edges[1:], strict=False):
            part = {k: v[start:stop] if v.ndim else v for k, v in feeds.items()}  # 0-d: a flag
            request.start_async(part, share_inputs=True)
            started.append(request)
        for request in started:
            request.wait()
        return {
            name: np.concatenate([np.array(r.get_tensor(name).data) for r in started])
            for name in names
        }


def compile_config(
    precision: str,
    hint: str = LATENCY,
    threads: int | None = None,
    inference_precision: str | None = None,
) -> CompileConfig:
    """OpenVINO's `compile_model` configuration for a trtconv precision, hint and thread count;
    `inference_precision` (an OpenVINO type name) replaces the precision's own."""
    config: CompileConfig = {
        "PERFORMANCE_HINT": hint.upper(),
        "CPU_DENORMALS_OPTIMIZATION": True,
    }
    inference_precision = inference_precision or INFERENCE_PRECISION[precision]
    if inference_precision is not None:
        config["INFERENCE_PRECISION_HINT"] = inference_precision
    if threads is not None:
        config["INFERENCE_NUM_THREADS"] = threads
    return config


def _text(value: Any) -> str:
    """A property value as OpenVINO spells it ("bf16", not "<Type: 'bfloat16'>")."""
    to_string = getattr(value, "to_string", None)
    return str(to_string() if callable(to_string) else value)


def _spec(port: Any) -> TensorSpec:
    shape = tuple(d.get_length() if d.is_static else None for d in port.get_partial_shape())
    return TensorSpec(port.get_any_name(), shape, np.dtype(port.get_element_type().to_dtype()).name)


def openvino_runner(payload: Path, manifest: Manifest | None, options: RunOptions) -> Runner:
    """The runner factory: the artifact's precision; THROUGHPUT when the options ask for it.
    Raises UsageError for a device other than the CPU."""
    check_device("openvino", options.device, ("cpu",))
    precision = manifest.precision if manifest is not None else "fp32"
    hint = THROUGHPUT if options.throughput else LATENCY
    pinned = _pinned_precision(manifest)
    if pinned == Precision.BF16 and not probe_cpu().features & set(NATIVE_BF16):
        log.warning(
            "%s: its int8 float parts were validated in bf16, which this CPU does not compute "
            "natively: what runs here is not what was validated (validate it here, or convert "
            "with --int8-target portable for float parts in f32)",
            payload,
        )
    return OpenVinoRunner(payload, precision, hint, options.threads, pinned)


def _pinned_precision(manifest: Manifest | None) -> str | None:
    """The inference precision an int8 artifact's conversion recorded and was validated at (bf16
    or f32: rules.int8_float_parts), else None: the precision's own (INFERENCE_PRECISION; an
    artifact that recorded "plugin default" runs at f32 too)."""
    if manifest is None or manifest.precision != Precision.INT8:
        return None
    pinned = (manifest.conversion_summary or {}).get("inference_precision")
    return pinned if pinned in INFERENCE_PRECISION.values() else None
