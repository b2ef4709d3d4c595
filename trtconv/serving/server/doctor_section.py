"""Whether this machine can serve (`trtconv serve`): the doctor's `serving` section.

Decided without importing PyTriton (its package imports dependencies trtconv does not install):
the wheel that carries Triton's server, found on disk (triton_install.py), the C library
that server needs, the client, and NumPy's major: the server's Python backend destroys string
tensors under NumPy 2 (numbers cross by DLPack, exact under both majors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trtconv.facts.libraries import dist_version, version_tuple
from trtconv.protocol.doctor_section import DoctorSection, LibraryRow
from trtconv.serving.server.triton_install import glibc_version, serving_reason


@dataclass(frozen=True)
class ServingSection(DoctorSection):
    """The doctor's `serving` block: PyTriton's (the wheel carrying Triton), tritonclient's and
    LoadGen's versions, the glibc, whether `trtconv serve` can run here and why not, whether it
    serves string tensors here, and its libraries table row."""

    KEY: ClassVar[str] = "serving"
    pytriton_version: str | None
    tritonclient_version: str | None
    loadgen_version: str | None
    glibc: str | None
    usable: bool
    reason: str  # "" when usable
    string_tensors: bool  # False under NumPy 2
    row: LibraryRow

    def library_rows(self) -> list[LibraryRow]:
        return [self.row]


def doctor_section() -> ServingSection:
    """The doctor's `serving` section for this machine."""
    pytriton = dist_version("nvidia-pytriton")
    reason = serving_reason()
    client = dist_version("tritonclient")
    loadgen = dist_version("mlcommons-loadgen")
    numpy = dist_version("numpy")
    strings = numpy is None or version_tuple(numpy) < (2,)
    details = (reason or "trtconv serve can run") + (
        f"; tritonclient {client}; MLPerf LoadGen {loadgen}"
        + ("" if strings else f"; no string tensors under NumPy {numpy}")
    )
    row = LibraryRow(component="Serving (PyTriton's Triton)", version=pytriton, details=details)
    return ServingSection(
        pytriton_version=pytriton,
        tritonclient_version=client,
        loadgen_version=loadgen,
        glibc=glibc_version(),
        usable=not reason,
        reason=reason,
        string_tensors=strings,
        row=row,
    )
