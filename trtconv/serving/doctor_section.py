"""Whether this machine can serve (`trtconv serve`): the doctor's `serving` section.

Decided without importing PyTriton (it starts slowly): its distribution's version, and the C
library its bundled Triton server needs (glibc 2.35 or newer, Linux only).
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


def serving_reason(pytriton: str | None, glibc: str | None) -> str:
    """Why `trtconv serve` cannot run here ("" when it can)."""
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
    reason = serving_reason(pytriton, glibc)
    client = dist_version("tritonclient")
    loadgen = dist_version("mlcommons-loadgen")
    details = (reason or "trtconv serve can run") + (
        f"; tritonclient {client}; MLPerf LoadGen {loadgen}"
    )
    row = LibraryRow(component="Serving (PyTriton)", version=pytriton, details=details)
    return ServingSection(pytriton, client, loadgen, glibc, not reason, reason, row)
