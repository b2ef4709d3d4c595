"""Loading SavedModels and reading their serving signature, with one-sentence errors; Keras
files (.keras, .h5) exported to a SavedModel for the commands that take one."""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtconv.core.errors import InputError
from trtconv.core.model_io import ModelSignature, TensorSpec, missing_signature, unknown_rank
from trtconv.model.keras_files import KERAS_EXPORT_HOWTO, export_keras_file
from trtconv.model.paths import require_exists, saved_model_in
from trtconv.model.signature_graph import revivable, revive

log = logging.getLogger(__name__)

SERVING_KEY = "serving_default"
MODEL_CARD = "trtconv.json"
KERAS_SUFFIXES = (".keras", ".h5", ".hdf5")


def check_saved_model_dir(path: Path) -> Path:
    """The SavedModel directory `path` names, after cheap checks (no TensorFlow): it exists
    (else UsageError, exit 2) and holds saved_model.pb (else InputError). A `trtconv train`
    output directory names the SavedModel inside it."""
    path = saved_model_in(require_exists(Path(path), "SavedModel"))
    if not path.is_dir():
        how = f"; {KERAS_EXPORT_HOWTO}" if is_keras_file(path) else ""
        raise InputError(f"SavedModel {path} is a file; expected a SavedModel directory{how}.")
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


def is_keras_file(path: Path) -> bool:
    """True for a Keras model file (.keras, .h5, .hdf5)."""
    return Path(path).is_file() and Path(path).suffix.lower() in KERAS_SUFFIXES


@contextmanager
def saved_model_for(path: Path, custom_objects: Sequence[str] = ()) -> Iterator[Path]:
    """The SavedModel directory `path` names (checked by `check_saved_model_dir`); for a Keras
    file, a SavedModel exported from it into a temporary directory that is removed on exit; for
    a SavedModel TensorFlow cannot revive, its signature graphs as the v1 loader reads them
    (`signature_graph.revivable`), likewise temporary: what tf2onnx, OpenVINO and TF-TRT load.

    Raises what `check_saved_model_dir` raises, and InputError for a Keras file Keras cannot load
    or a SavedModel nothing loads.
    """
    path = require_exists(Path(path), "SavedModel")
    if not is_keras_file(path):
        with revivable(check_saved_model_dir(path)) as loadable:
            yield loadable
        return
    with tempfile.TemporaryDirectory(prefix="trtconv-keras-") as work:
        yield export_keras(path, Path(work) / "saved_model", custom_objects)


@contextmanager
def keras_exported(
    paths: Iterable[Path], custom_objects: Sequence[str] = ()
) -> Iterator[dict[Path, Path]]:
    """{Keras file: the SavedModel exported from it} for each Keras file among `paths`, in a
    temporary directory removed on exit; each at .../STEM/saved_model, so that it is labelled
    after the file. Raises InputError for a Keras file Keras cannot load."""
    files = list(dict.fromkeys(Path(p) for p in paths if is_keras_file(Path(p))))
    if not files:
        yield {}
        return
    with tempfile.TemporaryDirectory(prefix="trtconv-keras-") as work:
        yield {
            file: export_keras(
                file, Path(work) / str(index) / file.stem / "saved_model", custom_objects
            )
            for index, file in enumerate(files)
        }


def export_keras(path: Path, output: Path, custom_objects: Sequence[str] = ()) -> Path:
    """Load the Keras file `path` (Keras 3, else Keras 2 through tf_keras; `custom_objects`:
    MODULE:NAME classes it needs) and write it as a SavedModel at `output`
    (`core.keras_files`). Returns `output`; raises InputError naming what is missing."""
    return export_keras_file(path, output, custom_objects)


def load_saved_model(path: Path, signature_key: str = SERVING_KEY) -> LoadedSavedModel:
    """Load a SavedModel and its `signature_key` signature.

    A SavedModel TensorFlow cannot revive (written by TF/Keras 2 with its optimizer) is loaded
    through tf_keras or as its signature graphs (`signature_graph.revive`, said in the log).

    Raises InputError for a missing or corrupt SavedModel and UsageError (exit 2) when it has no
    such signature, naming those it has.
    """
    path = check_saved_model_dir(path)
    loaded = revive(path)
    signatures = dict(loaded.signatures)
    if signature_key not in signatures:
        raise missing_signature(path, signature_key, list(signatures))
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


@dataclass(frozen=True)
class ModelCard:
    """The `trtconv.json` model card `trtconv train` writes beside a SavedModel (its train
    result): what other commands read of it typed (the model, its test accuracy and labels, the
    mixed-precision policy, the data it trained on, the preprocessing of raw pixels, a block
    calib resolves), and the card as written (`inspect` shows it whole). A card written by hand
    may hold some keys only; the rest are None or empty."""

    document: dict[str, Any]
    model: str | None = None
    test_accuracy: float | None = None
    labels: list[str] = field(default_factory=list)
    amp_policy: str | None = None
    data_source: str | None = None
    preprocessing: dict[str, Any] | None = None

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> ModelCard:
        """The card `document` (trtconv.json's content) is."""
        amp, data = document.get("amp") or {}, document.get("data") or {}
        source = data.get("source")
        return cls(
            document=document,
            model=document.get("model"),
            test_accuracy=document.get("test_accuracy"),
            labels=list(document.get("labels") or []),
            amp_policy=amp.get("policy"),
            data_source=str(source) if source else None,
            preprocessing=document.get("preprocessing"),
        )


def read_model_card(path: Path) -> ModelCard | None:
    """The `trtconv.json` model card beside a SavedModel trained by trtconv, if any. Raises
    InputError when the file is not JSON."""
    import json

    for candidate in (Path(path) / MODEL_CARD, Path(path).parent / MODEL_CARD):
        if candidate.is_file():
            try:
                document = json.loads(candidate.read_text())
            except json.JSONDecodeError as exc:
                raise InputError(f"Model card {candidate} is not valid JSON: {exc}.") from exc
            return ModelCard.from_json(document)
    return None
