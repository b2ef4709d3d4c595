"""TF-TRT: `TrtGraphConverterV2` turns TensorRT-compatible subgraphs into TRTEngineOps.

Written against TensorFlow 2.17's `tensorflow/python/compiler/tensorrt/trt_convert.py`:

- precision: `TrtConversionParams.precision_mode` is FP32, FP16 or INT8. TF32 is not a mode: the
  TRT builder sets `BuilderFlag::kTF32` exactly when `tensor_float_32_execution_enabled()` (TF's
  convert_nodes.cc), so `fp32` disables TF32 in TensorFlow and `tf32` enables it.
- TensorRT: the major TensorFlow was built with (8: `_check_trt_version_compatibility` refuses
  any other, see rules.py), so TensorRT 8.6.1+ 8.x.
- INT8 uses calibration (`use_calibration=True`, implicit INT8): `convert()` takes a
  `calibration_input_fn` whose items `_convert_to_tensor` turns into *positional* arguments of the
  converted function, so we yield tuples in the frozen function's input order.
- dynamic shapes (`use_dynamic_shape=True`) with one optimisation profile per declared batch
  size plus the range between them; `build()` runs each batch size once so the engines are built
  before `save()` and nothing is rebuilt when the artifact is loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import trtconv.backends.tftrt.rules as rules
from trtconv.backends import registry
from trtconv.core.errors import ConversionError, InputError, MissingDependencyError, UsageError
from trtconv.core.lazy import require
from trtconv.core.model_io import CalibrationFeed, Feeds, ModelSignature, dtype_fits
from trtconv.core.precision import Precision
from trtconv.core.results import JsonResult, optional_key
from trtconv.core.tf32 import tf32_policy
from trtconv.protocol.request import ConversionOutcome, ConversionRequest

log = logging.getLogger(__name__)

PAYLOAD = "saved_model"
PRECISION_MODES = {"fp32": "FP32", "tf32": "FP32", "fp16": "FP16", "int8": "INT8"}
# One profile per declared batch size (fastest there) plus one spanning min..max (anything in
# between still runs in TensorRT).
PROFILE_STRATEGY = "Range+Optimal"
MINIMUM_SEGMENT_SIZE = 3
TRT_ENGINE_OP = "TRTEngineOp"
NOT_BUILT_WITH_TRT = "not been built with TensorRT support"
INCOMPATIBLE_TRT = "Incompatible"  # "Incompatible TensorRT major version" / "... linked ..."

InputFn = Callable[[], Iterator[tuple[Any, ...]]]


def trt_convert_module() -> Any:
    """TensorFlow's trt_convert. Importing it is safe: it asks `is_tensorrt_enabled()` first."""
    require("tensorflow")
    from tensorflow.python.compiler.tensorrt import trt_convert

    return trt_convert


def tf_errors() -> Any:
    """`tf.errors` (OpError and friends), imported late."""
    return require("tensorflow").errors


def conversion_params(
    precision: str,
    *,
    minimum_segment_size: int = MINIMUM_SEGMENT_SIZE,
    max_workspace_size_bytes: int | None = None,
    maximum_cached_engines: int = 1,
    allow_build_at_runtime: bool = False,
) -> Any:
    """The real `TrtConversionParams` for a trtconv precision.

    fp32 and tf32 both map to FP32 (TF32 is TensorFlow's switch: trtconv.core.tf32); int8 sets
    `use_calibration`.
    `allow_build_at_runtime=False` by default: engines are prebuilt by `build()`, and a shape
    outside the profiles then runs the native TensorFlow segment instead of stalling on a build.
    Raises UsageError for an unknown precision.
    """
    if precision not in PRECISION_MODES:
        raise UsageError(
            f"Unknown precision '{precision}'; TF-TRT takes {', '.join(PRECISION_MODES)}."
        )
    trt_convert = trt_convert_module()
    options: dict[str, Any] = {
        "precision_mode": getattr(trt_convert.TrtPrecisionMode, PRECISION_MODES[precision]),
        "minimum_segment_size": minimum_segment_size,
        "maximum_cached_engines": maximum_cached_engines,
        "use_calibration": precision == Precision.INT8,
        "allow_build_at_runtime": allow_build_at_runtime,
    }
    if max_workspace_size_bytes is not None:
        options["max_workspace_size_bytes"] = max_workspace_size_bytes
    return trt_convert.TrtConversionParams(**options)


