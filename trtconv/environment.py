"""The `environment` block every result JSON carries: this machine's facts and the commit."""

from __future__ import annotations

import platform
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtconv.core.results import JsonResult
from trtconv.facts import probe_cpu, probe_gpus
from trtconv.facts.libraries import library_versions


@dataclass(frozen=True)
class CpuBlock:
    """The `cpu` of an environment block: model, architecture, logical cores, features."""

    model: str | None = None
    arch: str | None = None
    logical_cores: int | None = None
    features: dict[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class GpuBlock:
    """One of an environment block's `gpus` (compute capability as "8.6")."""

    name: str
    compute_capability: str | None = None
    memory_mb: float | None = None
    driver: str | None = None


@dataclass(frozen=True, kw_only=True)
class Environment(JsonResult):
    """An environment block read back (`Environment.from_json(result.environment)`): what
    renderers show of the machine a result was measured on. Every key may be absent or null: a
    block written by another trtconv may lack some."""

    python: str | None = None
    platform: str | None = None
    cpu: CpuBlock | None = None
    gpus: list[GpuBlock] | None = None
    libraries: dict[str, str | None] | None = None
    commit: str | None = None
    threads: int | None = None  # bench's blocks only

    @property
    def machine(self) -> str:
        """`2x NVIDIA L4` from the GPUs, else the CPU model."""
        gpus = Counter(gpu.name for gpu in self.gpus or [])
        if gpus:
            return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in gpus.items())
        return (self.cpu.model if self.cpu else None) or "unknown machine"


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


def cpu_info() -> dict[str, Any]:
    """This machine's CPU as JSON (facts.probe_cpu): model, arch, logical cores, features."""
    return probe_cpu().to_dict()


def environment_block(packages: Iterable[str] = ()) -> dict[str, Any]:
    """The `environment` block every result JSON carries; `packages` as for library_versions
    (the registry's `declared_packages()`)."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu_info(),
        "gpus": [gpu.to_dict() for gpu in probe_gpus()],
        "libraries": library_versions(packages),
        "commit": git_commit(),
    }
