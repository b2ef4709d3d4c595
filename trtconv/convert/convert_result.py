"""`convert`'s result: the artifact written, how it was chosen, its manifest and its verdict."""

from __future__ import annotations

from dataclasses import dataclass

from trtconv.artifact.manifest import Manifest
from trtconv.convert.tournament import TournamentTable
from trtconv.core.results import JsonResult, optional_key
from trtconv.onnxlib.fp16_result import Fp16Summary
from trtconv.outputs.validation_result import ValidationReport
from trtconv.quantize.ladder_result import LadderRecord

RESULT_SCHEMA_VERSION = 1


@dataclass
class ConvertResult(JsonResult):
    """What `trtconv convert --json` prints. `artifact` is None (and only `tournament` follows)
    when `--backend best` found no candidate that passed validation; `tournament` is present only
    after `--backend best`. `manifest` is the artifact's manifest.json, `validation` the report
    of its validation (the manifest records the same block)."""

    schema_version: int = RESULT_SCHEMA_VERSION
    artifact: str | None = None
    backend: str | None = optional_key()
    precision: str | None = optional_key()
    backend_reason: str | None = optional_key()
    backend_passed_over: list[str] | None = optional_key()
    conversion_seconds: float | None = optional_key()
    artifact_size_bytes: int | None = optional_key()
    manifest: Manifest | None = optional_key()
    validation: ValidationReport | None = optional_key()
    tournament: TournamentTable | None = optional_key()

    @property
    def ladder(self) -> LadderRecord | None:
        """The int8 precision ladder the manifest records (None when none climbed)."""
        quantization = self.manifest.quantization if self.manifest else None
        return LadderRecord.read(quantization.ladder if quantization else None)

    @property
    def fp16(self) -> Fp16Summary | None:
        """The manifest's mixed float16 block (None when there is none)."""
        summary = self.manifest.conversion_summary if self.manifest else {}
        block = summary.get("fp16")
        return Fp16Summary.from_json(block) if block else None
