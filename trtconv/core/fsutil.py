"""Atomic outputs and content hashes."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trtconv.core.errors import UsageError

PARTIAL_PREFIX = ".partial-"


def check_output_free(output: Path, force: bool) -> None:
    """Raise UsageError if `output` exists and `force` is not set, or cannot be written.

    Called before any work, so that a bad `--output` costs nothing (not a trained model or a
    benchmark's measurements thrown away at the end).
    """
    if output.exists() and not force:
        raise UsageError(f"Output {output} already exists; pass --force to replace it.")
    check_writable(output)


def check_writable(output: Path) -> None:
    """Raise UsageError unless `output` (a file or directory, existing or not) can be created
    beside its siblings: its nearest existing parent is a directory we can write in.

    Tried for real (a probe directory made and removed), because permission bits do not tell:
    root may write anywhere they allow, and a read-only filesystem refuses everyone.
    """
    parent = Path(output).absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"Output {output} cannot be created: {parent} is a file, not a folder.")
    try:
        Path(tempfile.mkdtemp(prefix=f"{PARTIAL_PREFIX}write-check-", dir=parent)).rmdir()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"Output {output} cannot be written: {parent}: {reason}.") from None


@contextmanager
def atomic_directory(output: Path, force: bool = False) -> Iterator[Path]:
    """Yield a temporary sibling of `output`; on success rename it into place.

    On any exception (including KeyboardInterrupt) the temporary directory is removed and an
    existing `output` is left untouched, so an interrupted run never leaves a half-written result.
    """
    output = Path(output)
    check_output_free(output, force)
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f"{PARTIAL_PREFIX}{output.name}-", dir=output.parent))
    # mkdtemp creates the directory owner-only (0700); artifacts get the umask's usual mode.
    staging.chmod(0o777 & ~current_umask())
    try:
        yield staging
        if output.exists():
            # Move the old output aside first so a failure between the two renames loses nothing.
            trash = staging.with_name(staging.name + "-old")
            os.replace(output, trash)
            os.replace(staging, output)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.replace(staging, output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def current_umask() -> int:
    """The process's umask (reading it means setting it, so it is set back at once)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` to a temporary sibling, flush it to disk, then rename it over `path`.

    Readers see the old file or the new one, never half of it; the file gets the umask's usual
    mode (mkstemp alone makes it owner-only).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f"{PARTIAL_PREFIX}{path.name}-", dir=path.parent)
    try:
        os.chmod(temporary, 0o666 & ~current_umask())
        with os.fdopen(handle, "wb") as file:
            file.write(data.encode() if isinstance(data, str) else data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def sha256_path(path: Path) -> str:
    """sha256 of a file, or of a directory's files (relative names and contents, sorted)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for file in files:
        if path.is_dir():
            digest.update(file.relative_to(path).as_posix().encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """sha256 of an in-memory buffer."""
    return hashlib.sha256(data).hexdigest()


def dir_size_bytes(path: Path) -> int:
    """Total size of the files under `path` (or of `path` itself if it is a file)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
