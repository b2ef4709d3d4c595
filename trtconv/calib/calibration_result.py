"""The record of the data an int8 artifact was calibrated on, as its manifest keeps it
(`calibration`): made by trtconv.calib.readers.describe, read by validate and bench to see data
on another scale than the calibration's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trtconv.core.results import JsonResult


@dataclass(frozen=True)
class InputStats:
    """The spread of one float input's values in the calibration data."""

    mean: float
    std: float
    min: float
    max: float


@dataclass
class CalibrationRecord(JsonResult):
    """The data an int8 artifact was calibrated on: the `source` given, the `part` of it used,
    how many samples, the method, the data's sha256 and each input's spread (which lets
    validate see data on another scale). Manifests written before `part` and `input_stats`
    read back with them empty."""

    source: str
    samples: int
    method: str | None
    sha256: str
    part: str = ""
    input_stats: dict[str, InputStats] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        order = ("source", "part", "samples", "method", "sha256", "input_stats")
        return {key: document[key] for key in order}
