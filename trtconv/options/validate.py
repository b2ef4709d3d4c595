"""`trtconv validate`'s options."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import Judging
from trtconv.options.shared import (
    DEVICES,
    SPLITS,
    PreprocessingOptions,
    check_choice,
    check_confidence,
    check_signature,
)


@dataclass(frozen=True)
class ValidateOptions:
    """`trtconv validate`. None means: from the artifact's manifest (reference model, data,
    split, the confidence its verdict was decided at, else DEFAULT_CONFIDENCE),
    DEFAULT_VALIDATE_SAMPLES samples, the precision's tolerance (`tolerance` its atol and
    `rtol` its relative part for every output: --tolerance X,R)."""

    artifact: Path
    reference: Path | None = None
    data: str | None = None
    samples: int | None = None
    tolerance: float | None = None
    device: str = "auto"
    judging: Judging = field(default_factory=Judging)
    preprocessing: PreprocessingOptions = field(default_factory=PreprocessingOptions)
    split: str | None = None
    confidence: float | None = None
    signature: str | None = None
    rtol: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "artifact", Path(self.artifact))
        check_signature(self.signature)
        check_choice("--device", self.device, DEVICES)
        if self.confidence is not None:
            check_confidence(self.confidence)
        if self.split is not None:
            check_choice("--split", self.split, SPLITS)
        if self.samples is not None and self.samples < 1:
            raise UsageError(f"--samples must be at least 1, found {self.samples}.")
