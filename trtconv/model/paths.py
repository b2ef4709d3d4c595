"""What a model path names: a SavedModel directory or a trtconv artifact (cheap, no TensorFlow).

Every command says the same for the same path: a path that does not exist is a usage error
(exit 2), one that exists but is neither kind is bad input (exit 1).
"""

from __future__ import annotations

from pathlib import Path

from trtconv.core.errors import InputError, UsageError

MANIFEST = "manifest.json"  # what makes a directory an artifact (trtconv.artifact.manifest)
SAVED_MODEL = "saved_model"
ARTIFACT = "artifact"


def require_exists(path: Path, what: str = "Model") -> Path:
    """`path`, or UsageError "WHAT PATH does not exist." (exit 2)."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"{what} {path} does not exist.")
    return path


def is_saved_model_dir(path: Path) -> bool:
    return Path(path).is_dir() and (Path(path) / "saved_model.pb").is_file()


def is_artifact_dir(path: Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def saved_model_in(path: Path) -> Path:
    """`path`, or `path/saved_model` when `path` is a `trtconv train` output directory (which
    holds saved_model/ beside the model card): every command takes either."""
    path = Path(path)
    inner = path / "saved_model"
    if path.is_dir() and not is_saved_model_dir(path) and is_saved_model_dir(inner):
        return inner
    return path


def model_kind(path: Path) -> str:
    """ "artifact" or "saved_model" (a SavedModel, or a train output holding one). Raises
    UsageError when `path` does not exist and InputError when it is neither a SavedModel
    (saved_model.pb) nor an artifact (manifest.json)."""
    path = require_exists(path)
    if is_artifact_dir(path):
        return ARTIFACT
    if is_saved_model_dir(saved_model_in(path)):
        return SAVED_MODEL
    raise InputError(
        f"{path} is neither a SavedModel (saved_model.pb) nor a trtconv artifact (manifest.json)."
    )
