"""What several commands' options share: the checks of a value (choices, ranges, shapes,
signatures), the verdicts' confidence level, the data splits, the devices, the batch sizes and
samples a model is measured and validated on, and the preprocessing a user states."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trtconv.core.errors import UsageError
from trtconv.core.model_io import InputValue

# The level of the interval a validation verdict is decided by (--confidence; 0: point rule).
DEFAULT_CONFIDENCE = 0.95
# The part of a data set a model is evaluated on: what it did not train on, or all of it.
HELD_OUT, ALL = "held-out", "all"
SPLITS = (HELD_OUT, ALL)
DEFAULT_BATCH_SIZES = (1, 8, 32)
# Held-out samples validated on: at 1000, an agreement measured at 0.981 or more shows an int8
# budget of 0.97 with 95% confidence (at 0.99, 290 samples would; docs/verdicts.md).
DEFAULT_VALIDATE_SAMPLES = 1000
DEVICES = ("auto", "cpu", "cuda", "tensorrt")
DEFAULT_DEVICE = "auto"  # bench: where artifacts run: what the conversion recorded


def check_confidence(confidence: float) -> None:
    """Raise UsageError unless `confidence` is 0 (point decisions) or a level in (0, 1)."""
    if not 0.0 <= confidence < 1.0:
        raise UsageError(
            f"--confidence must be 0 (point decisions) or a level below 1, e.g. 0.95; found "
            f"{confidence}."
        )


def check_choice(flag: str, value: str, choices: Sequence[str]) -> None:
    """Raise UsageError unless `value` is one of `choices` (`flag` names the option)."""
    if value not in choices:
        raise UsageError(f"{flag} must be one of {', '.join(choices)}, found '{value}'.")


def check_signature(signature: str | None) -> None:
    """Raise UsageError for an empty --signature."""
    if signature is not None and not signature.strip():
        raise UsageError("--signature needs a signature name, found ''.")


def shapes_of(shapes: Mapping[str, Sequence[int]]) -> dict[str, tuple[int, ...]]:
    """--input-shape values as {name: shape tuple}. Raises UsageError for a size below 1."""
    fixed = {str(name): tuple(int(dim) for dim in shape) for name, shape in shapes.items()}
    for name, shape in fixed.items():
        if not shape or min(shape) < 1:
            raise UsageError(f"--input-shape {name}: sizes must be positive, found {list(shape)}.")
    return fixed


def check_positive(flag: str, value: int) -> None:
    """Raise UsageError unless `value` is at least 1 (`flag` names the option)."""
    if value < 1:
        raise UsageError(f"{flag} must be at least 1, found {value}.")


def check_batch_sizes(sizes: Sequence[int]) -> None:
    """Raise UsageError unless `sizes` is a non-empty list of positive integers."""
    if not sizes or any(size < 1 for size in sizes):
        raise UsageError(f"--batch-sizes must be positive integers, found {list(sizes)}.")


@dataclass(frozen=True)
class PreprocessingOptions:
    """What the user said on the command line (or in a release config); None: not said.
    `input_values`: `--input-value NAME=VALUE`, inputs the data does not hold."""

    scale: float | None = None
    offset: float | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    input_values: Mapping[str, InputValue] | None = None

    def __post_init__(self) -> None:
        if self.scale is not None and self.scale == 0:
            raise UsageError("--image-scale must not be 0: every pixel would become the offset.")
        if self.std is not None and any(s <= 0 for s in self.std):
            raise UsageError(f"--image-std values must be positive, found {list(self.std)}.")
        if self.mean is not None and self.std is not None and len(self.mean) != len(self.std):
            raise UsageError(
                f"--image-mean has {len(self.mean)} values and --image-std {len(self.std)}: "
                "give one per channel (or one for all) to both."
            )
