"""The TensorRT >= 10 builder configuration for engines built from the validated ONNX export.

Written against the TensorRT 10 Python API (as used by Polygraphy's backend/trt and NVIDIA's
samples/python/common_runtime.py): networks are explicit-batch by default, INT8 is *explicit*
(the ONNX carries QuantizeLinear/DequantizeLinear nodes; no calibrator, which TensorRT 10
deprecated and 11 removed), TF32 is on by default and must be cleared for fp32.

The builder configuration (flags per precision, optimisation profile from batch sizes, timing
cache) lives in small functions that take the `tensorrt` module as an argument, so they can be
checked here with a recording stand-in; importing this module never imports tensorrt.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from trtconv.errors import ConversionError, InputError, UsageError

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
