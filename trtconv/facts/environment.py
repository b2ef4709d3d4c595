"""The `environment` block every result JSON carries: this machine's facts and the commit."""

from __future__ import annotations

import platform
import subprocess
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

from trtconv.core.results import JsonResult
from trtconv.facts import probe_cpu, probe_gpus
from trtconv.facts.hardware import CpuBlock, GpuBlock
from trtconv.facts.libraries import library_versions


@dataclass(frozen=True, kw_only=True)
class Environment(JsonResult):
    """The `environment` block every result JSON carries: Python, the platform, the CPU and
    GPUs, library versions and trtconv's commit. Read back from a result written by another
    trtconv, a key may be absent or null."""

    python: str | None = None
    platform: str | None = None
    cpu: CpuBlock | None = None
    gpus: list[GpuBlock] | None = None
    libraries: dict[str, str | None] | None = None
    commit: str | None = None

    @property
    def machine(self) -> str:
        """`2x NVIDIA L4` from the GPUs, else the CPU model."""
        gpus = Counter(gpu.name for gpu in self.gpus or [])
        if gpus:
            return ", ".join(f"{n}x {name}" if n > 1 else name for name, n in gpus.items())
        return (self.cpu.model if self.cpu else None) or "unknown machine"


@dataclass(frozen=True, kw_only=True)
class BenchEnvironment(Environment):
    """A bench result's environment: the machine's, and the threads the models ran with (None:
    each library's default)."""

    threads: int | None = None

    @classmethod
    def of(cls, environment: Environment, threads: int | None) -> BenchEnvironment:
        """`environment` with the bench's threads (every field of Environment carried over)."""
        machine = {field.name: getattr(environment, field.name) for field in fields(environment)}
        return cls(**machine, threads=threads)


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


def cpu_info() -> CpuBlock:
    """This machine's CPU (facts.probe_cpu) as result JSON records it: model, arch, logical
    cores, features. Callers read it through this module, so a test can describe another CPU by
    replacing it."""
    return probe_cpu().block()


def machine_environment(packages: Iterable[str] = ()) -> Environment:
    """This machine's environment; `packages` as for library_versions (the registry's
    `declared_packages()`)."""
    return Environment(
        python=platform.python_version(),
        platform=platform.platform(),
        cpu=probe_cpu().block(),
        gpus=[gpu.block() for gpu in probe_gpus()],
        libraries=library_versions(packages),
        commit=git_commit(),
    )
