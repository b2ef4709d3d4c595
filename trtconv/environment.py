"""Facts about this machine and its libraries, cheap to collect (no heavy imports)."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

LIBRARIES = (
    "trtconv",
    "tensorflow",
    "keras",
    "numpy",
    "onnx",
    "tf2onnx",
    "onnxruntime",
    "onnxruntime-gpu",
    "tensorrt",
)
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
    "f16c",
)


def library_versions() -> dict[str, str | None]:
    """Installed distribution versions, read from package metadata without importing."""
    versions: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cpu_info() -> dict[str, Any]:
    """CPU model, architecture, logical cores available to us, and the ISA features that matter."""
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
    return {
        "model": model,
        "arch": platform.machine(),
        "logical_cores": cores,
        "features": {name: name in flags for name in CPU_FEATURES},
    }


def cpu_has_bf16() -> bool:
    """True when the CPU computes bfloat16 natively (AVX512-BF16 or AMX)."""
    features = cpu_info()["features"]
    return bool(features["avx512_bf16"] or features["amx_bf16"])


def nvidia_gpus() -> list[dict[str, Any]]:
    """GPUs as nvidia-smi reports them (name, compute capability, memory, driver); [] if none."""
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
        return []
    gpus = []
    for line in completed.stdout.strip().splitlines():
        name, capability, memory_mb, driver = (part.strip() for part in line.split(","))
        gpus.append(
            {
                "name": name,
                "compute_capability": capability,
                "memory_mb": float(memory_mb),
                "driver": driver,
            }
        )
    return gpus


def git_commit(directory: Path | None = None) -> str | None:
    """The commit of the checkout trtconv runs from, or None outside a git checkout."""
    where = directory or Path(__file__).resolve().parent
    try:
        completed = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return completed.stdout.strip() or None


def environment_block() -> dict[str, Any]:
    """The `environment` block every result JSON carries."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_info(),
        "gpus": nvidia_gpus(),
        "libraries": library_versions(),
        "commit": git_commit(),
    }
