"""What a backend's `convert(request) -> ConversionOutcome` gets and gives back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.calib.sources import ArraySet
from trtconv.core.model_io import CalibrationFeed, ModelSignature
from trtconv.options import DEFAULT_CALIB_METHOD
from trtconv.outputs.roles import Roles
from trtconv.outputs.tolerance import Tolerance

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8")


@dataclass
class SearchSlice:
    """The int8 ladder's settings for a backend that quantises the SavedModel itself (openvino):
    the search slice (samples never validated on, trtconv.quantize.search), the native model's
    outputs on it, the budget, each output's role, and how long the fallback may take."""

    data: ArraySet
    reference: dict[str, np.ndarray]
    tolerance: Tolerance
    roles: Roles
    time_limit_s: float
    drawn_from: str = ""


@dataclass
class ConversionRequest:
    """What a backend's `convert(request) -> ConversionOutcome` gets.

    The backend writes its payload under `output_dir` (a staging directory renamed into place by
    the caller) and never touches anything else.
    """

    saved_model: Path
    signature: ModelSignature
    precision: str  # one of PRECISIONS
    output_dir: Path
    batch_sizes: tuple[int, ...] = (1,)
    # INT8 only: a fresh iterator over calibration batches keyed by input name, model dtype.
    calibration: CalibrationFeed | None = None
    calib_method: str = DEFAULT_CALIB_METHOD
    # Backends that build from ONNX (`needs_onnx`) get the validated fp32 ONNX export here, and
    # for int8 also the explicit Q/DQ model in the scheme their record asks for.
    onnx_path: Path | None = None
    qdq_onnx_path: Path | None = None
    # INT8 in the CPU scheme quantised by the backend itself (not from the Q/DQ export): 7-bit
    # weights, chosen for the int8 target (trtconv.quantize.isa.weight_range).
    reduce_range: bool = False
    # The same, when the int8 ladder is on (not --no-fallback): what its fallback scores on.
    search: SearchSlice | None = None
    # What conversions of this SavedModel share (`--backend best` converts it several times): a
    # backend may keep what it makes from the SavedModel alone here, keyed by its own name.
    shared: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConversionOutcome:
    """What a backend produced: the payload (relative to output_dir) and what it did."""

    payload: str
    summary: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
