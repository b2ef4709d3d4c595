"""What a model takes and returns: named tensors with shapes and dtypes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.core.errors import InputError, UsageError

# Arrays keyed by input name (what a model is fed) and by output name (what it returns).
Feeds = dict[str, np.ndarray]
Outputs = dict[str, np.ndarray]
# A fresh iterator over calibration batches (int8), keyed by input name, in the model's dtypes.
CalibrationFeed = Callable[[], Iterator[Feeds]]
# TensorFlow's tf.string (PNG bytes, text): numpy holds a batch of them as an object array of
# bytes (or a fixed-width bytes array); no ONNX-based backend takes it.
STRING = "string"
# A value `--input-value NAME=VALUE` sets for an input the data does not hold (a TF1
# `is_training` flag): the same value for every sample.
InputValue = bool | int | float


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype an array for a tensor of `dtype` has (object, of bytes, for strings)."""
    return np.dtype(object) if dtype == STRING else np.dtype(dtype)


def dtype_fits(array: np.ndarray, dtype: str) -> bool:
    """True when `array` can feed a tensor of `dtype` as it is (bytes arrays for strings)."""
    if dtype == STRING:
        return array.dtype.kind in "OS"
    return bool(array.dtype.name == dtype)


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

    @property
    def is_string(self) -> bool:
        return self.dtype == STRING


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

    @property
    def fixed_batch(self) -> int | None:
        """The batch size the inputs fix (`[1, 32, 32, 3]`: 1), None when any batch runs.

        This is the one place that decides which batch sizes a signature accepts: calibration,
        validation, the export check, the int8 ladder and the bench all feed batches of it.
        """
        fixed = [spec.shape[0] for spec in self.inputs if spec.shape and spec.shape[0]]
        return min(fixed) if fixed else None

    def batch_for(self, wanted: int) -> int:
        """The batch size to run `wanted` samples at a time with: the fixed batch, if any."""
        return self.fixed_batch or wanted

    def fixed_input(self) -> TensorSpec:
        """The first input that fixes the batch (for messages); call only when one does."""
        return next(spec for spec in self.inputs if spec.shape and spec.shape[0])

    def accepted_batch_sizes(
        self, wanted: tuple[int, ...], default: tuple[int, ...], model: Path | str, flag: str
    ) -> tuple[int, ...]:
        """`wanted` when this signature runs any batch. With a fixed batch: the default sizes
        become that batch; sizes the user asked for must all be it, else UsageError naming
        `flag` (the option that asked)."""
        fixed = self.fixed_batch
        if fixed is None or set(wanted) == {fixed}:
            return wanted
        if tuple(wanted) == tuple(default):
            return (fixed,)
        bad = ", ".join(str(size) for size in wanted if size != fixed)
        raise UsageError(
            f"{model} takes batch size {fixed} only (input {self.fixed_input().describe()}); "
            f"{flag} asks for {bad}: give {flag} {fixed} or leave it out."
        )

    def with_shapes(self, shapes: Mapping[str, tuple[int, ...]]) -> ModelSignature:
        """This signature with the dynamic dimensions of the inputs `shapes` names filled in
        (the batch stays as declared). Raises UsageError for an unknown input, another rank or
        a dimension the signature fixes to another size."""
        specs = {spec.name: spec for spec in self.inputs}
        for name, shape in shapes.items():
            if name not in specs:
                raise UsageError(
                    f"--input-shape names input '{name}'; the model's inputs are "
                    f"{', '.join(specs)}."
                )
            declared = specs[name].shape
            fits = len(shape) == len(declared) and all(
                want is None or want == got for want, got in zip(declared, shape, strict=True)
            )
            if not fits:
                given = "x".join(map(str, shape))
                raise UsageError(
                    f"--input-shape {name}={given} does not fit input {specs[name].describe()}."
                )
            specs[name] = TensorSpec(name, (declared[0], *shape[1:]), specs[name].dtype)
        return replace(self, inputs=tuple(specs[spec.name] for spec in self.inputs))


def parse_input_shapes(items: Sequence[str] | None) -> dict[str, tuple[int, ...]]:
    """`--input-shape NAME=1x48x48x3` (repeatable) as {name: shape}. Raises UsageError."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items or ():
        name, _, dims = item.partition("=")
        try:
            shape = tuple(int(dim) for dim in dims.lower().split("x"))
        except ValueError:
            shape = ()
        if not name or not shape or min(shape) < 1:
            raise UsageError(
                f"--input-shape takes NAME=DIMS with positive sizes, e.g. image=1x48x48x3; "
                f"found '{item}'."
            )
        shapes[name] = shape
    return shapes


def parse_input_values(items: Sequence[str] | None) -> dict[str, InputValue]:
    """`--input-value NAME=VALUE` (repeatable) as {name: value}: true/false, an integer or a
    number. Raises UsageError for anything else."""
    values: dict[str, InputValue] = {}
    for item in items or ():
        name, _, text = item.partition("=")
        value = input_value(text.strip())
        if not name or value is None:
            raise UsageError(
                f"--input-value takes NAME=VALUE with VALUE true, false or a number, e.g. "
                f"is_training=false; found '{item}'."
            )
        values[name] = value
    return values


def input_value(text: str) -> InputValue | None:
    """'false' -> False, '3' -> 3, '0.5' -> 0.5; None for anything else."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return None


def scalar_inputs(signature: ModelSignature) -> frozenset[str]:
    """The inputs of rank 0 (a TF1 `is_training` flag): one value for a whole batch."""
    return frozenset(spec.name for spec in signature.inputs if not spec.shape)


def samples_in(feeds: Feeds) -> int:
    """The number of samples `feeds` holds: the length of its first batched array (a rank-0
    input's one value has none; 1 when every array is 0-d)."""
    return next((len(array) for array in feeds.values() if array.ndim), 1)


def collapse_scalars(feeds: Feeds, names: frozenset[str]) -> Feeds:
    """`feeds` with each input of `names` given as one value per sample (the data's form, which
    batches and slices like every input) collapsed to the 0-d value a rank-0 input takes; the
    data reader checked that the values are one value. Feeds already 0-d pass unchanged."""
    if not any(name in feeds and feeds[name].ndim for name in names):
        return feeds
    return {
        name: array[:1].reshape(()) if name in names and array.ndim else array
        for name, array in feeds.items()
    }


def missing_signature(model: Path | str, key: str, found: Sequence[str]) -> UsageError:
    """The one sentence for a SavedModel without the signature asked for (exit 2): the
    signatures it has, and how to choose one."""
    names = ", ".join(sorted(found)) or "none"
    return UsageError(
        f"SavedModel {model} has no '{key}' signature (found: {names}); choose one with "
        "--signature NAME (model.signature in a release config)."
    )


def unknown_rank(model: Path | str, kind: str, name: str) -> InputError:
    """The one sentence for a signature tensor declared without a rank (`TensorSpec(None)`)."""
    return InputError(
        f"SavedModel {model}: {kind} '{name}' has an unknown rank (shape None); trtconv needs "
        "the rank of every input and output: save the signature with a shape such as "
        "[None, 224, 224, 3]."
    )
