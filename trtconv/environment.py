"""The `environment` block every result JSON carries: this machine's facts and the commit."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trtconv.facts import probe_cpu, probe_gpus
from trtconv.facts.libraries import library_versions


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


def device_block() -> dict[str, Any]:
    """The CPU (model, cores, features) and GPUs of this machine, as JSON."""
    return {
        "cpu": cpu_info(),
        "gpus": [gpu.to_dict() for gpu in probe_gpus()],
    }


def environment_block(packages: Iterable[str] = ()) -> dict[str, Any]:
    """The `environment` block every result JSON carries; `packages` as for library_versions
    (the registry's `declared_packages()`)."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        **device_block(),
        "libraries": library_versions(packages),
        "commit": git_commit(),
    }
