"""What a backend adds to `trtconv doctor`'s report: a typed section of its own.

A section is a dataclass whose fields are its JSON block's keys, named in the report by its
`KEY`; it gives doctor's libraries table its rows (`library_rows`), so the renderer reads fields
and knows no backend. A section type registers itself by subclassing, so a report read back
(`DoctorReport.from_json`) gets each block as its type; a block no registered type reads stays a
`RawSection`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trtconv.core.results import JsonResult, optional_key

_TYPES: dict[str, type[DoctorSection]] = {}


@dataclass(frozen=True, kw_only=True)
class LibraryRow:
    """One row of doctor's libraries table: the component, its version (None: not installed)
    or, where it says more, whether it is usable, and the details."""

    component: str
    version: str | None
    details: str
    usable: bool | None = optional_key()


class DoctorSection(JsonResult):
    """Base of a doctor section (subclasses are dataclasses that set `KEY`)."""

    KEY: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KEY:
            _TYPES[cls.KEY] = cls

    def library_rows(self) -> list[LibraryRow]:
        """The rows this section adds to doctor's libraries table (none by default)."""
        return []


@dataclass(frozen=True)
class RawSection(DoctorSection):
    """A section known only as its JSON block (written by a newer trtconv, or a module that has
    no section type yet); its `row`, when it has one, is its libraries table row."""

    block: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The block as it came."""
        return dict(self.block)

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> RawSection:
        """The block `document` is."""
        return cls(dict(document))

    def library_rows(self) -> list[LibraryRow]:
        row = self.block.get("row")
        return [LibraryRow(**row)] if isinstance(row, dict) else []


def read_section(key: str, document: Mapping[str, Any]) -> DoctorSection:
    """The section of the report's `key` block: its registered type, else a RawSection."""
    return _TYPES.get(key, RawSection).from_json(document)
