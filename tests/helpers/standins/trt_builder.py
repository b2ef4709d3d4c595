"""The stand-in builder: optimization profiles, the timing cache, the builder config and the
build itself, which writes a plan (the ONNX model plus what the builder recorded).

- TensorRT 11 networks are always strongly typed (NetworkDefinitionCreationFlag docs), and a
  strongly typed network refuses precision flags;
- `set_timing_cache` returns False for a cache from another device and a cache from another
  version is not loaded (NvInfer.h IBuilderConfig::setTimingCache; the builder logs "The timing
  cache will not be used!");
- `Builder(logger)` raises pybind11's "factory function returned nullptr" TypeError when a
  TensorRT for CUDA 13 meets a driver older than R580 (`FakeGpu(driver_ok=False)`).
"""

from __future__ import annotations

import json
from typing import Any

from .trt_network import INetworkDefinition
from .trt_objects import CONTEXT, Context, Dims, IHostMemory, ILogger, Strict

PLAN_MAGIC = b"TRTCONV-STANDIN-PLAN\n"
CACHE_MAGIC = b"TRTCONV-STANDIN-TIMING-CACHE\n"
PRECISION_FLAGS = {"FP16", "INT8", "BF16", "FP8", "INT4", "FP4"}


class IOptimizationProfile(Strict):
    def __init__(self) -> None:
        self._shapes: dict[str, list[Dims]] = {}
        self._valid = True

    def set_shape(self, input: str, min: Any, opt: Any, max: Any) -> None:
        low, best, high = Dims(min), Dims(opt), Dims(max)
        ordered = len(low) == len(best) == len(high) and all(
            a <= b <= c for a, b, c in zip(low, best, high, strict=True)
        )
        if not ordered:
            self._valid = False  # the real call logs an error and leaves the profile invalid
        self._shapes[input] = [low, best, high]

    def get_shape(self, input: str) -> list[Dims]:
        return self._shapes.get(input, [])

    def __bool__(self) -> bool:
        return self._valid


class ITimingCache(Strict):
    def __init__(self, ctx: Context, header: dict[str, Any]) -> None:
        self._ctx, self._header = ctx, header

    def serialize(self) -> IHostMemory:
        return self._ctx.make("IHostMemory", CACHE_MAGIC + json.dumps(self._header).encode())

    def combine(self, input_cache: ITimingCache, ignore_mismatch: bool) -> bool:
        if input_cache._header["device"] != self._header["device"] and not ignore_mismatch:
            return False
        self._header["entries"] += input_cache._header["entries"]
        return True

    def reset(self) -> bool:
        self._header["entries"] = 0
        return True


class IBuilderConfig(Strict):
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._flags = {int(ctx.module.BuilderFlag.TF32)}  # TF32 is on by default
        self._pools: dict[int, int] = {}
        self._profiles: list[IOptimizationProfile] = []
        self._cache: ITimingCache | None = None

    def set_memory_pool_limit(self, pool: Any, pool_size: int) -> None:
        self._pools[int(pool)] = int(pool_size)

    def get_memory_pool_limit(self, pool: Any) -> int:
        return self._pools.get(int(pool), self._ctx.gpu.total_bytes)

    def set_flag(self, flag: Any) -> None:
        self._flags.add(int(flag))

    def clear_flag(self, flag: Any) -> None:
        self._flags.discard(int(flag))

    def get_flag(self, flag: Any) -> bool:
        return int(flag) in self._flags

    def add_optimization_profile(self, profile: IOptimizationProfile) -> int:
        if not profile:
            return -1
        self._profiles.append(profile)
        return len(self._profiles) - 1

    num_optimization_profiles = property(lambda self: len(self._profiles))

    def create_timing_cache(self, serialized_timing_cache: Any) -> ITimingCache | None:
        data = bytes(serialized_timing_cache)
        fresh = {"tensorrt": self._ctx.version, "device": self._ctx.device_key(), "entries": 0}
        if not data:
            return self._ctx.make("ITimingCache", self._ctx, fresh)
        if not data.startswith(CACHE_MAGIC):
            self._ctx.log("ERROR", "Serialization assertion magicTagRead == kMAGIC_TAG failed")
            return None
        header = json.loads(data[len(CACHE_MAGIC) :])
        if header["tensorrt"] != self._ctx.version:
            self._ctx.log("ERROR", "The timing cache will not be used! (version mismatch)")
            return None
        return self._ctx.make("ITimingCache", self._ctx, header)

    def set_timing_cache(self, cache: ITimingCache, ignore_mismatch: bool) -> bool:
        if cache._header["device"] != self._ctx.device_key() and not ignore_mismatch:
            self._ctx.log("ERROR", "The timing cache was created on a different device")
            return False
        self._cache = cache
        return True

    def get_timing_cache(self) -> ITimingCache | None:
        return self._cache


