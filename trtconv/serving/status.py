"""Whether this machine can serve (`trtconv serve`): the doctor's `serving` section.

Decided without importing PyTriton (it starts slowly): its distribution's version, and the C
library its bundled Triton server needs (glibc 2.35 or newer, Linux only).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from trtconv.facts.libraries import dist_version, version_tuple

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


def doctor_section() -> dict[str, Any]:
    """The doctor's `serving` block: versions, whether `serve` can run, and why not."""
    pytriton = dist_version("nvidia-pytriton")
    glibc = glibc_version()
    reason = serving_reason(pytriton, glibc)
    client = dist_version("tritonclient")
    loadgen = dist_version("mlcommons-loadgen")
    return {
        "serving": {
            "pytriton_version": pytriton,
            "tritonclient_version": client,
            "loadgen_version": loadgen,
            "glibc": glibc,
            "usable": not reason,
            "reason": reason,
            "row": {
                "component": "Serving (PyTriton)",
                "version": pytriton,
                "details": (reason or "trtconv serve can run")
                + f"; tritonclient {client}; MLPerf LoadGen {loadgen}",
            },
        }
    }