def input_order(signature: ModelSignature) -> list[str]:
    """The converted function's positional input order.

    A serving signature takes keyword arguments; tracing flattens them with `nest.flatten`, which
    sorts dict keys, and the frozen function's placeholders follow that order.
    """
    return sorted(signature.input_names)


def as_positional(feeds: Feeds, signature: ModelSignature) -> tuple[Any, ...]:
    """One feed dict as the tuple of tf tensors TF-TRT passes positionally to the function.

    Raises InputError when a name is missing or a dtype differs from the signature.
    """
    tf = require("tensorflow")
    specs = {spec.name: spec for spec in signature.inputs}
    tensors = []
    for name in input_order(signature):
        if name not in feeds:
            raise InputError(f"Calibration batch lacks input '{name}' (has {sorted(feeds)}).")
        array = np.asarray(feeds[name])
        if not dtype_fits(array, specs[name].dtype):
            raise InputError(
                f"Calibration input '{name}' has dtype {array.dtype.name}; the model expects "
                f"{specs[name].dtype}."
            )
        tensors.append(tf.constant(array))
    return tuple(tensors)


def calibration_input_fn(
    calibration: CalibrationFeed, signature: ModelSignature, batch_size: int, min_batch: int = 1
) -> InputFn:
    """A generator function for `converter.convert(calibration_input_fn=...)`.

    TF-TRT needs every calibration batch to have the same shape, and that shape must lie inside
    the engines' optimisation profiles, so the reader's batches are re-cut into `batch_size`
    (the largest declared batch size) and a short remainder is dropped. With fewer samples than
    `batch_size` the one short batch is used when it still fits the profiles (at least
    `min_batch` rows): TF-TRT would otherwise calibrate on nothing and only warn. Raises
    UsageError (while iterating) when there are fewer than `min_batch` samples.
    """

    def generate() -> Iterator[tuple[Any, ...]]:
        pending: list[Feeds] = []
        rows = yielded = 0
        for feeds in calibration():
            pending.append(feeds)
            rows += len(next(iter(feeds.values())))
            while rows >= batch_size:
                joined = _joined(pending)
                yield as_positional({k: v[:batch_size] for k, v in joined.items()}, signature)
                yielded += 1
                rest = {k: v[batch_size:] for k, v in joined.items()}
                rows -= batch_size
                pending = [rest] if rows else []
        if yielded == 0:
            if rows < max(min_batch, 1):
                raise UsageError(
                    f"TF-TRT int8 calibration needs at least {max(min_batch, 1)} samples (the "
                    f"smallest batch size); the calibration data holds {rows}."
                )
            log.warning(
                "TF-TRT calibration: %d samples, fewer than the largest batch size %d: "
                "calibrating on one batch of %d",
                rows,
                batch_size,
                rows,
            )
            yield as_positional(_joined(pending), signature)
        elif rows:
            log.info(
                "TF-TRT calibration: dropping the last %d samples (batches of %d)", rows, batch_size
            )

    return generate


def _joined(pending: list[Feeds]) -> Feeds:
    """The pending feed batches concatenated per input."""
    return {name: np.concatenate([f[name] for f in pending]) for name in pending[0]}


