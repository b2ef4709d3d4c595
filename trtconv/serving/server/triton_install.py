"""Where the Triton server `serve` starts comes from, and the one step that installs it.

PyPI's only Triton server binary is in PyPI's `nvidia-pytriton` 0.7.0 wheel: Triton 2.51, its
Python backend, and a backend stub per Python from 3.8 to 3.13 (the 3.13 one with its own
libpython). trtconv runs the binary itself and imports nothing of PyTriton, so it needs none of
PyTriton's declared dependencies, one of which (`numpy<2`) would downgrade an environment with
TensorFlow 2.18+ and make the wheel uninstallable on Python 3.13 (NumPy 1 has no 3.13 wheels).
So the wheel is installed without them: `pip install --no-deps nvidia-pytriton==0.7.0`
(`make install` does it), which changes nothing else in the environment. The wheel is found
here without importing it (its `__init__` imports those dependencies).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from trtconv.core.errors import MissingDependencyError
from trtconv.facts.libraries import dist_version, version_tuple

TRITON_WHEEL = "nvidia-pytriton==0.7.0"  # the Makefile installs the same (tests/test_packaging.py)
TRITON_STEP = f"pip install --no-deps {TRITON_WHEEL}"
SERVE_EXTRA_STEP = "pip install 'trtconv[serve]'"  # tritonclient and MLPerf's LoadGen
MIN_GLIBC = (2, 35)  # the wheel's manylinux_2_35 tag


@dataclass(frozen=True)
class Binaries:
    """Triton as the wheel lays it out: the server, its Python backend, the stub for this
    interpreter and the libraries they load."""

    server: Path
    python_backend: Path
    stub: Path
    libraries: Path


def python_version() -> str:
    """'3.11': the version a backend stub is built for."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def wheel_root() -> Path | None:
    """The installed `pytriton` package's folder, found without importing it; None without it."""
    try:
        spec = importlib.util.find_spec("pytriton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def located(root: Path) -> Binaries:
    """Triton's files in the wheel installed at `root` (they may be missing)."""
    triton = root / "tritonserver"
    beside = root.parent / "nvidia_pytriton.libs"  # where the wheel puts its libraries
    return Binaries(
        server=triton / "bin" / "tritonserver",
        python_backend=triton / "backends" / "python",
        stub=triton / "python_backend_stubs" / python_version() / "triton_python_backend_stub",
        libraries=beside if beside.is_dir() else triton / "external_libs",  # an editable install
    )


def glibc_version() -> str | None:
    """'2.36' on a glibc Linux, else None."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return None
    return found.split()[-1] if found.startswith("glibc") else None


def triton_reason(glibc: str | None, root: Path | None, client: str | None) -> str:
    """Why `serve` cannot start Triton here ("" when it can): the platform, the wheel, its stub
    for this Python, the client."""
    if not sys.platform.startswith("linux") or glibc is None:
        return "Triton's server (from the nvidia-pytriton wheel) runs on glibc Linux only"
    if version_tuple(glibc) < MIN_GLIBC:
        return f"Triton's server needs glibc 2.35 or newer, this machine has {glibc}"
    if root is None:
        return (
            f"Triton's server is not installed: {TRITON_STEP} (the wheel that carries Triton "
            "2.51; --no-deps leaves this environment's NumPy and TensorFlow as they are)"
        )
    found = located(root)
    if not found.server.is_file():
        return f"the nvidia-pytriton at {root} holds no Triton server: {TRITON_STEP}"
    if not found.stub.is_file():
        return f"the nvidia-pytriton at {root} carries no Python-backend stub for Python " + (
            f"{python_version()} (it has 3.8-3.13)"
        )
    if client is None:
        return f"tritonclient is not installed: {SERVE_EXTRA_STEP}"
    return ""


def serving_reason() -> str:
    """Why `serve` cannot run here ("" when it can)."""
    return triton_reason(glibc_version(), wheel_root(), dist_version("tritonclient"))


def binaries() -> Binaries:
    """Where the installed wheel keeps Triton. Raises MissingDependencyError (exit 3) saying
    the step that installs it when it cannot run here."""
    reason = serving_reason()
    root = wheel_root()
    if reason or root is None:
        raise MissingDependencyError(f"trtconv serve cannot run here: {reason}.")
    return located(root)
