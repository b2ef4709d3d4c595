"""Loading SavedModels and reading their serving signature, with one-sentence errors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtconv.core.errors import InputError
from trtconv.core.lazy import require
from trtconv.core.model_io import ModelSignature, TensorSpec, unknown_rank
from trtconv.model_paths import require_exists, saved_model_in

SERVING_KEY = "serving_default"
MODEL_CARD = "trtconv.json"


def check_saved_model_dir(path: Path) -> Path:
    """The SavedModel directory `path` names, after cheap checks (no TensorFlow): it exists
    (else UsageError, exit 2) and holds saved_model.pb (else InputError). A `trtconv train`
    output directory names the SavedModel inside it."""
    path = saved_model_in(require_exists(Path(path), "SavedModel"))
    if not path.is_dir():
        raise InputError(f"SavedModel {path} is a file; expected a SavedModel directory.")
    if not (path / "saved_model.pb").is_file():
        raise InputError(
            f"{path} is not a SavedModel: expected {path / 'saved_model.pb'}, found none."
        )
    return path


@dataclass
class LoadedSavedModel:
    """A loaded SavedModel. Keep `loaded` referenced: the signature's variables live in it."""

    path: Path
    loaded: Any
    function: Any
    signature: ModelSignature


def load_saved_model(path: Path, signature_key: str = SERVING_KEY) -> LoadedSavedModel:
    """Load a SavedModel and its serving signature.

    Raises InputError for a missing, corrupt or signature-less SavedModel.
    """
    path = check_saved_model_dir(path)
    tf = require("tensorflow")
    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as exc:  # protobuf DecodeError, OSError, ValueError... all mean "corrupt"
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"SavedModel {path} could not be loaded: {first_line[:200]}") from exc
    signatures = dict(loaded.signatures)
    if signature_key not in signatures:
        found = ", ".join(sorted(signatures)) or "none"
        raise InputError(f"SavedModel {path} has no '{signature_key}' signature (found: {found}).")
    function = signatures[signature_key]
    return LoadedSavedModel(path, loaded, function, signature_of(function, signature_key, path))


def signature_of(function: Any, name: str = SERVING_KEY, model: Path | str = "") -> ModelSignature:
    """Read the named inputs and outputs of a concrete function; never assume names.

    Raises InputError (naming `model`) for a tensor of unknown rank.
    """
    _, kwargs = function.structured_input_signature
    inputs = tuple(_spec(key, spec, "input", model) for key, spec in sorted(kwargs.items()))
    outputs = tuple(
        _spec(key, tensor, "output", model)
        for key, tensor in sorted(function.structured_outputs.items())
    )
    return ModelSignature(inputs=inputs, outputs=outputs, name=name)


def _spec(name: str, tensor: Any, kind: str, model: Path | str) -> TensorSpec:
    if tensor.shape.rank is None:
        raise unknown_rank(model, kind, name)
    return TensorSpec(name, tuple(tensor.shape.as_list()), tensor.dtype.name)


def read_model_card(path: Path) -> dict[str, Any] | None:
    """The `trtconv.json` model card beside a SavedModel trained by trtconv, if any."""
    import json

    for candidate in (Path(path) / MODEL_CARD, Path(path).parent / MODEL_CARD):
        if candidate.is_file():
            try:
                data: dict[str, Any] = json.loads(candidate.read_text())
            except json.JSONDecodeError as exc:
                raise InputError(f"Model card {candidate} is not valid JSON: {exc}.") from exc
            return data
    return None
