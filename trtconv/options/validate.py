"""`trtconv validate`'s options."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from trtconv.core.errors import UsageError
from trtconv.core.judging_options import Judging, ToleranceOptions
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
    DEFAULT_VALIDATE_SAMPLES samples, the rules the artifact's manifest recorded (its judging
    contract) under `tolerance` (--tolerance) and `confidence` where given; `current_rules`:
    this trtconv's defaults instead of the recorded rules (--current-rules)."""

    artifact: Path
    reference: Path | None = None
    data: str | None = None
    samples: int | None = None
    tolerance: ToleranceOptions = field(default_factory=ToleranceOptions)
    device: str = "auto"
    judging: Judging = field(default_factory=Judging)
    preprocessing: PreprocessingOptions = field(default_factory=PreprocessingOptions)
    split: str | None = None
    confidence: float | None = None
    signature: str | None = None
    current_rules: bool = False

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
