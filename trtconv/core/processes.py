"""The processes below this one, read from /proc (Linux): what a forced stop has to end, and
what a clean stop waits for."""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

PROC = Path("/proc")
POLL_S = 0.02


def dies_with_this_process(argv: Sequence[str]) -> list[str]:
    """`argv` launched so that the kernel sends it SIGKILL once the thread that starts it has
    ended, however this process ends (SIGKILL included, where no clean-up of ours runs).

    util-linux's `setpriv` sets the parent-death signal, then executes `argv`. Python's own way,
    a `preexec_fn` calling prctl, is unsafe in a process whose threads run (TensorFlow's). Start
    it from the thread that waits for it. A parent that ends before setpriv has set the signal
    (its first milliseconds) goes unnoticed. Unchanged where setpriv is missing or has no
    --pdeathsig (util-linux before 2.33)."""
    return [*_pdeathsig_launcher(), *argv]


@functools.cache
def _pdeathsig_launcher() -> tuple[str, ...]:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return ()
    try:
        usage = subprocess.run([setpriv, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ()
    return (setpriv, "--pdeathsig", "KILL", "--") if "--pdeathsig" in usage.stdout else ()


def descendants(root: int, min_depth: int = 1) -> list[int]:
    """Every live process below `root`, parents before their children; `min_depth` 2: only
    those below its children (the grandchildren and further down)."""
    children: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # ended while we looked
        # the parent pid is the second field after the command, which may hold spaces
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    level, depth = [root], 0
    while level:  # one generation at a time
        level, depth = [pid for parent in level for pid in children.get(parent, [])], depth + 1
        found += level if depth >= min_depth else []
    return found


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        state = (PROC / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def kill_descendants(root: int | None = None) -> int:
    """SIGKILL every process below `root` (default: this one); how many were signalled."""
    return _kill(descendants(os.getpid() if root is None else root))


def _kill(pids: list[int]) -> int:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)


def end_within(pids: list[int], grace_s: float) -> int:
    """Give `pids` up to `grace_s` to end on their own, then SIGKILL those left; how many were
    killed."""
    deadline = time.monotonic() + grace_s
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(POLL_S)
        left = [pid for pid in left if alive(pid)]
    return _kill(left)


@contextlib.contextmanager
def grandchildren_ended(grace_s: float) -> Iterator[Callable[[], None]]:
    """Yield `note`: called while they run, it records the processes below this one's children
    (those a child started: a server's workers); on the way out the recorded ones get
    `grace_s` to end, then SIGKILL. A child that stops may leave its own children running,
    orphaned, where nothing would wait for them."""
    noted: list[int] = []

    def note() -> None:
        noted[:] = descendants(os.getpid(), min_depth=2)

    try:
        yield note
    finally:
        end_within(noted, grace_s)