class Builder(Strict):
    def __init__(self, logger: ILogger) -> None:
        self._ctx: Context = CONTEXT[type(self)]
        if self._ctx.cuda_major >= 13 and not self._ctx.gpu.driver_ok:
            raise TypeError("pybind11::init(): factory function returned nullptr")

    def create_network(self, flags: int = 0) -> INetworkDefinition:
        known = {int(v) for v in self._ctx.module.NetworkDefinitionCreationFlag}
        if any(flags & (1 << bit) for bit in range(32) if bit not in known):
            raise ValueError(f"create_network: unknown NetworkDefinitionCreationFlag bits {flags}")
        return self._ctx.make("INetworkDefinition", self._ctx, int(flags))

    def create_builder_config(self) -> IBuilderConfig:
        return self._ctx.make("IBuilderConfig", self._ctx)

    def create_optimization_profile(self) -> IOptimizationProfile:
        return self._ctx.make("IOptimizationProfile")

    def build_serialized_network(
        self, network: INetworkDefinition, config: IBuilderConfig
    ) -> IHostMemory | None:
        problem = _build_problem(self._ctx, network, config)
        if problem:
            self._ctx.log("ERROR", problem)
            return None
        if config._cache is not None:
            config._cache._header["entries"] += network.num_layers
        module = self._ctx.module
        header = {
            "tensorrt": self._ctx.version,
            "device": self._ctx.device_key(),
            "strongly_typed": network._strongly_typed,
            "flags": sorted(f.name for f in module.BuilderFlag if int(f) in config._flags),
            "profiles": [
                {name: [list(d) for d in shapes] for name, shapes in p._shapes.items()}
                for p in config._profiles
            ],
            "device_memory": sum(config._pools.values()) // 1024,
        }
        encoded = json.dumps(header).encode()
        plan = PLAN_MAGIC + len(encoded).to_bytes(8, "little") + encoded + network._model
        return self._ctx.make("IHostMemory", plan)


def _build_problem(ctx: Context, network: INetworkDefinition, config: IBuilderConfig) -> str:
    """Why the real builder would fail for this network and config ('' when it would build)."""
    flags = {f.name for f in ctx.module.BuilderFlag if int(f) in config._flags}
    if network._strongly_typed and flags & PRECISION_FLAGS:
        return f"precision flags {sorted(flags & PRECISION_FLAGS)} on a strongly typed network"
    for tensor in network._inputs:
        if all(dim >= 0 for dim in tensor.shape):
            continue
        if not config._profiles or any(tensor.name not in p._shapes for p in config._profiles):
            return f"network input {tensor.name} has dynamic dimensions and no profile shape"
        for profile in config._profiles:
            for dims in profile._shapes[tensor.name]:
                fixed = [(a, b) for a, b in zip(tensor.shape, dims, strict=True) if a >= 0]
                if len(dims) != len(tensor.shape) or any(a != b for a, b in fixed):
                    return f"profile {list(dims)} does not fit input {tensor.name}"
    return ""
