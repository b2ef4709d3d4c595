"""The processes below this one, and a forced stop that ends them all."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trtconv.core.processes import (
    alive,
    descendants,
    end_within,
    grandchildren_ended,
    kill_descendants,
)


def test_kill_descendants_ends_children_and_grandchildren() -> None:
    # a shell whose child shell runs a sleep: two levels below it, three below this process
    shell = subprocess.Popen(["sh", "-c", "sh -c 'sleep 60; true' & wait"])
    deadline = time.monotonic() + 10
    while len(descendants(shell.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    below = descendants(shell.pid)
    assert len(below) == 2  # the inner shell, then its sleep
    assert {shell.pid, *below} <= set(descendants(os.getpid()))
    assert kill_descendants(shell.pid) == 2
    assert shell.wait(10) == 0  # its `wait` returned: what it waited for was killed
    deadline = time.monotonic() + 10  # a killed process takes a moment to be gone
    while any(alive(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(alive(pid) for pid in below)


def test_grandchildren_ended_kills_what_a_stopped_child_left_running() -> None:
    # a shell that started a sleep: killing the shell orphans the sleep, which keeps running
    with grandchildren_ended(grace_s=0.5) as note:
        shell = subprocess.Popen(["sh", "-c", "sleep 60 & wait"])
        deadline = time.monotonic() + 10
        while not descendants(shell.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        note()
        orphan = descendants(shell.pid)
        assert orphan and set(orphan) <= set(descendants(os.getpid(), min_depth=2))
        assert shell.pid not in descendants(os.getpid(), min_depth=2)  # a child, not below one
        shell.kill()
        shell.wait(10)
        assert alive(orphan[0])  # still running, below nothing of ours
    deadline = time.monotonic() + 10
    while alive(orphan[0]) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(orphan[0])


def test_end_within_kills_only_what_outlives_the_grace() -> None:
    quick = subprocess.Popen(["sleep", "0.1"])
    assert end_within([quick.pid], grace_s=10) == 0  # ended on its own
    quick.wait(10)
    slow = subprocess.Popen(["sleep", "60"])
    assert end_within([slow.pid], grace_s=0.2) == 1
    assert slow.wait(10) == -9


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs util-linux's setpriv")
def test_what_dies_with_this_process_ends_when_it_is_killed_outright() -> None:
    # A Python process starts a sleep that dies with it, says its pid, and is killed: no
    # clean-up of its own runs, the kernel ends the sleep.
    starter = "import subprocess, sys, time\n" + (
        "from trtconv.core.processes import dies_with_this_process\n"
        "sleeper = subprocess.Popen(dies_with_this_process(['sleep', '60']))\n"
        "print(sleeper.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", starter], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    sleeper = int(parent.stdout.readline())
    # setpriv sets the signal, then becomes the sleep: a parent killed before then goes unseen
    deadline = time.monotonic() + 10
    while _command(sleeper) != "sleep" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert alive(sleeper) and _command(sleeper) == "sleep"
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 10
    while alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(sleeper)


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""
