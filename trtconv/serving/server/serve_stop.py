"""How `serve` waits and stops: it blocks while Triton is alive, and once a first SIGINT or
SIGTERM started the drain, a second one ends everything at once."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from trtconv.core.processes import kill_descendants
from trtconv.serving.server.triton_process import (
    ServingError,
    TritonProcess,
    remove_live_workspaces,
)

POLL_S = 0.2


def wait_while_alive(triton: TritonProcess, stop_after_s: float | None) -> None:
    """Block while the server is alive, until `stop_after_s` (None: until interrupted)."""
    deadline = None if stop_after_s is None else time.monotonic() + stop_after_s
    while deadline is None or time.monotonic() < deadline:
        if not triton.alive():
            raise ServingError(f"The Triton server stopped on its own: {triton.log_tail()}")
        time.sleep(POLL_S)


@contextlib.contextmanager
def second_signal_ends_at_once() -> Iterator[Callable[[], None]]:
    """Yield `arm`: once called (the first SIGINT/SIGTERM was caught and Triton drains the
    requests in flight, not ready for new ones), a second SIGINT or SIGTERM kills Triton's
    processes and ends this one at once, 130/143, the requests in flight unanswered: what an
    operator who cannot wait for the drain asks for. The handlers are restored on the way out."""
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.getsignal(signum) for signum in signals}

    def end_at_once(signum: int, frame: Any) -> None:
        killed = kill_descendants()
        remove_live_workspaces()
        os.write(
            2,
            f"trtconv: error: second signal: stopped at once ({killed} server process(es) "
            "killed, the requests in flight unanswered)\n".encode(),
        )
        os._exit(128 + signum)  # no clean-up left that would not wait on the drain

    def arm() -> None:
        if threading.current_thread() is threading.main_thread():
            for signum in signals:
                signal.signal(signum, end_at_once)

    try:
        yield arm
    finally:
        if threading.current_thread() is threading.main_thread():
            for signum, handler in previous.items():
                signal.signal(signum, handler)
