"""The quick tier and the `serial` marker (wired into pytest by tests/conftest.py).

Every test is quick unless it is marked `tensorflow`: `pytest --quick` (`make test-quick`) runs the
quick ones and FAILS any of them that imports TensorFlow, naming the marker to add. A test that
uses a fixture in TENSORFLOW_FIXTURES (directly or through another fixture) is marked without
saying so; a module marked as a whole (`pytestmark = pytest.mark.tensorflow`) is not even
imported by a quick run, so it may import TensorFlow at module level.

`serial` tests (timing, signals) run alone under pytest-xdist: every test holds a shared lock on
one file for the run while it runs (fixtures included), a serial test an exclusive one.
"""

from __future__ import annotations

import ast
import fcntl
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

QUICK = "--quick"
TENSORFLOW = "tensorflow"
SERIAL = "serial"
# Fixtures that train or load a model with TensorFlow.
TENSORFLOW_FIXTURES = frozenset({"digits_model_dir"})
LOADED_BEFORE = pytest.StashKey[bool]()
COLLECTION_REPORTED = pytest.StashKey[bool]()


def add_option(parser: pytest.Parser) -> None:
    parser.addoption(
        QUICK,
        action="store_true",
        help="run only the tests not marked tensorflow, and fail any of them that imports it",
    )


def quick(config: pytest.Config) -> bool:
    return bool(config.getoption(QUICK))


def tensorflow_loaded() -> bool:
    return TENSORFLOW in sys.modules


def marks_whole_module(path: Path) -> bool:
    """Whether the test module assigns a `pytestmark` that names the tensorflow marker."""
    tree = ast.parse(path.read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return any(
                isinstance(n, ast.Attribute) and n.attr == TENSORFLOW for n in ast.walk(node.value)
            )
    return False


def ignore_module(path: Path, config: pytest.Config) -> bool | None:
    """In a quick run, leave a module marked tensorflow as a whole unimported."""
    if quick(config) and path.suffix == ".py" and path.name.startswith("test_"):
        return True if marks_whole_module(path) else None
    return None


def mark_and_select(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that use a TensorFlow fixture; in a quick run, deselect the marked."""
    for item in items:
        if TENSORFLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(TENSORFLOW)
    if quick(config):
        heavy = [item for item in items if item.get_closest_marker(TENSORFLOW) is not None]
        if heavy:
            config.hook.pytest_deselected(items=heavy)
            items[:] = [item for item in items if item.get_closest_marker(TENSORFLOW) is None]


def note_before(item: pytest.Item) -> None:
    item.stash[LOADED_BEFORE] = tensorflow_loaded()


def guard(item: pytest.Item, report: pytest.TestReport) -> None:
    """Turn a quick test's teardown report into a failure when the test loaded TensorFlow."""
    if report.when != "teardown" or not quick(item.config):
        return
    if not item.stash.get(LOADED_BEFORE, True) and tensorflow_loaded():
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} imported TensorFlow in a quick run (--quick): mark it "
            "@pytest.mark.tensorflow (or import TensorFlow only in tests marked so)"
        )


def guard_collection(report: pytest.CollectReport, config: pytest.Config) -> None:
    """A module that imports TensorFlow when collected fails a quick run's collection."""
    if not quick(config) or not report.nodeid.endswith(".py") or not tensorflow_loaded():
        return
    if not config.stash.get(COLLECTION_REPORTED, False):  # the first module that loaded it
        config.stash[COLLECTION_REPORTED] = True
        report.outcome = "failed"
        report.longrepr = (
            f"{report.nodeid} imports TensorFlow when collected: mark the module "
            "`pytestmark = pytest.mark.tensorflow` or import TensorFlow inside its tests"
        )


@contextmanager
def run_lock(item: pytest.Item) -> Iterator[None]:
    """Under pytest-xdist: shared for a test, exclusive for a `serial` one; else nothing."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None:
        yield
        return
    exclusive = item.get_closest_marker(SERIAL) is not None
    path = Path(tempfile.gettempdir()) / f"trtconv-tests-{run}.lock"
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
