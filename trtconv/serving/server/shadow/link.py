"""How served samples reach the shadow check, and how the check's fallback reaches the server.

Triton's model instances are processes of their own; the check runs in the `trtconv serve`
process. Each instance connects to it over a Unix socket in the abstract namespace (no file to
remove, gone with the process; the connection is authenticated with a key only the workspace's
settings file holds):

- `ShadowTap` (in an instance): after a request is answered, it is drawn with probability
  `rate` and put, copied, on a bounded local queue without waiting; a full queue drops it and
  counts its samples. A thread sends the queue to the check; another listens for FALLBACK.
- `Inbox` (in `serve`): one reader thread per instance puts what arrives on one bounded queue
  the check takes batches from; a full queue drops and counts. `dropped` adds what the instances
  dropped before sending (each offer carries its instance's count).

Nothing on the served path waits for the check: the tap's draw and copy are the only cost a
request pays, and only when drawn.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import random
import socket
import threading
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection, Listener

from trtconv.core.model_io import Feeds, Outputs

LOG = logging.getLogger(__name__)
FAMILY = "AF_UNIX"
FALLBACK = "fallback"  # what the check tells the instances once the verdict fails
TAP_REQUESTS = 64  # requests an instance holds for the check before it drops
INBOX_REQUESTS = 256  # requests the check's queue holds before it drops
CLOSE_TIMEOUT_S = 1.0
SHADOW_NICE = 10  # below the served path's processes (0): CFS gives it about a tenth under load


@dataclass(frozen=True)
class Offered:
    """One served request offered to the check: its inputs, the outputs it was answered with,
    and how many samples its instance dropped so far."""

    feeds: Feeds
    outputs: Outputs
    dropped: int = 0

    @property
    def samples(self) -> int:
        return rows(self.feeds)


def rows(feeds: Feeds) -> int:
    """The samples of a request (1 for a model without batched inputs)."""
    first = next(iter(feeds.values()), None)
    return len(first) if first is not None and first.ndim else 1


def lower_priority() -> None:
    """This thread (and the threads it starts) at nice SHADOW_NICE: Linux keeps a nice value
    per thread. The check's threads in `serve` run so; an instance's stay at the served path's."""
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), SHADOW_NICE)


def new_address() -> str:
    """A fresh address in Linux's abstract socket namespace."""
    return f"\0trtconv-shadow-{os.getpid()}-{os.urandom(6).hex()}"


class ShadowTap:
    """A model instance's end (see the module's docstring)."""

    def __init__(self, rate: float, address: str, key: bytes, capacity: int = TAP_REQUESTS):
        self.rate = rate
        self.draw = random.Random(os.urandom(8)).random  # per instance, not the process's
        self.waiting: queue.Queue[Offered | None] = queue.Queue(capacity)
        self.dropped = 0
        self.fallback = False  # told by the check: serve the native model from now on
        self.connection = Client(address, family=FAMILY, authkey=key)
        for target in (self._send, self._listen):
            threading.Thread(target=target, daemon=True, name=f"trtconv-{target.__name__}").start()

    def offer(self, feeds: Feeds, outputs: Outputs) -> None:
        """Offer a served request (drawn with probability `rate`), never waiting."""
        if self.draw() >= self.rate:
            return
        copied = Offered(
            {name: array.copy() for name, array in feeds.items()},
            {name: array.copy() for name, array in outputs.items()},
        )
        try:
            self.waiting.put_nowait(copied)
        except queue.Full:
            self.dropped += copied.samples

    def _send(self) -> None:
        while (offered := self.waiting.get()) is not None:
            try:
                self.connection.send(Offered(offered.feeds, offered.outputs, self.dropped))
            except OSError:  # the check is gone (serve stopping): serving goes on without it
                return

    def _listen(self) -> None:
        with contextlib.suppress(EOFError, OSError):
            while True:
                if self.connection.recv() == FALLBACK:
                    self.fallback = True

    def close(self) -> None:
        with contextlib.suppress(queue.Full):
            self.waiting.put(None, timeout=CLOSE_TIMEOUT_S)
        self.connection.close()


class Inbox:
    """The check's end (see the module's docstring)."""

    def __init__(self, address: str, key: bytes, capacity: int = INBOX_REQUESTS) -> None:
        self.address, self.key = address, key
        self.listener = Listener(address, family=FAMILY, authkey=key)
        self.waiting: queue.Queue[Offered] = queue.Queue(capacity)
        self.dropped_here = 0
        self.dropped_there: dict[int, int] = {}  # per instance: its latest count
        self.connections: list[Connection] = []
        self.lock = threading.Lock()
        self.fallback = False
        self.closed = False
        threading.Thread(target=self._accept, daemon=True, name="trtconv-shadow-accept").start()

    @property
    def dropped(self) -> int:
        """Samples dropped: by full instance queues and by this one."""
        return self.dropped_here + sum(list(self.dropped_there.values()))  # a copy: readers add

    def _accept(self) -> None:
        lower_priority()  # its readers, started here, inherit it
        while not self.closed:
            try:
                connection = self.listener.accept()
            except Exception as exc:  # a client that failed the key's challenge, or closing
                LOG.debug("shadow: a connection was refused: %s", exc)
                continue
            with self.lock:
                if self.closed:
                    connection.close()
                    return
                self.connections.append(connection)
                if self.fallback:
                    _tell(connection)
            threading.Thread(
                target=self._read, args=(connection,), daemon=True, name="trtconv-shadow-read"
            ).start()

    def _read(self, connection: Connection) -> None:
        key = id(connection)
        with contextlib.suppress(EOFError, OSError):
            while True:
                offered = connection.recv()
                self.dropped_there[key] = offered.dropped
                try:
                    self.waiting.put_nowait(offered)
                except queue.Full:
                    self.dropped_here += offered.samples

    def take(self, most_samples: int, timeout_s: float) -> list[Offered]:
        """What waits, up to about `most_samples` samples; waits `timeout_s` for the first."""
        try:
            taken = [self.waiting.get(timeout=timeout_s)]
        except queue.Empty:
            return []
        count = taken[0].samples
        while count < most_samples:
            try:
                offered = self.waiting.get_nowait()
            except queue.Empty:
                break
            taken.append(offered)
            count += offered.samples
        return taken

    def tell_fallback(self) -> None:
        """Tell every instance (and any that connects later) to serve the native model."""
        with self.lock:
            self.fallback = True
            for connection in self.connections:
                _tell(connection)

    def close(self) -> None:
        """Stop accepting (a last connection wakes the accepting thread) and close them all."""
        with self.lock:
            self.closed = True
            connections, self.connections = self.connections, []
        _wake(self.address)
        self.listener.close()
        for connection in connections:
            connection.close()


def _wake(address: str) -> None:
    """Connect to `address` and hang up at once: an accepting thread returns from accept()
    (the key's challenge fails) and sees that the inbox closed. A plain socket, not a Client:
    a Client waits for the challenge, forever when no thread accepts any more (a test hung
    there once)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as wake:
        wake.connect(address)


def _tell(connection: Connection) -> None:
    with contextlib.suppress(OSError):
        connection.send(FALLBACK)
