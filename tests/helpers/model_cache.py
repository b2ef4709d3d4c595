"""Models and ONNX exports the tests build, kept across pytest-xdist workers and across runs.

A build lands in the pytest cache (.pytest_cache/d/trtconv-models/, git-ignored) under a key that
hashes trtconv's source, the versions of the libraries that shape a model and the build's own
description: change any of them and the next run builds afresh. One worker builds while the
others wait on a file lock, then all read the same directory. Tests treat it as read-only.

The run's first process (the pytest-xdist controller, or pytest alone) picks the directory and
hands it to the workers in the environment (`configure`): without the cache plugin
(`-p no:cacheprovider`) it is a temporary one, still one for all workers. The small models of
tests/helpers/*_fixtures.py are built the same way, once for all workers (`built_once`).
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

import trtconv
from trtconv.onnxlib.export import OnnxExport

ROOT_VARIABLE = "TRTCONV_TEST_MODELS"  # the directory, handed from the controller to its workers
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


def configure(config: pytest.Config) -> None:
    """In the run's first process, choose the models' directory for every worker: the pytest
    cache's, or a temporary one (removed at exit) without the cache plugin."""
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker: its controller chose
        return
    cache = getattr(config, "cache", None)
    if cache is None:  # -p no:cacheprovider
        path = Path(tempfile.mkdtemp(prefix="trtconv-models-"))
        atexit.register(shutil.rmtree, path, ignore_errors=True)
    else:  # one per environment: the two ends of the TensorFlow range keep their own builds
        path = Path(cache.mkdir(f"trtconv-models-{Path(sys.prefix).name}"))
    os.environ[ROOT_VARIABLE] = str(path)


def cache_root(config: pytest.Config | None = None) -> Path:
    """The models' directory `configure` chose (a fresh temporary one outside pytest)."""
    chosen = os.environ.get(ROOT_VARIABLE)
    if chosen is None:  # a fixtures module run as a script
        chosen = tempfile.mkdtemp(prefix="trtconv-models-")
        os.environ[ROOT_VARIABLE] = chosen
    return Path(chosen)


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


def exports_dir() -> Path:
    """Where `caching_export` keeps the run's ONNX exports."""
    return cache_root() / "onnx-exports"


def export_onnx_once(saved_model: Path, output: Path, signature: Any) -> OnnxExport:
    """trtconv's export_onnx for a test that needs an export, not the exporting: through the
    same cache as the conversions (tests/conftest.py), so tf2onnx exports a model once."""
    from trtconv.onnxlib.export import export_onnx

    return caching_export(exports_dir(), export_onnx)(saved_model, output, signature)


def caching_export(root: Path, export: Callable[..., OnnxExport]) -> Callable[..., OnnxExport]:
    """`export` (trtconv's export_onnx: tf2onnx in a subprocess, then its checks) remembered by
    the SavedModel's bytes, the signature, the arguments and the library versions.

    The first export of a model runs for real and is kept under ROOT; later ones, in any
    worker or run, copy its ONNX file and summary and write again the log lines the export
    wrote (those its logging level let through), so a test sees what a real export says.
    What trtconv does with the export (its check against TensorFlow, the conversion) still
    runs every time. Failures are not kept."""

    def export_once(
        saved_model: Path, output: Path, signature: Any, *args: Any, **kw: Any
    ) -> OnnxExport:
        parts = [tree_digest(Path(saved_model)), repr(signature), repr((args, kw)), *versions()]
        key = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]
        root.mkdir(parents=True, exist_ok=True)
        onnx, summary, said = (root / f"{key}{suffix}" for suffix in (".onnx", ".json", ".log"))
        with (root / f"{key}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (summary.exists() and said.exists()):
                with _recorded_log() as lines:
                    result = export(saved_model, output, signature, *args, **kw)
                shutil.copyfile(output, onnx)
                said.write_text(json.dumps(lines))
                summary.write_text(json.dumps(result.to_json()))
                return result
        shutil.copyfile(onnx, output)
        for name, level, message in json.loads(said.read_text()):
            logging.getLogger(name).log(level, "%s", message)
        return OnnxExport.from_json(json.loads(summary.read_text()))

    return export_once


class _Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[str, int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.name, record.levelno, record.getMessage()))


@contextlib.contextmanager
def _recorded_log() -> Iterator[list[tuple[str, int, str]]]:
    """The (logger, level, message) of every record trtconv's loggers write inside the block."""
    recorder, logger = _Recorder(), logging.getLogger(trtconv.__name__)
    logger.addHandler(recorder)
    try:
        yield recorder.lines
    finally:
        logger.removeHandler(recorder)


@functools.cache
def shared_dir() -> Path:
    """Where `built_once` builds go: ROOT/fixtures-KEY, KEY hashing trtconv's source, the library
    versions and the fixture modules' source (tests/helpers/*_fixtures.py, this file)."""
    tests = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([*tests.glob("*_fixtures.py"), Path(__file__).resolve()]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    root = cache_root()
    folder = root / f"fixtures-{source_key(digest.hexdigest())}"
    folder.mkdir(parents=True, exist_ok=True)
    with (root / "fixtures.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for old in root.glob("fixtures-*"):  # builds of older sources
            if old != folder:
                shutil.rmtree(old, ignore_errors=True)
    return folder


def built_once(build: Callable[..., Path]) -> Callable[..., Path]:
    """`build(*args, **kwargs)`, which writes under shared_dir() and returns a path there, run
    once for all pytest-xdist workers (and kept across runs): the first caller builds while the
    others wait on a file lock, then every caller gets the recorded path. Within a process it is
    a cached function. Nested builds lock in the order they call each other, so they cannot
    deadlock."""

    @functools.cache
    @functools.wraps(build)
    def once(*args: Any, **kwargs: Any) -> Path:
        what = f"{build.__module__}.{build.__qualname__}{args!r}{sorted(kwargs.items())!r}"
        key = f"{build.__name__}-{hashlib.sha256(what.encode()).hexdigest()[:12]}"
        folder = shared_dir()
        done = folder / f"{key}{DONE}"
        with (folder / f"{key}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not done.exists():
                done.write_text(str(build(*args, **kwargs)))
        return Path(done.read_text())

    return once
