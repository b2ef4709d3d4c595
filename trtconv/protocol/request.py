"""What a backend's `convert(request) -> ConversionOutcome` gets and gives back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtconv.calib.sources import ArraySet
from trtconv.core.judging_options import Roles
from trtconv.core.model_io import CalibrationFeed, Feeds, ModelSignature, Outputs
from trtconv.core.progress import Progress
from trtconv.options.convert import DEFAULT_CALIB_METHOD
from trtconv.outputs.tolerance import Tolerance


@dataclass(frozen=True)
class SearchSlice:
    """The int8 ladder's settings: the search slice (samples never validated on,
    trtconv.quantize.search), the native model's outputs on it, the budget, each output's role,
    and how long the fallback may take."""

    data: ArraySet
    reference: Outputs
    tolerance: Tolerance
    roles: Roles
    time_limit_s: float
    drawn_from: str = ""
    # When the conversion began (time.perf_counter): the limit counts from there, so that the
    # export and calibration before the ladder use it too. None: from the ladder's start.
    started: float | None = None


@dataclass
class ConversionRequest:
    """What a backend's `convert(request) -> ConversionOutcome` gets.

    The backend writes its payload under `output_dir` (a staging directory renamed into place by
    the caller) and never touches anything else; scratch files go under `work_dir` (int8 Q/DQ
    models: trtconv.quantize.build needs it).
    """

    saved_model: Path
    signature: ModelSignature
    precision: str  # one of trtconv.core.precision.PRECISIONS
    output_dir: Path
    work_dir: Path | None = None
    batch_sizes: tuple[int, ...] = (1,)
    # INT8 only: a fresh iterator over calibration batches keyed by input name, model dtype.
    calibration: CalibrationFeed | None = None
    # A batch of real inputs (held-out samples): engine builds take their shapes (and strings).
    sample: Feeds | None = None
    calib_method: str = DEFAULT_CALIB_METHOD
    # INT8 on CPUs: where the artifact will run (options.INT8_TARGETS), which sets the weight
    # range of the CPU scheme (trtconv.quantize.isa.cpu_weight_range).
    int8_target: str = "auto"
    # INT8 with the precision ladder on (not --no-fallback): what its fallback scores on.
    search: SearchSlice | None = None
    # Backends that build from ONNX (`needs_onnx`) get the validated fp32 ONNX export here.
    onnx_path: Path | None = None
    # Long steps inside a backend's conversion (the int8 ladder) report here.
    progress: Progress | None = None
    # What conversions of this SavedModel share (`--backend best` converts it several times): a
    # backend may keep what it makes from the SavedModel alone here, keyed by its own name.
    shared: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConversionOutcome:
    """What a backend produced: the payload (relative to output_dir) and what it did."""

    payload: str
    summary: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
