"""SIGTERM (CI time-outs, container stops) behaves like Ctrl-C in every command: the child
processes end, nothing half-written stays, exit 143 with one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from trtconv.onnxlib.export import TF2ONNX_CLI

pytestmark = [
    pytest.mark.slow,
    pytest.mark.serial,  # signals and deadlines: run alone
    pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc (Linux)"),
]


def processes_running(*needles: str) -> list[int]:
    """PIDs whose command line contains every needle."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # the process ended while we looked
        if all(needle in text for needle in needles):
            found.append(int(cmdline.parent.name))
    return found


def wait_for(condition: Callable[[], object], what: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def terminate(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()


def start(args: list[str], tmp: Path) -> subprocess.Popen[str]:
    """trtconv with its own TMPDIR, so what it leaves in temporary storage can be seen."""
    tmp.mkdir()
    return subprocess.Popen(
        [sys.executable, "-m", "trtconv", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp)},
    )


def left_in(tmp: Path) -> list[str]:
    """What a run left in its TMPDIR. `import onnxruntime` (1.31) writes a `.ses` stamp there on
    every import, whatever trtconv does: that one is not ours to clean."""
    return sorted(p.name for p in tmp.iterdir() if p.name != ".ses")


def check_terminated(process: subprocess.Popen[str], stdout: str, stderr: str) -> None:
    assert process.returncode == 143
    assert json.loads(stdout)["error"]["type"] == "Interrupted"
    errors = [line for line in stderr.splitlines() if line.startswith("trtconv: error:")]
    assert errors == ["trtconv: error: terminated (SIGTERM); nothing half-written was kept."]


def test_sigterm_during_the_onnx_export(digits_saved_model: Path, tmp_path: Path) -> None:
    output = tmp_path / "out" / "digits-fp32"
    args = ["convert", str(digits_saved_model), "--precision", "fp32", "--backend", "ort"]
    process = start([*args, "--output", str(output)], tmp_path / "tmp")
    exporting = (TF2ONNX_CLI, str(digits_saved_model))
    try:
        wait_for(lambda: processes_running(*exporting), "tf2onnx to start")
    except AssertionError:
        process.kill()
        raise
    stdout, stderr = terminate(process)
    check_terminated(process, stdout, stderr)
    assert list((tmp_path / "out").iterdir()) == []  # no output, no .partial-* staging
    assert left_in(tmp_path / "tmp") == []  # no temporary ONNX
    wait_for(lambda: not processes_running(*exporting), "tf2onnx to end", timeout_s=10)


def test_sigterm_during_a_bench_worker(digits_saved_model: Path, tmp_path: Path) -> None:
    report = tmp_path / "report"
    args = ["bench", str(digits_saved_model), "--batch-sizes", "1", "--duration", "60"]
    process = start([*args, "--report", str(report)], tmp_path / "tmp")
    worker = ("trtconv.cli.bench_worker", str(tmp_path / "tmp"))
    try:
        wait_for(lambda: processes_running(*worker), "the bench worker to start")
    except AssertionError:
        process.kill()
        raise
    stdout, stderr = terminate(process)
    check_terminated(process, stdout, stderr)
    assert not report.exists()
    assert left_in(tmp_path / "tmp") == []  # no inputs file, no spec
    wait_for(lambda: not processes_running(*worker), "the worker to end", timeout_s=10)


FORKED_CHILD = """
import multiprocessing, signal, sys, time
from trtconv.core.interrupts import sigterm_as_interrupt

with sigterm_as_interrupt():
    # What OpenVINO's telemetry does when the network hangs: send from a forked process,
    # terminate it after a timeout.
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(30,))
    child.start()
    time.sleep(0.5)
    child.terminate()
    child.join(10)
    print(child.exitcode)
"""


def test_a_forked_library_child_dies_quietly_on_sigterm() -> None:
    """The handler is inherited by forked children that are not trtconv's: there SIGTERM ends
    the child as Python's default would, with no `Terminated` traceback on the shared stderr."""
    done = subprocess.run(
        [sys.executable, "-c", FORKED_CHILD], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(-signal.SIGTERM)
    assert "Traceback" not in done.stderr and "Terminated" not in done.stderr
