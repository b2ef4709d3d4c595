"""Building a TensorRT engine from ONNX, for TensorRT 10 and 11.

Written against the real bindings (NVIDIA/TensorRT `python/src/infer/pyCore.cpp`,
`parsers/pyOnnx.cpp` and `include/NvInfer.h` at release/10.16 and 11.1; the names each version
defines are recorded in `tests/helpers/standins/names/`):

- TensorRT 10 builds weakly typed networks with precision flags: fp16 sets BuilderFlag.FP16, int8
  sets INT8 *and* FP16 (layers TensorRT does not run in int8 may then use fp16 instead of
  staying fp32) on the explicit Q/DQ model.
- TensorRT 11 (what `pip install tensorrt` gives) builds strongly typed networks only: BuilderFlag
  has no FP16/INT8 at all, so the precision is in the ONNX: fp16 builds from an fp16 copy of the
  export (float32 inputs and outputs kept), int8 from the Q/DQ model, with no precision flag.
- Both: TF32 is on by default, so fp32 clears it and tf32 sets it; explicit batch is implied
  (`create_network(0)`); int8 is explicit Q/DQ only (no calibrator: deprecated in 10, gone in 11).
- Timing cache: `create_timing_cache` gives None for a cache it cannot read (another TensorRT
  version, a damaged file: the builder logs "The timing cache will not be used!") and
  `set_timing_cache(cache, ignore_mismatch=False)` returns False for one from another device
  (NvInfer.h, IBuilderConfig::setTimingCache). Either way the build starts from an empty cache and
  the summary says so; caches are kept per TensorRT version and GPU.

Functions take the `tensorrt` module as an argument: importing this module never imports it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtconv.core.errors import ConversionError, InputError, UsageError
from trtconv.core.results import JsonResult
from trtconv.facts import Gpu

PAYLOAD = "model.plan"
TIMING_CACHE = "timing.cache"
WORKSPACE_BYTES = 4 << 30
STRONGLY_TYPED_FROM = 11  # the first TensorRT major whose networks are always strongly typed
ProfileShapes = dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]


@dataclass(frozen=True)
class BuildPlan:
    """How one precision is built by one TensorRT major version.

    `source`: the ONNX to build from ("fp32" the export, "fp16" an fp16 copy of it, "qdq" the int8
    Q/DQ model); `set_flags`/`clear_flags`: BuilderFlag names; `strongly_typed`: the network's
    types come from the ONNX (TensorRT 11) rather than from precision flags.
    """

    precision: str
    source: str
    set_flags: tuple[str, ...]
    clear_flags: tuple[str, ...]
    strongly_typed: bool


# precision -> (source, flags to set, flags to clear), TensorRT 10 (weakly typed).
PLANS_10 = {
    "fp32": ("fp32", (), ("TF32",)),
    "tf32": ("fp32", ("TF32",), ()),
    "fp16": ("fp32", ("FP16",), ()),
    "int8": ("qdq", ("INT8", "FP16"), ()),
}
# TensorRT 11+ (strongly typed): no precision flag exists; the ONNX carries the types.
PLANS_11 = {
    "fp32": ("fp32", (), ("TF32",)),
    "tf32": ("fp32", ("TF32",), ()),
    "fp16": ("fp16", (), ()),
    "int8": ("qdq", (), ()),
}


def tensorrt_major(trt: Any) -> int:
    """The major version of the imported `tensorrt` module (0 when unreadable)."""
    found = re.match(r"\d+", str(getattr(trt, "__version__", "")))
    return int(found.group()) if found else 0


def build_plan(major: int, precision: str) -> BuildPlan:
    """The BuildPlan of `precision` on TensorRT `major`. Raises UsageError for an unknown one."""
    plans = PLANS_11 if major >= STRONGLY_TYPED_FROM else PLANS_10
    if precision not in plans:
        raise UsageError(f"Unknown precision '{precision}'; TensorRT takes {list(plans)}.")
    source, to_set, to_clear = plans[precision]
    return BuildPlan(precision, source, to_set, to_clear, major >= STRONGLY_TYPED_FROM)


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
    plan: BuildPlan,
    shapes: ProfileShapes,
    workspace_bytes: int = WORKSPACE_BYTES,
) -> Any:
    """Create and fill the IBuilderConfig: the plan's flags, one optimisation profile from
    `shapes`, a workspace limit. Raises ConversionError when TensorRT refuses the profile."""
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    for flag in plan.set_flags:
        config.set_flag(getattr(trt.BuilderFlag, flag))
    for flag in plan.clear_flags:
        config.clear_flag(getattr(trt.BuilderFlag, flag))
    profile = builder.create_optimization_profile()
    for name, (low, opt, high) in shapes.items():
        profile.set_shape(name, low, opt, high)
    if config.add_optimization_profile(profile) < 0:
        raise ConversionError(f"TensorRT refused the optimisation profile {shapes}.")
    return config


@dataclass(frozen=True)
class TimingCacheUse:
    """What became of a stored timing cache: reused, new (none stored), or rejected (why)."""

    path: Path
    status: str  # "reused" | "new" | "rejected"
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class EngineSummary(JsonResult):
    """What a TensorRT engine build did (the start of the conversion summary): the version, the
    network's layers, the plan's builder flags and source, the optimisation profile (per input:
    min, opt, max shapes), the batch range and the timing cache."""

    tensorrt_version: str
    layers: int
    builder_flags_set: list[str]
    builder_flags_cleared: list[str]
    strongly_typed: bool
    built_from: str
    explicit_quantization: bool
    profile: dict[str, list[list[int]]]
    batch_range: list[int]
    timing_cache: TimingCacheUse
    timing_cache_reused: bool


def attach_timing_cache(config: Any, path: Path) -> tuple[Any, TimingCacheUse]:
    """Give `config` the timing cache stored at `path` when TensorRT accepts it, else an empty one.

    Returns (the ITimingCache the build fills, what happened to the stored one). Never raises for
    a bad cache: a rejected cache only makes this build slower.
    """
    data = path.read_bytes() if path.is_file() else b""
    use = TimingCacheUse(path, "new")
    if data:
        cache = config.create_timing_cache(data)
        if cache is None:
            use = TimingCacheUse(path, "rejected", "not readable by this TensorRT version")
        elif not config.set_timing_cache(cache, False):  # False: refuse another device's cache
            use = TimingCacheUse(path, "rejected", "made on another GPU")
        else:
            return cache, TimingCacheUse(path, "reused")
    cache = config.create_timing_cache(b"")
    config.set_timing_cache(cache, False)
    return cache, use


def timing_cache_path(tensorrt_version: str, gpu: Gpu | None) -> Path:
    """Where the timing cache of this TensorRT version on this GPU model is kept.

    Under $TRTCONV_TRT_TIMING_CACHE_DIR (default ~/.cache/trtconv/trt-timing): one file per
    TensorRT version and GPU (name and compute capability), so a cache is only offered to the
    builds that can use it.
    """
    root = os.environ.get("TRTCONV_TRT_TIMING_CACHE_DIR")
    folder = Path(root) if root else Path.home() / ".cache" / "trtconv" / "trt-timing"
    device = "no-gpu"
    if gpu is not None:
        name = re.sub(r"[^A-Za-z0-9]+", "-", gpu.name).strip("-").lower()
        device = f"{name}-sm{gpu.compute_capability[0]}{gpu.compute_capability[1]}"
    return folder / f"tensorrt-{tensorrt_version}-{device}.cache"


def parse_onnx(trt: Any, builder: Any, logger: Any, path: Path) -> tuple[Any, Any]:
    """Parse an ONNX file into a new network; (network, parser).

    `create_network(0)`: explicit batch is the only mode from TensorRT 10, and TensorRT 11's
    networks are strongly typed whatever the flags say. The parser must outlive the network's use
    (it owns the weights), so it is returned too. Raises ConversionError with the parser's errors.
    """
    network = builder.create_network(0)
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
