"""The release directory as a resource: its lock, its log file, and clean-up.

release.json  release.md  release.log
model/        the trained SavedModel and model card (model.zoo only)
artifacts/ID/ one trtconv artifact per converted target (ID = backend-precision)
bench/        the bench report (results.json, plots)
serving/      the serving run's result ([serving])
triton/       the recommended artifact's Triton model repository ([deploy] triton)
.state/       resume records and the lock
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from trtconv.core.errors import UsageError
from trtconv.core.fsutil import check_writable
from trtconv.release.store import STATE_DIR, sweep_partials

log = logging.getLogger(__name__)

LOG_FILE = "release.log"
LOCK_FILE = "lock"
RELEASE_JSON = "release.json"
RELEASE_MD = "release.md"


@contextmanager
def release_log(path: Path) -> Iterator[None]:
    """Copy trtconv's log records (INFO and up) into `path` for the duration of the release."""
    logger = logging.getLogger("trtconv")
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    previous_level = logger.level
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)
        handler.close()


@contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold an advisory lock on the release directory: two runs must not write it at once.

    flock is released by the kernel when the process dies, so a killed run never blocks a resume.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no locking
        yield
        return
    lock_path = directory / STATE_DIR / LOCK_FILE
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"Another release is running in {directory}.") from None
        yield


def check_release_dir(directory: Path, resume: bool, force: bool) -> None:
    """Check that creating, continuing or replacing `directory` is what was asked (no writes)."""
    if resume and force:
        raise UsageError("Pass --resume or --force, not both.")
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"Release output {directory} is a file; expected a directory.")
    check_writable(directory / RELEASE_JSON)  # inside it when it exists, beside it otherwise
    if not (directory.is_dir() and any(directory.iterdir())):
        return
    if not (resume or force):
        raise UsageError(
            f"Release directory {directory} already exists; pass --resume to continue it or "
            "--force to start over."
        )
    is_release = (directory / STATE_DIR).is_dir() or (directory / RELEASE_JSON).is_file()
    if force and not is_release:
        raise UsageError(f"{directory} is not a release directory; --force will not empty it.")


def clean_release_dir(directory: Path, force: bool) -> None:
    """Under the lock: empty the directory for --force (keeping the lock), sweep leftovers."""
    if force:
        for child in directory.iterdir():
            if child.name == STATE_DIR:
                for state in child.iterdir():
                    if state.is_dir():
                        shutil.rmtree(state)
                    elif state.name != LOCK_FILE:
                        state.unlink()
            elif child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
    for leftover in sweep_partials(directory) + sweep_partials(directory / "artifacts"):
        log.info("removed %s, left by a killed run", leftover.name)
