"""The quick tier's guard, the `tensorflow` marks it relies on and the `serial` lock
(tests/helpers/tiers.py), each run on a small suite of its own in a pytest subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFTEST = "from tests.conftest import *  # noqa: F403\n"
# "Imports" TensorFlow the way the guard sees it, without the seconds a real import takes.
SUITE = """
import sys, types
import pytest

def test_light():
    pass

def test_loads_tensorflow():
    sys.modules["tensorflow"] = types.ModuleType("tensorflow")

@pytest.mark.tensorflow
def test_marked():
    raise AssertionError("a quick run leaves this out")

def test_through_a_fixture(digits_model_dir):
    raise AssertionError("a quick run leaves this out")
"""
WHOLE_MODULE = """
import pytest
pytestmark = pytest.mark.tensorflow
raise RuntimeError("a quick run does not import this module")
"""
# Each serial test records when it ran; they must not overlap with any other test.
TIMED = """
import json, os, time
import pytest

def record(name):
    start = time.monotonic()
    time.sleep(0.3)
    with open(os.environ["SPANS"], "a") as spans:
        spans.write(json.dumps([name, start, time.monotonic()]) + "\\n")

@pytest.mark.serial
@pytest.mark.parametrize("n", range(3))
def test_serial(n):
    record(f"serial{n}")

@pytest.mark.parametrize("n", range(6))
def test_parallel(n):
    record(f"parallel{n}")
"""


def _pytest(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=300,
    )
    return done.stdout + done.stderr


def test_a_quick_run_fails_an_unmarked_test_that_imports_tensorflow(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "test_whole.py").write_text(WHOLE_MODULE)
    output = _pytest(tmp_path, "--quick")
    # The offender's call passes; its teardown fails the run.
    assert "2 passed, 2 deselected" in output and "1 error" in output, output
    assert "test_loads_tensorflow imported TensorFlow in a quick run" in output
    assert "@pytest.mark.tensorflow" in output


def test_without_quick_nothing_is_guarded(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    output = _pytest(tmp_path, "-k", "light or loads")
    assert "2 passed, 2 deselected" in output, output


def test_serial_tests_run_alone_under_xdist(tmp_path: Path) -> None:
    (tmp_path / "test_timed.py").write_text(TIMED)
    spans_file = tmp_path / "spans.jsonl"
    output = _pytest(tmp_path, "-n", "2", env={"SPANS": str(spans_file)})
    assert "9 passed" in output, output
    spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    overlapping = [
        (a[0], b[0])
        for a in spans
        for b in spans
        if a[0].startswith("serial") and a is not b and a[1] < b[2] and b[1] < a[2]
    ]
    assert overlapping == []
    # Without the lock the parallel tests do overlap: the check above can fail.
    parallel = [s for s in spans if s[0].startswith("parallel")]
    assert any(a[1] < b[2] and b[1] < a[2] for a in parallel for b in parallel if a is not b)
