"""Models and ONNX exports the tests build, kept across pytest-xdist workers and across runs.

A build lands in the pytest cache (.pytest_cache/d/trtconv-models/, git-ignored) under a key that
hashes trtconv's source, the versions of the libraries that shape a model and the build's own
description: change any of them and the next run builds afresh. One worker builds while the
others wait on a file lock, then all read the same directory. Tests treat it as read-only.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import platform
import shutil
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import trtconv
from trtconv.onnxlib.export import OnnxExport

LIBRARIES = ("tensorflow", "keras", "numpy", "tf2onnx", "onnx", "onnxruntime", "openvino", "nncf")
DONE = ".complete"


def versions() -> list[str]:
    found = []
    for name in LIBRARIES:
        try:
            found.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} missing")
    return found


def source_key(description: str) -> str:
    """A hash of trtconv's source files, the library versions, Python's and `description`."""
    digest = hashlib.sha256()
    package = Path(trtconv.__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    for part in (*versions(), platform.python_version(), description):
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()[:20]


def cache_root(config: pytest.Config) -> Path:
    """The pytest cache's directory for models; a fresh temporary one without the cache."""
    cache = getattr(config, "cache", None)
    if cache is None:  # -p no:cacheprovider
        path = Path(tempfile.mkdtemp(prefix="trtconv-models-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
        return path
    return Path(cache.mkdir("trtconv-models"))


def cached_build(
    config: pytest.Config, name: str, description: str, build: Callable[[Path], None]
) -> Path:
    """ROOT/KEY/NAME, built by `build(path)` unless a complete build is already there."""
    folder = cache_root(config) / f"{name}-{source_key(description)}"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    with (folder / "lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / DONE).exists():
            shutil.rmtree(target, ignore_errors=True)  # a build that was interrupted
            build(target)
            (folder / DONE).touch()
            for old in folder.parent.glob(f"{name}-*"):  # builds of older sources
                if old != folder:
                    shutil.rmtree(old, ignore_errors=True)
    return target


def tree_digest(path: Path) -> str:
    """sha256 over a file or a directory's files (relative names and bytes)."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        digest.update(str(file.relative_to(path.parent)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def caching_export(root: Path, export: Callable[..., OnnxExport]) -> Callable[..., OnnxExport]:
    """`export` (trtconv's export_onnx: tf2onnx in a subprocess, then its checks) remembered by
    the SavedModel's bytes, the signature, the arguments and the library versions.

    The first export of a model runs for real and is kept under ROOT; later ones, in any
    worker or run, copy its ONNX file and summary. What trtconv does with the export (its
    check against TensorFlow, the conversion) still runs every time. Failures are not kept."""

    def export_once(
        saved_model: Path, output: Path, signature: Any, *args: Any, **kw: Any
    ) -> OnnxExport:
        parts = [tree_digest(Path(saved_model)), repr(signature), repr((args, kw)), *versions()]
        key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
        root.mkdir(parents=True, exist_ok=True)
        onnx, summary = root / f"{key}.onnx", root / f"{key}.json"
        with (root / f"{key}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not summary.exists():
                result = export(saved_model, output, signature, *args, **kw)
                shutil.copyfile(output, onnx)
                summary.write_text(json.dumps(result.to_json()))
                return result
        shutil.copyfile(onnx, output)
        return OnnxExport.from_json(json.loads(summary.read_text()))

    return export_once
