"""The requests Triton's dynamic batcher grouped, run by trtconv's runner: joined along the
batch axis and run once, the outputs split back; a batch that fails (requests whose other
dimensions differ, a runtime error) is run again request by request, so only a request that
fails alone is answered with its error. Pure numpy: the Triton side is triton_model.py."""

from __future__ import annotations

import collections
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trtconv.core.model_io import STRING, ModelSignature, TensorSpec, numpy_dtype
from trtconv.serving.repository.fixed_inputs import ServedModel

LOG = logging.getLogger(__name__)
# Timed warm-up runs at batch 1 and at the largest batch, after one untimed run of each (its
# set-up: a trace, an allocation); their medians are what admission control and the instance
# count are derived from.
WARMUP_RUNS = 10
Feeds = dict[str, np.ndarray]
Answer = dict[str, np.ndarray] | Exception  # a request's outputs, or why it failed


@dataclass
class Traffic:
    """What one model instance saw: requests, failed ones, and the batch sizes it ran."""

    requests: int = 0
    failed: int = 0
    retried: int = 0  # requests of failed batches run again alone
    batches: collections.Counter[int] = field(default_factory=collections.Counter)
    native: int = 0  # requests the native model served (--on-failing fallback)

    def add(self, other: Traffic) -> None:
        self.requests += other.requests
        self.failed += other.failed
        self.retried += other.retried
        self.native += other.native
        self.batches.update(other.batches)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({**vars(self), "batches": dict(self.batches)}))

    @classmethod
    def load(cls, path: Path) -> Traffic:
        found = cls(**json.loads(path.read_text()))
        # JSON keys are text: the batch sizes back to numbers
        found.batches = collections.Counter({int(k): n for k, n in found.batches.items()})
        return found


def infer_function(
    runner: ServedModel, batched: bool, traffic: Traffic
) -> Callable[[Sequence[Feeds]], list[Answer]]:
    """The call that answers the requests the batcher grouped (each a dict of its inputs):
    run as one batch or, for a fixed-batch model, one by one; one answer per request, an
    exception where that request failed."""
    signature = runner.signature

    def run(feeds: Feeds) -> dict[str, np.ndarray]:
        outputs = runner.infer(feeds)
        return {spec.name: as_declared(outputs[spec.name], spec) for spec in signature.outputs}

    def joined(feeds: Sequence[Feeds]) -> list[Answer]:
        sizes = [len(next(iter(feed.values()))) for feed in feeds]
        together = {name: np.concatenate([f[name] for f in feeds]) for name in feeds[0]}
        outputs = run(together)
        traffic.batches[sum(sizes)] += 1
        cuts = np.cumsum(sizes)[:-1]
        parts = {name: np.split(array, cuts) for name, array in outputs.items()}
        return [{name: parts[name][i] for name in parts} for i in range(len(feeds))]

    def alone(feed: Feeds) -> Answer:
        try:
            answer: Answer = run(feed)
            traffic.batches[len(next(iter(feed.values()))) if feed else 1] += 1
        except Exception as exc:  # the request's own failure: answered to it alone
            traffic.failed += 1
            answer = exc
        return answer

    def infer(requests: Sequence[Feeds]) -> list[Answer]:
        traffic.requests += len(requests)
        if batched and len(requests) > 1:
            try:
                return joined(requests)
            except Exception:
                traffic.retried += len(requests)
                LOG.debug("a batch of %d failed; retrying its requests alone", len(requests))
        return [alone(feed) for feed in requests]

    return infer


def as_declared(array: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """`array` in the dtype Triton declares for `spec` (bytes for strings)."""
    if spec.dtype == STRING:
        return np.asarray(array, dtype=np.bytes_)
    return np.asarray(array, dtype=numpy_dtype(spec.dtype))


def sample_feeds(
    signature: ModelSignature, batch: int, batched: bool, seed: int = 0
) -> dict[str, np.ndarray]:
    """Random inputs of `batch` samples (other dynamic dimensions 1), every element drawn on
    its own: floats in [0, 1), integers 0 or 1 (an index any table has), booleans either way;
    strings empty."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in signature.inputs:
        dims = list(spec.shape)
        if batched and dims:
            dims[0] = batch
        shape = [1 if dim is None else int(dim) for dim in dims]
        dtype = numpy_dtype(spec.dtype)
        if spec.dtype == STRING:
            feeds[spec.name] = np.full(shape, b"", dtype=object)
        elif dtype.kind in "iub":
            feeds[spec.name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[spec.name] = rng.random(shape).astype(dtype)
    return feeds


def warm_up(model: ServedModel, batch: int, batched: bool) -> tuple[float, float]:
    """One run, then WARMUP_RUNS timed ones, at batch 1 and at `batch` on random data (the lazy
    set-up paid before the server says ready): the median milliseconds of each."""
    sizes = (1, batch) if batched else (batch, batch)
    medians = []
    for size in dict.fromkeys(sizes):
        feeds = sample_feeds(model.signature, size, batched)
        model.infer(feeds)  # the first call of a size pays its set-up
        times = []
        for _ in range(WARMUP_RUNS):
            start = time.perf_counter()
            model.infer(feeds)
            times.append((time.perf_counter() - start) * 1000)
        medians.append(float(np.median(times)))
    return medians[0], medians[-1]
