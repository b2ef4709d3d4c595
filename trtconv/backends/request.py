"""What a backend's `convert(request) -> ConversionOutcome` gets and gives back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.model_io import ModelSignature
from trtconv.quantize import DEFAULT_CALIB_METHOD

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "int8")
Feeds = dict[str, np.ndarray]
CalibrationFeed = Callable[[], Iterator[Feeds]]


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


@dataclass
class ConversionOutcome:
    """What a backend produced: the payload (relative to output_dir) and what it did."""

    payload: str
    summary: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
