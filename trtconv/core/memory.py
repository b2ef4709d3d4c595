"""The peak resident memory of this process over a stretch of work (calibration, ...).

A thread samples `/proc/self/statm` while the work runs: the process-wide peak (`VmHWM`,
`ru_maxrss`) covers everything since start (TensorFlow's loading, the export) and cannot say what
one step needed, and resetting it would change what every other reader of it sees.
"""

from __future__ import annotations

import os
import threading
import types
from pathlib import Path

MIB = 1024 * 1024
# Copies of a batch's activations live for tens of milliseconds at least: 5 ms sees them.
SAMPLE_INTERVAL_S = 0.005
STATM = Path("/proc/self/statm")


def rss_bytes(statm: Path = STATM) -> int | None:
    """This process's resident set size in bytes; None where /proc is absent (not Linux)."""
    try:
        resident_pages = int(statm.read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


class PeakRss:
    """`with PeakRss() as peak: work()`: then `peak.peak_mb` (the highest RSS seen during the
    work) and `peak.growth_mb` (that peak less the RSS before it), both None without /proc."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.before: int | None = None
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        now = rss_bytes()
        if now is not None:
            self.peak = now if self.peak is None else max(self.peak, now)

    def _watch(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> PeakRss:
        self.before = rss_bytes()
        self.peak = self.before
        if self.before is not None:
            self._thread = threading.Thread(target=self._watch, name="peak-rss", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: types.TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    @property
    def peak_mb(self) -> float | None:
        return None if self.peak is None else round(self.peak / MIB, 1)

    @property
    def growth_mb(self) -> float | None:
        if self.peak is None or self.before is None:
            return None
        return round((self.peak - self.before) / MIB, 1)
