"""SIGTERM handled like Ctrl-C: what CI time-outs and container stops send.

Python's default for SIGTERM ends the process at once: staging directories, temporary files and
child processes (tf2onnx, bench workers) are left behind. Raised as an interrupt instead, the same
clean-up as for Ctrl-C runs: `atomic_directory` and `TemporaryDirectory` remove their contents,
and `subprocess.run` kills its child before re-raising.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SIGINT_EXIT = 128 + signal.SIGINT  # 130
SIGTERM_EXIT = 128 + signal.SIGTERM  # 143


class Terminated(KeyboardInterrupt):
    """A SIGTERM, raised where the process was so that clean-up runs on the way out."""

    exit_code = SIGTERM_EXIT


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Turn the first SIGTERM into `Terminated` for the duration of the block.

    A second SIGTERM during the clean-up gets the previous (default: terminate) behaviour, like
    pressing Ctrl-C twice; its leftovers are `.partial-*` directories, swept on the next run.

    Only this process raises: a child a library forks inherits the handler (OpenVINO's telemetry
    sends from a forked process and terminates it when the network hangs), and there the signal
    ends the child as it would have without trtconv, silently.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers can only be installed from the main thread
        return
    previous = signal.getsignal(signal.SIGTERM)
    owner = os.getpid()

    def interrupt(signum: int, frame: Any) -> None:
        if os.getpid() != owner:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        signal.signal(signal.SIGTERM, previous)
        raise Terminated(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def interrupt_exit_code(interrupt: KeyboardInterrupt) -> int:
    """143 for SIGTERM, 130 for Ctrl-C (128 + the signal number, as shells report it)."""
    return int(getattr(interrupt, "exit_code", SIGINT_EXIT))