def build_feeds(
    signature: ModelSignature, batch_sizes: tuple[int, ...], sample: Feeds | None = None
) -> list[Feeds]:
    """One feed per batch size for `converter.build()`: real samples when given, else zeros.

    Only shapes matter to the engine build. Raises InputError when a non-batch dimension is
    dynamic and no sample gives its size.
    """
    feeds = []
    for batch in sorted(set(batch_sizes)):
        feed: Feeds = {}
        for spec in signature.inputs:
            if sample is not None and spec.name in sample:
                rows = np.asarray(sample[spec.name])
                repeats = -(-batch // len(rows))  # ceil
                feed[spec.name] = np.concatenate([rows] * repeats)[:batch]
                continue
            if spec.is_string or any(dim is None for dim in spec.shape[1:]):
                raise InputError(
                    f"Input '{spec.name}' ({spec.describe()}) is a string or has dynamic "
                    "dimensions: TF-TRT builds its engines on real samples; give data "
                    "(--calib-data) or a fixed shape."
                )
            shape = (batch, *(int(dim) for dim in spec.shape[1:] if dim is not None))
            feed[spec.name] = np.zeros(shape, dtype=spec.dtype)
        feeds.append(feed)
    return feeds


@dataclass(kw_only=True)
class Segments(JsonResult):
    """What TF-TRT put into TensorRT: the TRTEngineOps, the ops they hold against all ops, and
    (after save) how many engines were built and which failed (those run TensorFlow's native
    segment). `to_json()` is the head of the TF-TRT conversion summary."""

    trt_engine_ops: int
    ops_converted: int
    ops_total: int
    percent_ops_converted: float
    engines_built: int | None = optional_key()
    engines_failed: list[str] | None = optional_key()


def summarize_graph(graph_def: Any, built: set[str] | None = None) -> Segments:
    """TRTEngineOp count and % of ops converted, counted as TrtGraphConverterV2.summary() does.

    Ops inside an engine are the nodes of its `<name>_native_segment` library function; ops not
    converted are the top-level nodes that are not TRTEngineOps. `built` (engine names that
    `save()` wrote an engine for, see `engines_written`) counts a TRTEngineOp whose engine failed
    to build as not converted: TF-TRT then runs its native segment and only logs a warning.
    """
    segments = {f.signature.name: len(f.node_def) for f in graph_def.library.function}
    engines = [node.name for node in graph_def.node if node.op == TRT_ENGINE_OP]
    failed = [name for name in engines if built is not None and engine_name(name) not in built]
    native = sum(1 for node in graph_def.node if node.op != TRT_ENGINE_OP)
    native += sum(segments.get(f"{name}_native_segment", 0) for name in failed)
    converted = sum(
        segments.get(f"{name}_native_segment", 0) for name in engines if name not in failed
    )
    total = converted + native
    return Segments(
        trt_engine_ops=len(engines),
        ops_converted=converted,
        ops_total=total,
        percent_ops_converted=round(100.0 * converted / total, 2) if total else 0.0,
        engines_built=None if built is None else len(engines) - len(failed),
        engines_failed=None if built is None else [engine_name(name) for name in failed],
    )


def engine_name(node_name: str) -> str:
    """TF-TRT's canonical engine name for a TRTEngineOp node (the last part of its name)."""
    return node_name.split("/")[-1]


def engines_written(saved_model: Path) -> set[str]:
    """Engine names `save()` serialized into `saved_model/assets` (a non-empty file each).

    TF-TRT writes `trt-serialized-engine.<name>` per TRTEngineOp; an engine whose build failed
    leaves no engine in its cache, so no record in the file.
    """
    prefix = "trt-serialized-engine."
    return {
        path.name.removeprefix(prefix)
        for path in (Path(saved_model) / "assets").glob(f"{prefix}*")
        if path.stat().st_size > 0
    }


def convert(request: ConversionRequest) -> ConversionOutcome:
    """Convert `request.saved_model` with TF-TRT into `request.output_dir/saved_model`.

    TF32 is allowed exactly when the precision is not fp32, for this conversion only (TF-TRT's
    builder follows TensorFlow's switch; it is restored afterwards). Raises
    MissingDependencyError (exit 3) when TensorFlow cannot use TensorRT or sees no GPU,
    UsageError when int8 has no calibration data, ConversionError when TF-TRT fails.
    """
    rules.support(registry.facts_here(), request.precision).require()
    if request.precision == Precision.INT8 and request.calibration is None:
        raise UsageError("TF-TRT int8 needs calibration data (--calib-data).")
    with tf32_policy(request.precision != Precision.FP32):
        summary = _convert_build_save(request).to_json()
    facts = registry.facts_here()
    summary.update(
        precision_mode=PRECISION_MODES[request.precision],
        tf32_allowed=request.precision != Precision.FP32,
        batch_sizes=sorted(set(request.batch_sizes)),
        batch_range=[min(request.batch_sizes), max(request.batch_sizes)],
        profile_strategy=PROFILE_STRATEGY,
        tensorrt_version=rules.loaded_tensorrt(facts),
    )
    gpu = facts.best_gpu
    device = gpu.to_dict() if gpu else {}
    return ConversionOutcome(payload=PAYLOAD, summary=summary, device=device)


def _convert_build_save(request: ConversionRequest) -> Segments:
    """TF-TRT's convert(), build() and save(); returns the graph summary of what was built."""
    converter = make_converter(request)
    calibrate = (
        calibration_input_fn(
            request.calibration,
            request.signature,
            max(request.batch_sizes),
            min(request.batch_sizes),
        )
        if request.precision == Precision.INT8 and request.calibration is not None
        else None
    )
    try:
        converted = converter.convert(calibration_input_fn=calibrate)
    except ValueError as exc:
        if "not a GPU" in str(exc):
            raise MissingDependencyError(
                f"TensorFlow placed the conversion on a CPU ({exc}): it sees no GPU; fix: "
                f"{rules.fix(registry.facts_here())}."
            ) from exc
        raise ConversionError(f"TF-TRT could not convert {request.saved_model}: {exc}") from exc
    _warn_if_nothing_converted(summarize_graph(converted.graph.as_graph_def()), request)
    sample = next(iter(request.calibration()), None) if request.calibration else request.sample
    feeds = build_feeds(request.signature, request.batch_sizes, sample)
    try:
        # INT8 calibration runs here too: with dynamic shapes TF-TRT defers it to build().
        converter.build(input_fn=lambda: (as_positional(f, request.signature) for f in feeds))
        converter.save(str(request.output_dir / PAYLOAD))
    except (RuntimeError, ValueError, tf_errors().OpError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConversionError(
            f"TF-TRT could not build or save engines for {request.saved_model}: {first[:300]}"
        ) from exc
    built = engines_written(request.output_dir / PAYLOAD)
    summary = summarize_graph(converted.graph.as_graph_def(), built)
    _warn_if_engines_failed(summary, request)
    return summary


def make_converter(request: ConversionRequest, **params: Any) -> Any:
    """A `TrtGraphConverterV2` for the request, with "not built with TensorRT" explained."""
    trt_convert = trt_convert_module()
    try:
        return trt_convert.TrtGraphConverterV2(
            input_saved_model_dir=str(request.saved_model),
            input_saved_model_signature_key=request.signature.name,
            use_dynamic_shape=True,
            dynamic_shape_profile_strategy=PROFILE_STRATEGY,
            conversion_params=conversion_params(request.precision, **params),
        )
    except RuntimeError as exc:
        if NOT_BUILT_WITH_TRT not in str(exc) and INCOMPATIBLE_TRT not in str(exc):
            raise ConversionError(f"TF-TRT could not start: {exc}") from exc
        # TensorFlow says "not built with TensorRT support" even when only libnvinfer is
        # missing, and "Incompatible TensorRT major version" without the versions; the probe
        # names the real cause.
        facts = registry.facts_here()
        cause = rules.status(facts)[1]
        if INCOMPATIBLE_TRT in str(exc):
            cause = f"{exc} ({cause})"
        raise MissingDependencyError(
            f"TF-TRT cannot run: {cause}; fix: {rules.fix(facts)}."
        ) from exc


def _warn_if_engines_failed(summary: Segments, request: ConversionRequest) -> None:
    failed = summary.engines_failed or []
    if failed:
        log.warning(
            "TF-TRT built %d of %d engine(s) for %s; %s fell back to TensorFlow (their build "
            "failed: TF_CPP_MIN_LOG_LEVEL=0 shows why): %.1f%% of ops run in TensorRT",
            summary.engines_built,
            summary.trt_engine_ops,
            request.saved_model,
            ", ".join(failed),
            summary.percent_ops_converted,
        )


def _warn_if_nothing_converted(summary: Segments, request: ConversionRequest) -> None:
    if summary.trt_engine_ops == 0:
        log.warning(
            "TF-TRT converted NOTHING in %s: no TRTEngineOp was created, the artifact is plain "
            "TensorFlow and will not be faster (unsupported ops or segments smaller than %d)",
            request.saved_model,
            MINIMUM_SEGMENT_SIZE,
        )
    else:
        log.info(
            "TF-TRT: %d engine(s), %.1f%% of ops converted",
            summary.trt_engine_ops,
            summary.percent_ops_converted,
        )
