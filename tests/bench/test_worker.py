"""The worker's timing loop and batching, on a do-nothing runner (no model, no timing asserts)."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trtconv.bench.worker import Budget, NullRunner, make_batches, time_loop
from trtconv.errors import InputError
from trtconv.model_io import ModelSignature, TensorSpec

SIGNATURE = ModelSignature(
    inputs=(TensorSpec("image", (None, 8, 8, 1), "float32"),),
    outputs=(TensorSpec("probabilities", (None, 10), "float32"),),
)


class CountingRunner(NullRunner):
    """Records the batches it was given, in order."""

    def __init__(self) -> None:
        super().__init__(SIGNATURE)
        self.seen: list[int] = []

    def infer_impl(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.seen.append(int(feeds["image"][0, 0, 0, 0]))
        return {}


def batches(count: int, batch_size: int = 2) -> list[dict[str, np.ndarray]]:
    return [{"image": np.full((batch_size, 8, 8, 1), index, np.float32)} for index in range(count)]


def test_iteration_budgets_give_exact_counts_and_drop_warmup() -> None:
    runner = CountingRunner()
    timing = time_loop(runner, batches(3), Budget(iterations=4), Budget(iterations=7))
    assert timing.warmup_iterations == 4
    assert len(timing.latencies_ns) == 7
    assert all(ns > 0 for ns in timing.latencies_ns)
    assert timing.wall_ns >= sum(timing.latencies_ns)
    # Batches cycle in order through warm-up and timed calls alike.
    assert runner.seen == [i % 3 for i in range(11)]
    assert timing.transfer_ms == []


def test_time_budget_still_makes_the_minimum_iterations() -> None:
    timing = time_loop(
        NullRunner(SIGNATURE),
        batches(1),
        Budget(iterations=0),
        Budget(seconds=0.0, min_iterations=25),
    )
    assert timing.warmup_iterations == 0
    assert len(timing.latencies_ns) == 25


def test_budget_done() -> None:
    assert Budget(iterations=3).done(3, 0)
    assert not Budget(iterations=3).done(2, 10**12)
    assert not Budget(seconds=1.0, min_iterations=10).done(9, 2 * 10**9)
    assert not Budget(seconds=1.0, min_iterations=10).done(10, 10**8)
    assert Budget(seconds=1.0, min_iterations=10).done(10, 10**9)


def test_feeds_are_checked_before_any_timed_call() -> None:
    runner = CountingRunner()
    bad = [*batches(2), {"image": np.zeros((2, 4, 4, 1), np.float32)}]
    with pytest.raises(InputError, match="expects shape"):
        time_loop(runner, bad, Budget(iterations=1), Budget(iterations=1))
    assert runner.seen == []


def test_make_batches_wraps_small_data_and_caps_the_count() -> None:
    inputs = {"image": np.arange(5, dtype=np.float32).reshape(5, 1, 1, 1)}
    made = make_batches(inputs, 4, max_batches=8)
    assert [b["image"].ravel().tolist() for b in made] == [[0, 1, 2, 3], [4, 0, 1, 2]]
    assert len(make_batches(inputs, 1, max_batches=3)) == 3
    assert all(b["image"].flags.c_contiguous for b in made)


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads /proc (Linux)")
def test_peak_rss_is_the_workers_own_not_its_parents() -> None:
    """ru_maxrss survives fork and exec: a worker of a big parent reported the parent's peak."""
    child = "from trtconv.bench.worker import peak_rss_mb; print(peak_rss_mb())"
    ballast = bytearray(400 * 1024 * 1024)
    ballast[::4096] = b"\1" * len(ballast[::4096])  # touch every page: 400 MB resident
    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True)
    del ballast
    assert inherited > 400
    assert float(done.stdout) < 200  # the child imports numpy and trtconv, nothing more
