"""What a model takes and returns: named tensors with shapes and dtypes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.core.errors import InputError

# Arrays keyed by input name (what a model is fed) and by output name (what it returns).
Feeds = dict[str, np.ndarray]
Outputs = dict[str, np.ndarray]
# A fresh iterator over calibration batches (int8), keyed by input name, in the model's dtypes.
CalibrationFeed = Callable[[], Iterator[Feeds]]


@dataclass(frozen=True)
class TensorSpec:
    """One named input or output. `None` in `shape` is a dynamic dimension (the batch)."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str  # numpy dtype name: "float32", "int64", ...

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TensorSpec:
        return cls(data["name"], tuple(data["shape"]), data["dtype"])

    def describe(self) -> str:
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype}[{dims}]"


@dataclass(frozen=True)
class ModelSignature:
    """The serving signature: ordered inputs and outputs."""

    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    name: str = "serving_default"
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["inputs"] = [spec.to_dict() for spec in self.inputs]
        data["outputs"] = [spec.to_dict() for spec in self.outputs]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSignature:
        return cls(
            inputs=tuple(TensorSpec.from_dict(s) for s in data["inputs"]),
            outputs=tuple(TensorSpec.from_dict(s) for s in data["outputs"]),
            name=data.get("name", "serving_default"),
        )

    @property
    def input_names(self) -> list[str]:
        return [spec.name for spec in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [spec.name for spec in self.outputs]


def unknown_rank(model: Path | str, kind: str, name: str) -> InputError:
    """The one sentence for a signature tensor declared without a rank (`TensorSpec(None)`)."""
    return InputError(
        f"SavedModel {model}: {kind} '{name}' has an unknown rank (shape None); trtconv needs "
        "the rank of every input and output: save the signature with a shape such as "
        "[None, 224, 224, 3]."
    )
