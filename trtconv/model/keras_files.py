"""Keras model files of every era (.keras, .h5) loaded and exported to a SavedModel.

Keras 3 loads its own files and many Keras 2 ones; a Keras 2 `.h5` it cannot read (layers whose
arguments Keras 3 dropped: an LSTM's `time_major`) is loaded by Keras 2 itself (`tf_keras`,
where installed), as SavedModels written by Keras 2 already are. A custom class the file needs
is imported from the user's code (`--custom-objects MODULE:NAME`); when it is missing, the error
names it. A file that holds weights only (`model.save_weights`) says so: a model needs its code.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import logging
import os
import re
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trtconv.core.errors import InputError, UsageError
from trtconv.core.lazy import require
from trtconv.facts.libraries import tf_keras_install

log = logging.getLogger(__name__)

KERAS_EXPORT_HOWTO = (
    "load it in Python with its custom objects and write a SavedModel with "
    "model.export('DIR') (Keras 3) or tf.saved_model.save(model, 'DIR'), then convert DIR"
)
# The manifest's `source_model` key recording --custom-objects (validate exports the source again).
CUSTOM_OBJECTS = "custom_objects"
# What Keras 3 and Keras 2 say when a file names a class they do not know.
MISSING_CLASS = re.compile(r"(?:Could not locate class|Unknown [a-z _]+:) '?([A-Za-z_][\w.]*)'?")


def parse_custom_objects(specs: Sequence[str]) -> dict[str, object]:
    """{NAME: the class} for each `MODULE:NAME` (--custom-objects), imported from the user's
    code (the current directory first on the path, as `python -c` has it).

    Raises UsageError naming the spec when it is malformed, the module cannot be imported or
    holds no such name.
    """
    found: dict[str, object] = {}
    for spec in specs:
        module_name, _, name = spec.partition(":")
        if not module_name or not name:
            raise UsageError(
                f"--custom-objects takes MODULE:NAME (e.g. my_layers:AttentionLayer), found "
                f"'{spec}'."
            )
        found[name.split(".")[-1]] = _import_object(spec, module_name, name)
    return found


def _import_object(spec: str, module_name: str, name: str) -> Any:
    """`name` (dotted) of the module `module_name`; UsageError when it is not there."""
    added = os.getcwd() not in sys.path
    if added:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or whatever the user's module raises
        raise UsageError(
            f"--custom-objects {spec}: module '{module_name}' cannot be imported ({exc}); run "
            "from the directory that holds it or put it on PYTHONPATH."
        ) from exc
    finally:
        if added:
            sys.path.remove(os.getcwd())
    for part in name.split("."):
        if not hasattr(target, part):
            raise UsageError(f"--custom-objects {spec}: module '{module_name}' has no '{name}'.")
        target = getattr(target, part)
    return target


def export_keras_file(path: Path, output: Path, custom_objects: Sequence[str] = ()) -> Path:
    """Load the Keras file `path` (Keras 3, else Keras 2 through tf_keras) with the classes
    `custom_objects` names, and write it as a SavedModel at `output` (`serving_default` takes
    the model's inputs by name). Returns `output`.

    Raises UsageError for a `custom_objects` spec that does not import and InputError for a
    file neither Keras loads: naming a missing custom class, or saying it holds weights only.
    """
    objects = parse_custom_objects(custom_objects)
    keras = require("keras")
    log.info("%s is a Keras file: exporting it to a SavedModel first", path)
    try:
        model = keras.models.load_model(str(path), compile=False, custom_objects=objects)
    except Exception as exc:  # unknown custom layers, Keras 2 arguments, a corrupt file
        return _export_keras2(path, output, objects, exc)
    try:
        model.export(str(output), format="tf_saved_model", verbose=False)
    except Exception as exc:
        raise InputError(
            f"Keras file {path} could not be exported to a SavedModel ({_first(exc)}); "
            f"{KERAS_EXPORT_HOWTO}."
        ) from exc
    return output


def _export_keras2(path: Path, output: Path, objects: dict[str, object], keras3: Exception) -> Path:
    """`path` loaded by Keras 2 (tf_keras) and exported, after Keras 3 failed with `keras3`;
    InputError saying why neither loads it."""
    if holds_weights_only(path):
        raise InputError(
            f"Keras file {path} holds weights only (no model configuration: written by "
            "model.save_weights): a model needs its code: build it in Python, load these weights "
            "(model.load_weights) and save it with model.save('model.keras') or "
            "model.export('DIR'), then convert that."
        ) from keras3
    if not _keras2_could_read(path):  # a corrupt file: no reason to start Keras 2 for it
        raise _load_error(path, keras3, "")
    if importlib.util.find_spec("tf_keras") is None:
        raise _load_error(
            path,
            keras3,
            f"; tf_keras, which reads Keras 2 files, is not installed: {tf_keras_install()}",
        )
    require("tensorflow")
    tf_keras = importlib.import_module("tf_keras")
    try:
        model = tf_keras.models.load_model(str(path), compile=False, custom_objects=objects)
    except Exception as exc:
        raise _load_error(path, exc, f" (Keras 3: {_first(keras3)})") from exc
    log.info("%s: loaded by Keras 2 (tf_keras): Keras 3 could not (%s)", path, _first(keras3))
    try:
        # Keras 2's export prints its endpoints to stdout, which --json owns: not shown.
        with contextlib.redirect_stdout(io.StringIO()):
            model.export(str(output))
    except Exception as exc:
        raise InputError(
            f"Keras file {path} was loaded by Keras 2 (tf_keras) but could not be exported to "
            f"a SavedModel ({_first(exc)}); {KERAS_EXPORT_HOWTO}."
        ) from exc
    return output


def _load_error(path: Path, exc: Exception, more: str) -> InputError:
    """The one sentence for a Keras file that does not load: the missing class named, with
    --custom-objects, else the loader's first line and how to export it by hand."""
    missing = MISSING_CLASS.search(str(exc))
    if missing:
        name = missing.group(1)
        return InputError(
            f"Keras file {path} needs the custom class '{name}', which is not available here: "
            f"give its code with --custom-objects MODULE:{name} (the Python module that defines "
            "it)."
        )
    return InputError(
        f"Keras file {path} could not be exported to a SavedModel ({_first(exc)}{more}); "
        f"{KERAS_EXPORT_HOWTO}."
    )


def _keras2_could_read(path: Path) -> bool:
    """True for what Keras 2 reads as a model: a zip archive (`.keras`) or an HDF5 file holding
    a model configuration."""
    if zipfile.is_zipfile(path):
        return True
    import h5py

    try:
        with h5py.File(path, "r") as archive:
            return "model_config" in archive.attrs
    except OSError:
        return False


def holds_weights_only(path: Path) -> bool:
    """True for an HDF5 file written by `save_weights` (layer weights, no model config)."""
    if Path(path).suffix.lower() not in (".h5", ".hdf5"):
        return Path(path).name.endswith(".weights.h5")
    import h5py

    try:
        with h5py.File(path, "r") as archive:
            return "model_config" not in archive.attrs and (
                "layer_names" in archive.attrs or "model_weights" not in archive
            )
    except OSError:
        return False


def _first(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none), cut short."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
