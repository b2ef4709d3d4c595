"""The artifact manifest: what an artifact directory holds and how it was made
(docs/architecture.md describes each field)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from trtconv.calib.calibration_result import CalibrationRecord
from trtconv.core.data_contract import DataContract
from trtconv.core.errors import InputError
from trtconv.core.model_io import ModelSignature
from trtconv.core.results import JsonResult, optional_key
from trtconv.model.paths import MANIFEST
from trtconv.outputs.contract import (
    ContractRecord,
    JudgingContract,
    Stated,
    from_earlier,
    from_record,
    resolve,
)
from trtconv.outputs.roles import JudgingRecord
from trtconv.outputs.validation_result import ValidationReport

MANIFEST_SCHEMA_VERSION = 1
STATUSES = ("passed", "failed", "not judged", "unvalidated")


@dataclass(frozen=True, kw_only=True)
class QuantizationBlock(JsonResult):
    """What readers of an artifact use of its `conversion_summary.quantization` block, whichever
    backend wrote it (ONNX Runtime's `QdqSummary`, OpenVINO's `NncfSummary`, TensorRT's): the
    scheme (`u8s8`: the CPU's int8 kernels), whether the weights are 7-bit, and the int8
    ladder's record as its JSON (None: the ladder was off), which `quantize.ladder_result`, a
    layer above, reads back as its type. The block itself is the backend's record."""

    scheme: str | None = None
    reduce_range: bool = False
    ladder: dict[str, Any] | None = None


@dataclass
class Manifest(JsonResult):
    """Everything a release needs to trust an artifact; `payload` is relative to its directory.
    `to_json()` is manifest.json; `read_manifest` checks a file before reading it back."""

    backend: str
    precision: str
    payload: str
    source_model: dict[str, Any]  # {"path", "sha256"}
    signature: dict[str, Any]  # ModelSignature.to_dict()
    device: dict[str, Any]
    tools: dict[str, Any]
    conversion_seconds: float
    conversion_summary: dict[str, Any] = field(default_factory=dict)
    calibration: CalibrationRecord | None = None
    validation: ValidationReport | None = None
    status: str = "unvalidated"  # the validation's verdict: passed, failed or not judged
    # The model's data contract as convert used it: data, split, preprocessing (with sources).
    data_contract: DataContract | None = None
    judging: JudgingRecord | None = None  # how outputs were judged: their roles
    # Every rule the validation judged by, with where each came from (trtconv.outputs.contract).
    contract: ContractRecord | None = optional_key()
    backend_reason: str = ""
    created_at: str = ""
    schema_version: int = MANIFEST_SCHEMA_VERSION

    def judging_contract(
        self, stated: Stated | None = None, *, current: bool = False
    ) -> JudgingContract:
        """The rules this artifact is judged by: those its conversion recorded (an earlier
        trtconv's manifest: what it records, today's defaults for the rest, said in the
        contract's `note`) under what is `stated` now; `current`: today's defaults under what
        is stated, whatever was recorded (--current-rules)."""
        if current:
            return resolve(self.precision, stated)
        if self.contract is not None:
            recorded = from_record(self.contract)
        else:
            recorded = from_earlier(self.precision, self.judging, self.validation)
        return resolve(self.precision, stated, recorded)

    @property
    def model_signature(self) -> ModelSignature:
        return ModelSignature.from_dict(self.signature)

    @property
    def batch_range(self) -> tuple[int, int] | None:
        """(smallest, largest) batch the artifact's engines were built for (TensorRT and TF-TRT
        profiles), or None when any batch runs."""
        found = self.conversion_summary.get("batch_range")
        return (int(found[0]), int(found[1])) if found else None

    @property
    def validated_on(self) -> str | None:
        """The int8 class of the CPU the conversion was validated on (None: unknown)."""
        machine = self.validation.machine if self.validation else None
        return machine.cpu_int8_class if machine else None

    @property
    def quantization(self) -> QuantizationBlock | None:
        """What trtconv reads of the int8 quantisation block the backend recorded (scheme,
        weights, the ladder), or None for an artifact that was not quantised."""
        block = self.conversion_summary.get("quantization")
        return QuantizationBlock.from_json(block) if block else None


def write_manifest(directory: Path, manifest: Manifest) -> Path:
    path = Path(directory) / MANIFEST
    path.write_text(json.dumps(manifest.to_json(), indent=2, default=str) + "\n")
    return path


def read_manifest(directory: Path) -> Manifest:
    """Read and check an artifact's manifest. Raises InputError naming what is wrong."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise InputError(f"{directory} is not a trtconv artifact: {path} is missing.")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"Manifest {path} is not valid JSON ({exc}).") from exc
    version = data.get("schema_version")
    if version != MANIFEST_SCHEMA_VERSION:
        raise InputError(
            f"Manifest {path} has schema_version {version}; this trtconv reads "
            f"{MANIFEST_SCHEMA_VERSION}."
        )
    unknown = sorted(set(data) - {spec.name for spec in fields(Manifest)})
    try:
        if unknown:
            raise TypeError(f"unexpected keys {', '.join(unknown)}")
        manifest = Manifest.from_json(data)
    except (TypeError, KeyError, AttributeError) as exc:
        raise InputError(f"Manifest {path} does not match the manifest schema ({exc}).") from exc
    if not (Path(directory) / manifest.payload).exists():
        raise InputError(
            f"Artifact {directory} names payload '{manifest.payload}', which is missing."
        )
    return manifest
