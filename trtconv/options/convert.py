"""`trtconv convert`'s options and their defaults: calibration, the int8 target and ladder,
and the contest of `--backend best`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from trtconv.core.choices import Choice
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import Judging, ToleranceOptions
from trtconv.core.precision import PRECISIONS
from trtconv.options.shared import (
    DEFAULT_BATCH_SIZES,
    DEFAULT_VALIDATE_SAMPLES,
    SPLITS,
    PreprocessingOptions,
    check_batch_sizes,
    check_choice,
    check_confidence,
    check_signature,
    shapes_of,
)

DEFAULT_CALIB_SAMPLES = 500
# int8 on a source shared with validation (no --validate-data) calibrates on this many samples
# unless --calib-samples says otherwise: agreement stopped improving beyond them on the models
# measured (docs/int8.md), and every sample they spare validates.
SHARED_CALIB_SAMPLES = 128
# fp16 from ONNX measures its keep-float32 ranges on this many samples of a shared source
# (docs/fp16.md).
FP16_RANGE_SAMPLES = 64


class CalibMethod(Choice):
    """How int8 calibration picks each tensor's range (ONNX Runtime's calibration methods)."""

    ENTROPY = "entropy"
    MINMAX = "minmax"
    PERCENTILE = "percentile"


CALIB_METHODS = tuple(method.value for method in CalibMethod)
# minmax, as ONNX Runtime's own quantize_static: held-out top-1 agreement of full int8 measured
# 0.981 (minmax) vs 0.928 (entropy) on a MobileNetV2 with ReLU6, 1.000 vs 0.986 on a small ResNet,
# equal on the digits CNN and a text model. Entropy clips the ReLU6 cap; the ladder tries it.
DEFAULT_CALIB_METHOD = CalibMethod.MINMAX
# The int8 precision ladder's default time limit (convert --fallback-time-limit).
DEFAULT_FALLBACK_TIME_LIMIT_S = 600.0
INT8_TARGETS = ("auto", "vnni", "portable")
DEFAULT_RANK_BATCH_SIZE = 8
DEFAULT_RANK_DURATION_S = 3.0


@dataclass(frozen=True)
class Contest:
    """`convert --backend best`: how candidates are timed: the batch size they are ranked at,
    timed seconds (or `iterations`) each after the bench's warm-up, and threads."""

    batch_size: int = DEFAULT_RANK_BATCH_SIZE
    duration_s: float | None = DEFAULT_RANK_DURATION_S
    threads: int | None = None
    iterations: int | None = None

    def __post_init__(self) -> None:
        counts = [self.batch_size, *(n for n in (self.threads, self.iterations) if n is not None)]
        if min(counts) < 1 or (self.duration_s is not None and self.duration_s <= 0):
            raise UsageError(
                "--rank-batch-size and --threads must be at least 1 and --rank-duration positive."
            )


@dataclass(frozen=True)
class ConvertOptions:
    """`trtconv convert`. `precision` None is allowed only with backend "best" (every precision);
    `output` None means models/NAME-BACKEND-PRECISION; `tolerance` is --tolerance (what it
    leaves unset keeps the precision's); `min_top1_agreement` and `max_accuracy_drop` None keep
    its limits; `confidence` is the level verdicts are decided at (0: point decisions; None:
    DEFAULT_CONFIDENCE). `signature` None is serving_default; `input_shapes` fill in dynamic
    input dimensions for random data ({name: full shape}). A model with a fixed batch converts
    at that batch when `batch_sizes` is the default. `validate_data` None: validation on the
    calibration source's samples nothing was fitted to (trtconv.convert.data); `calib_samples`
    None: DEFAULT_CALIB_SAMPLES, or fewer of a source shared with validation. `split` "held-out"
    says the model trained on the rest of the data (keep its fixed hold-out), "all" that it did
    not; None: its model card decides."""

    saved_model: Path
    precision: str | None = None
    backend: str = "auto"
    output: Path | None = None
    calib_data: str | None = None
    calib_samples: int | None = None
    calib_method: str = DEFAULT_CALIB_METHOD
    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    validate_samples: int = DEFAULT_VALIDATE_SAMPLES
    tolerance: ToleranceOptions = field(default_factory=ToleranceOptions)
    force: bool = False
    preprocessing: PreprocessingOptions = field(default_factory=PreprocessingOptions)
    int8_target: str = "auto"
    fallback: bool = True
    fallback_time_limit_s: float = DEFAULT_FALLBACK_TIME_LIMIT_S
    min_top1_agreement: float | None = None
    max_accuracy_drop: float | None = None
    judging: Judging = field(default_factory=Judging)
    contest: Contest = field(default_factory=Contest)
    confidence: float | None = None
    signature: str | None = None
    input_shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    validate_data: str | None = None
    split: str | None = None
    # --custom-objects MODULE:NAME: classes a Keras file needs (trtconv.model.keras_files).
    custom_objects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "saved_model", Path(self.saved_model))
        object.__setattr__(self, "custom_objects", tuple(self.custom_objects))
        if self.confidence is not None:
            check_confidence(self.confidence)
        if self.split is not None:
            check_choice("--split", self.split, SPLITS)
        object.__setattr__(self, "batch_sizes", tuple(self.batch_sizes))
        object.__setattr__(self, "input_shapes", shapes_of(self.input_shapes))
        check_signature(self.signature)
        if self.precision is not None:
            check_choice("--precision", self.precision, PRECISIONS)
        check_choice("--calib-method", self.calib_method, CALIB_METHODS)
        check_choice("--int8-target", self.int8_target, INT8_TARGETS)
        check_batch_sizes(self.batch_sizes)
        if (self.calib_samples is not None and self.calib_samples < 1) or (
            self.validate_samples < 1
        ):
            raise UsageError("--calib-samples and --validate-samples must be at least 1.")
        if self.fallback_time_limit_s <= 0:
            raise UsageError(
                f"--fallback-time-limit must be positive, found {self.fallback_time_limit_s}."
            )
