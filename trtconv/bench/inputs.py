"""The benchmark's inputs: prepared once in the parent, shaped by the baseline's signature.

Every model gets the same arrays (saved to one .npz that each worker reads), so differences in
the table come from the models, not from the data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from trtconv.bench.models import ModelEntry
from trtconv.calib.sources import ArraySet, check_arrays, check_input_shape, load_source
from trtconv.errors import InputError
from trtconv.model_io import ModelSignature

RANDOM = "random"
RANDOM_SEED = 0
# Random data: this many batches of the largest batch size, so consecutive calls see new data.
RANDOM_BATCHES = 4
MIN_RANDOM_SAMPLES = 64


def random_inputs(signature: ModelSignature, samples: int) -> dict[str, np.ndarray]:
    """Seeded random inputs shaped by the signature: floats in [0, 1), integers in [0, 10)."""
    rng = np.random.default_rng(RANDOM_SEED)
    arrays = {}
    for spec in signature.inputs:
        if any(d is None for d in spec.shape[1:]):
            raise InputError(
                f"Input {spec.describe()} has a dynamic dimension besides the batch: random data "
                "cannot be shaped for it; pass --data."
            )
        shape = (samples, *(int(d) for d in spec.shape[1:] if d is not None))
        dtype = np.dtype(spec.dtype)
        if np.issubdtype(dtype, np.floating):
            arrays[spec.name] = rng.random(shape, dtype=np.float32).astype(dtype)
        elif dtype == np.bool_:
            arrays[spec.name] = rng.random(shape) < 0.5
        else:
            arrays[spec.name] = rng.integers(0, 10, shape).astype(dtype)
    return arrays


def _image_options(signature: ModelSignature, card: dict[str, Any] | None) -> dict[str, Any]:
    """Image-folder decoding from the model's NHWC input and its model card's preprocessing."""
    shape = signature.inputs[0].shape
    if len(shape) != 4 or shape[1] is None or shape[2] is None or shape[3] is None:
        return {}
    prep = (card or {}).get("preprocessing", {})
    return {
        "image_size": (int(shape[1]), int(shape[2])),
        "channels": int(shape[3]),
        "scale": float(prep.get("scale", 1.0 / 255.0)),
        "offset": float(prep.get("offset", 0.0)),
    }


def fit_to_signature(data: ArraySet, signature: ModelSignature, model: Path) -> ArraySet:
    """Key the arrays by the model's input names, check shapes, cast to the model's dtypes."""
    inputs = data.inputs
    names = signature.input_names
    if len(inputs) == 1 and len(names) == 1:
        inputs = {names[0]: next(iter(inputs.values()))}
    missing = [name for name in names if name not in inputs]
    if missing:
        raise InputError(
            f"{data.source} holds arrays {sorted(inputs)}, but {model} expects inputs {names}."
        )
    fitted = ArraySet({name: inputs[name] for name in names}, data.labels, data.source)
    for spec in signature.inputs:
        check_input_shape(fitted, spec.name, spec.shape[1:], what=f"model {model}")
        array, dtype = fitted.inputs[spec.name], np.dtype(spec.dtype)
        if not np.can_cast(array.dtype, dtype, casting="same_kind"):
            raise InputError(
                f"{data.source}: input '{spec.name}' is {array.dtype}, but {model} expects {dtype}."
            )
        fitted.inputs[spec.name] = np.ascontiguousarray(array.astype(dtype, copy=False))
    return fitted


def load_inputs(
    spec: str, entry: ModelEntry, max_batch: int, card: dict[str, Any] | None
) -> ArraySet:
    """The benchmark inputs: `random`, `digits`, an .npz or an image folder, fitted to the model."""
    if spec == RANDOM:
        samples = max(MIN_RANDOM_SAMPLES, RANDOM_BATCHES * max_batch)
        return ArraySet(random_inputs(entry.signature, samples), None, RANDOM)
    data = load_source(spec, **_image_options(entry.signature, card))
    check_arrays(data)
    return fit_to_signature(data, entry.signature, entry.path)


def input_map(reference: ModelSignature, entry: ModelEntry) -> dict[str, str]:
    """Map a model's input names onto the reference's: by name, else by position."""
    names, ref_names = entry.signature.input_names, reference.input_names
    if set(names) == set(ref_names):
        return {name: name for name in names}
    if len(names) == len(ref_names):
        return dict(zip(names, ref_names, strict=True))
    raise InputError(
        f"{entry.path} takes inputs {names}, the baseline {ref_names}: they cannot share inputs."
    )


def check_entry_fits(entry: ModelEntry, data: ArraySet, mapping: dict[str, str]) -> None:
    """Every model must accept the shared inputs (shape and dtype) before any worker starts."""
    renamed = ArraySet({name: data.inputs[key] for name, key in mapping.items()}, None, data.source)
    for spec in entry.signature.inputs:
        check_input_shape(renamed, spec.name, spec.shape[1:], what=f"model {entry.path}")
        found = renamed.inputs[spec.name].dtype.name
        if found != spec.dtype:
            raise InputError(
                f"{entry.path}: input '{spec.name}' expects {spec.dtype}, the data is {found}."
            )


def save_arrays(path: Path, inputs: dict[str, np.ndarray], labels: np.ndarray | None) -> Path:
    """Write inputs (and labels as `__labels__`) to an uncompressed .npz for the workers."""
    arrays = dict(inputs)
    if labels is not None:
        arrays["__labels__"] = labels
    np.savez(path, **arrays)
    return path
