"""`trtconv ARGS` run in the test's own process, answered as `subprocess.run` would answer it.

Through the CLI's `main`, as the console script calls it: the exit code main's SystemExit
carries, and what it wrote to sys.stdout and sys.stderr. A command that loads TensorFlow then
loads it once per test process instead of once per call. Each CLI contract keeps one test that
starts the real `python -m trtconv` (output written by C libraries straight to the file
descriptors is seen only there).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

from trtconv.cli import main


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """Run `trtconv ARGS` in-process: its exit code, stdout and stderr."""
    argv = [str(arg) for arg in args]
    stdout, stderr = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            main(argv)
        except SystemExit as stopped:
            code = stopped.code
    returncode = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(
        ["trtconv", *argv], returncode, stdout.getvalue(), stderr.getvalue()
    )
