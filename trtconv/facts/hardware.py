"""The devices: the CPU (model, cores, instruction-set features) and NVIDIA GPUs (nvidia-smi)."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# The CPU features that decide kernels and precisions (AVX-512 and VNNI int8, BF16/AMX training).
CPU_FEATURES = (
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
    "f16c",
)
# Lowest compute capability with fast math per precision (tf32: Ampere tensor cores; fp16: fast
# half-precision arithmetic; int8: DP4A). None: any supported GPU.
MIN_COMPUTE_CAPABILITY: dict[str, tuple[int, int] | None] = {
    "fp32": None,
    "tf32": (8, 0),
    "fp16": (5, 3),
    "int8": (6, 1),
    "bf16": (8, 0),  # bfloat16 tensor cores: Ampere and later
}


@dataclass(frozen=True)
class CpuBlock:
    """A CPU as result JSON records it (an environment block's `cpu`): model, architecture,
    logical cores, and every feature of note with whether it is present. None: not recorded
    (a block written by another trtconv)."""

    model: str | None = None
    arch: str | None = None
    logical_cores: int | None = None
    features: dict[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuBlock:
    """A GPU as result JSON records it: name, compute capability ("8.6"), memory, driver and
    which reduced precisions run fast on it. None: not recorded."""

    name: str
    compute_capability: str | None = None
    memory_mb: float | None = None
    driver: str | None = None
    tf32: bool | None = None
    fp16: bool | None = None
    int8: bool | None = None


@dataclass(frozen=True)
class Cpu:
    """The CPU: model name, architecture (platform.machine()), logical cores this process may
    use, and the features of note it has."""

    model: str
    arch: str
    logical_cores: int
    features: frozenset[str]

    @property
    def has_bf16(self) -> bool:
        """True when the CPU computes bfloat16 natively (AVX512-BF16 or AMX)."""
        return bool(self.features & {"avx512_bf16", "amx_bf16"})

    def block(self) -> CpuBlock:
        """This CPU as result JSON records it."""
        features = {name: name in self.features for name in CPU_FEATURES}
        return CpuBlock(self.model, self.arch, self.logical_cores, features)


@dataclass(frozen=True)
class Gpu:
    """One NVIDIA GPU as nvidia-smi reports it."""

    name: str
    compute_capability: tuple[int, int]
    memory_mb: float = 0.0
    driver: str = ""

    @property
    def capability(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"

    def supports(self, precision: str) -> bool:
        """True when this GPU's compute capability is high enough for `precision`."""
        need = MIN_COMPUTE_CAPABILITY[precision]
        return need is None or self.compute_capability >= need

    def block(self) -> GpuBlock:
        """This GPU as result JSON records it."""
        return GpuBlock(
            name=self.name,
            compute_capability=self.capability,
            memory_mb=self.memory_mb,
            driver=self.driver,
            tf32=self.supports("tf32"),
            fp16=self.supports("fp16"),
            int8=self.supports("int8"),
        )

    def to_dict(self) -> dict[str, Any]:
        """name, compute capability, memory, driver and which reduced precisions run fast."""
        return asdict(self.block())


def cpu_from_flags(model: str, arch: str, cores: int, flags: Iterable[str]) -> Cpu:
    """A Cpu keeping only the features of note among `flags` (/proc/cpuinfo names)."""
    return Cpu(model, arch, cores, frozenset(set(flags) & set(CPU_FEATURES)))


@functools.cache
def probe_cpu() -> Cpu:
    """This machine's CPU, read once from /proc/cpuinfo (the platform's name elsewhere)."""
    model = platform.processor() or platform.machine()
    flags: set[str] = set()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cpu_from_flags(model, platform.machine(), cores or 1, flags)


@functools.cache
def probe_gpus() -> tuple[Gpu, ...]:
    """The NVIDIA GPUs nvidia-smi lists, asked once; () without a driver or a GPU."""
    query = "name,compute_cap,memory.total,driver_version"
    try:
        completed = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(_gpu(line) for line in completed.stdout.strip().splitlines() if line.strip())


def _gpu(line: str) -> Gpu:
    name, capability, memory_mb, driver = (part.strip() for part in line.split(","))
    major, _, minor = capability.partition(".")
    try:
        compute_capability = (int(major), int(minor or 0))
    except ValueError:
        compute_capability = (0, 0)
    try:
        memory = float(memory_mb)
    except ValueError:
        memory = 0.0
    return Gpu(name, compute_capability, memory, driver)
