"""The benchmark's inputs: prepared once in the parent, shaped by the baseline's signature.

Every model gets the same arrays (saved to one .npz that each worker reads), so differences in
the table come from the models, not from the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.bench.models import ModelEntry
from trtconv.calib.preprocessing import Preprocessing
from trtconv.calib.readers import ALL, RANDOM, read_model_data
from trtconv.calib.sources import ArraySet, check_input_shape
from trtconv.core.errors import InputError
from trtconv.core.model_io import ModelSignature, dtype_fits

# Random data: this many batches of the largest batch size, so consecutive calls see new data.
RANDOM_BATCHES = 4
MIN_RANDOM_SAMPLES = 64


def load_inputs(
    spec: str,
    entry: ModelEntry,
    max_batch: int,
    saved_model: Path | None,
    preprocessing: Preprocessing | None = None,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> ArraySet:
    """The benchmark inputs: every sample of `spec` (`random`: enough for a few batches), read by
    the model-data reader with the rules convert and validate apply, fitted to `entry` (its
    dynamic dimensions filled in by `input_shapes`, --input-shape).

    Raw pixels become inputs by `preprocessing` (default: the model card in `saved_model`, the
    baseline's). Raises UsageError for `input_shapes` that do not fit.
    """
    samples = max(MIN_RANDOM_SAMPLES, RANDOM_BATCHES * max_batch) if spec == RANDOM else None
    return read_model_data(
        spec,
        entry.signature.with_shapes(input_shapes or {}),
        role=ALL,
        samples=samples,
        saved_model=saved_model,
        preprocessing=preprocessing,
    )


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
        if not dtype_fits(renamed.inputs[spec.name], spec.dtype):
            raise InputError(
                f"{entry.path}: input '{spec.name}' expects {spec.dtype}, the data is {found}."
            )


def save_arrays(path: Path, inputs: dict[str, np.ndarray], labels: np.ndarray | None) -> Path:
    """Write inputs (and labels as `__labels__`) to an uncompressed .npz for the workers."""
    # Any: NumPy 2's stubs would take a ** of arrays for savez's allow_pickle flag.
    arrays: dict[str, Any] = dict(inputs)
    if labels is not None:
        arrays["__labels__"] = labels
    np.savez(path, **arrays)
    return path
