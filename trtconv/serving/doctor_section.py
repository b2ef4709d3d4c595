"""Whether this machine can serve (`trtconv serve`): the doctor's `serving` section.

Decided without importing PyTriton (it starts slowly): its distribution's version, the C
library its bundled Triton server needs (glibc 2.35 or newer, Linux only), and NumPy's major:
the Python backend of that Triton (2.51) answers every request with empty outputs under NumPy 2
(measured: 0 bytes for a [2, 10] float32 output, NumPy 2.4.6), which is why PyTriton 0.7.0
requires NumPy < 2. NumPy 1.26 has wheels up to Python 3.12 only.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import ClassVar

from trtconv.facts.libraries import dist_version, version_tuple
from trtconv.protocol.doctor_section import DoctorSection, LibraryRow

MIN_GLIBC = (2, 35)
INSTALL_FIX = "pip install 'trtconv[serve]'"


def glibc_version() -> str | None:
    """'2.36' on a glibc Linux, else None."""
    try:
        found = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):
        return None
    return found.split()[-1] if found.startswith("glibc") else None


def serving_reason(pytriton: str | None, glibc: str | None, numpy: str | None) -> str:
    """Why `trtconv serve` cannot run here ("" when it can)."""
    if numpy is not None and version_tuple(numpy) >= (2,):
        return (
            f"PyTriton's Triton server (its Python backend) needs NumPy < 2, this environment "
            f"has NumPy {numpy}: serve from one with NumPy 1.26 (Python 3.10-3.12; "
            "docs/serving.md)"
        )
    if not sys.platform.startswith("linux") or glibc is None:
        return "PyTriton's Triton server runs on glibc Linux only"
    if version_tuple(glibc) < MIN_GLIBC:
        return f"PyTriton's Triton server needs glibc 2.35 or newer, this machine has {glibc}"
    if pytriton is None:
        return f"nvidia-pytriton is not installed: {INSTALL_FIX}"
    return ""


@dataclass(frozen=True)
class ServingSection(DoctorSection):
    """The doctor's `serving` block: PyTriton's, tritonclient's and LoadGen's versions, the
    glibc, whether `trtconv serve` can run here and why not, and its libraries table row."""

    KEY: ClassVar[str] = "serving"
    pytriton_version: str | None
    tritonclient_version: str | None
    loadgen_version: str | None
    glibc: str | None
    usable: bool
    reason: str  # "" when usable
    row: LibraryRow

    def library_rows(self) -> list[LibraryRow]:
        return [self.row]


def doctor_section() -> ServingSection:
    """The doctor's `serving` section for this machine."""
    pytriton = dist_version("nvidia-pytriton")
    glibc = glibc_version()
    reason = serving_reason(pytriton, glibc, dist_version("numpy"))
    client = dist_version("tritonclient")
    loadgen = dist_version("mlcommons-loadgen")
    details = (reason or "trtconv serve can run") + (
        f"; tritonclient {client}; MLPerf LoadGen {loadgen}"
    )
    row = LibraryRow(component="Serving (PyTriton)", version=pytriton, details=details)
    return ServingSection(pytriton, client, loadgen, glibc, not reason, reason, row)
