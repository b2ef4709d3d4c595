"""The runner protocol (after Polygraphy's backend/base/runner.py).

The public `activate()`/`infer()` check state and inputs; a backend fills in the `*_impl`.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from trtconv.errors import InputError, UsageError
from trtconv.manifest import is_artifact_dir, read_manifest
from trtconv.model_io import ModelSignature
from trtconv.savedmodel import is_saved_model_dir

Feeds = dict[str, np.ndarray]

# backend name -> "module:RunnerClass", imported only when a model of that backend is opened.
RUNNERS = {
    "tf": "trtconv.backends.tf_native:SavedModelRunner",
    "tftrt": "trtconv.backends.tftrt:TfTrtRunner",
    "ort": "trtconv.backends.ort:OrtRunner",
    "onnx": "trtconv.backends.ort:OrtRunner",
    "trt": "trtconv.backends.trt:TrtRunner",
}


class Runner(ABC):
    """Loads one model and runs it on dicts of numpy arrays keyed by input name."""

    backend: ClassVar[str] = "base"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._signature: ModelSignature | None = None

    @property
    def signature(self) -> ModelSignature:
        if self._signature is None:
            raise RuntimeError(f"{type(self).__name__} used before activate().")
        return self._signature

    @property
    def is_active(self) -> bool:
        return self._signature is not None

    def activate(self) -> None:
        """Load the model; after this `signature` is known and `infer` may be called."""
        if self._signature is None:
            self._signature = self.activate_impl()

    def infer(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """Run one batch. Raises InputError when names, dtypes or ranks do not match."""
        self.activate()
        self.check_feeds(feeds)
        return self.infer_impl(feeds)

    def sync(self) -> None:  # noqa: B027 - a no-op by design for synchronous (CPU) backends
        """Block until the device has finished the last `infer` (no-op on CPU backends)."""

    def check_feeds(self, feeds: Feeds) -> None:
        expected = {spec.name: spec for spec in self.signature.inputs}
        if set(feeds) != set(expected):
            raise InputError(
                f"{self.path}: inputs {sorted(feeds)} given, the model expects {sorted(expected)}."
            )
        for name, spec in expected.items():
            array = feeds[name]
            if array.dtype.name != spec.dtype:
                raise InputError(
                    f"{self.path}: input '{name}' expects dtype {spec.dtype}, found "
                    f"{array.dtype.name}."
                )
            fits = array.ndim == len(spec.shape) and all(
                want is None or want == got
                for want, got in zip(spec.shape, array.shape, strict=True)
            )
            if not fits:
                raise InputError(
                    f"{self.path}: input '{name}' expects shape {spec.describe()}, found "
                    f"{list(array.shape)}."
                )

    @abstractmethod
    def activate_impl(self) -> ModelSignature:
        """Load the model and return its signature."""

    @abstractmethod
    def infer_impl(self, feeds: Feeds) -> dict[str, np.ndarray]:
        """Run one batch on checked feeds; return numpy outputs keyed by output name."""


def runner_class(backend: str) -> type[Runner]:
    try:
        target = RUNNERS[backend]
    except KeyError:
        raise InputError(f"Unknown backend '{backend}' (known: {', '.join(RUNNERS)}).") from None
    module_name, class_name = target.split(":")
    cls: type[Runner] = getattr(importlib.import_module(module_name), class_name)
    return cls


def open_runner(path: Path) -> Runner:
    """A runner for a SavedModel directory or a trtconv artifact directory (not yet activated)."""
    path = Path(path)
    if is_artifact_dir(path):
        manifest = read_manifest(path)
        return runner_class(manifest.backend)(path / manifest.payload)
    if is_saved_model_dir(path):
        return runner_class("tf")(path)
    if not path.exists():
        raise UsageError(f"Model {path} does not exist.")
    raise InputError(
        f"{path} is neither a SavedModel (saved_model.pb) nor a trtconv artifact (manifest.json)."
    )


PRECISIONS = ("fp32", "tf32", "fp16", "int8")
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
    calib_method: str = "entropy"
    # Backends that build from ONNX (ort, trt) get the validated fp32 ONNX export here, and trt
    # int8 also gets the explicit Q/DQ model.
    onnx_path: Path | None = None
    qdq_onnx_path: Path | None = None


@dataclass
class ConversionOutcome:
    """What a backend produced: the payload (relative to output_dir) and what it did."""

    payload: str
    summary: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
