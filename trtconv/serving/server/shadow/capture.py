"""`serve --shadow-capture DIR`: the samples the shadow check found disagreeing (not agreeing,
or not within tolerance), their inputs and both outputs, kept in one .npz.

The file holds one array per input name, as `validate --data` and `convert --calib-data` read
them (trtconv.calib.sources), and `served/NAME` and `native/NAME` per output, which those
readers leave out: the traffic that broke an artifact is what it is validated and calibrated on
next. It is bounded: at most `max_samples` samples and `max_bytes` bytes, the oldest dropped
first (counted); a sample whose shapes differ from those kept (a dynamic dimension) is dropped
too, since one array holds every sample. It is written whole, to a temporary file renamed into
place, at most once every FLUSH_S seconds and when the server stops: a reader never sees half a
file, and a server killed outright loses at most the last second.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.core.model_io import Feeds, Outputs

CAPTURE_SAMPLES = 1000
CAPTURE_BYTES = 256 * 2**20
FLUSH_S = 1.0
SERVED, NATIVE = "served/", "native/"

Sample = dict[str, np.ndarray]


def capture_file(directory: Path, name: str) -> Path:
    """The file a server of model `name` keeps its samples in, one per start (never replaced):
    DIR/NAME-shadow-YYYYmmdd-HHMMSS.npz."""
    return Path(directory) / f"{name}-shadow-{time.strftime('%Y%m%d-%H%M%S')}.npz"


class Capture:
    """Disagreeing samples kept in `path`, bounded (see the module's docstring)."""

    def __init__(
        self, path: Path, max_samples: int = CAPTURE_SAMPLES, max_bytes: int = CAPTURE_BYTES
    ) -> None:
        self.path, self.max_samples, self.max_bytes = Path(path), max_samples, max_bytes
        self.kept: collections.deque[Sample] = collections.deque()
        self.bytes = 0
        self.dropped = 0  # samples not kept, or dropped to make room
        self.changed = False
        self.written_at = 0.0

    def add(self, feeds: Feeds, served: Outputs, native: Outputs, rows: Sequence[int]) -> None:
        """Keep samples `rows` of these batches (inputs, the served and the native outputs)."""
        for row in rows:
            sample = {name: array[row : row + 1] for name, array in feeds.items()}
            sample |= {SERVED + name: array[row : row + 1] for name, array in served.items()}
            sample |= {NATIVE + name: array[row : row + 1] for name, array in native.items()}
            self._keep(sample)

    def _keep(self, sample: Sample) -> None:
        size = sum(array.nbytes for array in sample.values())
        if size > self.max_bytes or (self.kept and not _alike(self.kept[0], sample)):
            self.dropped += 1
            return
        self.kept.append(sample)
        self.bytes += size
        self.changed = True
        while len(self.kept) > self.max_samples or self.bytes > self.max_bytes:
            oldest = self.kept.popleft()
            self.bytes -= sum(array.nbytes for array in oldest.values())
            self.dropped += 1

    def flush(self, force: bool = False) -> None:
        """Write the file when samples changed, at most once every FLUSH_S unless `force`."""
        now = time.monotonic()
        if not self.changed or not self.kept or (not force and now - self.written_at < FLUSH_S):
            return
        first = self.kept[0]
        # Any: NumPy 2's stubs would take a ** of arrays for savez's allow_pickle flag.
        arrays: dict[str, Any] = {
            name: np.concatenate([s[name] for s in self.kept]) for name in first
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(f".{self.path.stem}.partial.npz")
        np.savez(partial, **arrays)
        os.replace(partial, self.path)
        self.changed, self.written_at = False, now

    @property
    def samples(self) -> int:
        return len(self.kept)


def _alike(kept: Sample, sample: Sample) -> bool:
    """Same arrays, each of the same shape and dtype (one array holds every sample)."""
    return kept.keys() == sample.keys() and all(
        kept[name].shape == array.shape and kept[name].dtype == array.dtype
        for name, array in sample.items()
    )
