"""Multi-worker training for real on one machine: two worker processes on 127.0.0.1 (ports
picked here), one CPU replica each, talking through TensorFlow's collectives.

Every test bounds itself: the workers' own --cluster-timeout, a deadline here, and SIGKILL for
any worker still alive at the end (TensorFlow's preemption watcher swallows SIGTERM)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.ports import free_ports
from trtconv.calib.sources import load_digits
from trtconv.train.cluster import TF_CONFIG_ENV

# The runs bound themselves generously (DEADLINE_S, CLUSTER_TIMEOUT_S) and may share the cores
# with other tests; the one that times a SIGTERM against a running step runs alone (`serial`).
pytestmark = pytest.mark.tensorflow

DEADLINE_S = 150  # a whole two-worker run; it takes ~30 s on 2 shared cores
CLUSTER_TIMEOUT_S = "60"


@dataclass
class Worker:
    process: subprocess.Popen[str]
    cwd: Path
    stdout: Path
    stderr: Path

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.stdout.read_text())
        return document

    def log(self) -> str:
        return self.stderr.read_text()[-3000:]


@contextmanager
def two_workers(tmp_path: Path, *args: str) -> Iterator[list[Worker]]:
    """Start `trtconv train --strategy multi-worker ARGS` as worker 0 and worker 1, each in its
    own empty working directory; SIGKILL whichever is still running on the way out."""
    addresses = ",".join(f"127.0.0.1:{port}" for port in free_ports(2))
    env = {k: v for k, v in os.environ.items() if k not in (TF_CONFIG_ENV, "TRTCONV_CPU_DEVICES")}
    workers: list[Worker] = []
    try:
        for index in range(2):
            cwd = tmp_path / f"worker{index}"
            cwd.mkdir()
            stdout, stderr = tmp_path / f"worker{index}.json", tmp_path / f"worker{index}.log"
            command = [sys.executable, "-m", "trtconv", "train", "--strategy", "multi-worker"]
            command += ["--workers", addresses, "--worker-index", str(index), "--json"]
            command += ["--cluster-timeout", CLUSTER_TIMEOUT_S, *args]
            with stdout.open("w") as out, stderr.open("w") as err:
                process = subprocess.Popen(
                    command, cwd=cwd, stdout=out, stderr=err, text=True, env=env
                )
            workers.append(Worker(process, cwd, stdout, stderr))
        yield workers
    finally:
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.kill()
            worker.process.wait()


def wait_all(workers: list[Worker], deadline_s: float = DEADLINE_S) -> None:
    end = time.monotonic() + deadline_s
    for worker in workers:
        worker.process.wait(timeout=max(1.0, end - time.monotonic()))


@pytest.mark.slow
def test_two_workers_train_and_only_the_chief_exports(tmp_path: Path) -> None:
    tf = pytest.importorskip("tensorflow")
    output = tmp_path / "shared" / "digits"  # one path on every worker, as on a shared disk
    args = ("--epochs", "10", "--batch-size", "32", "--output", str(output))
    with two_workers(tmp_path, *args) as workers:
        wait_all(workers)
    for worker in workers:
        assert worker.process.returncode == 0, worker.log()
    chief, other = (worker.document() for worker in workers)

    for card, task, is_chief in ((chief, "worker 0", True), (other, "worker 1", False)):
        strategy = card["strategy"]
        assert (strategy["name"], strategy["workers"], strategy["replicas"]) == (
            "multi-worker",
            2,
            2,
        )
        assert (strategy["task"], strategy["is_chief"]) == (task, is_chief)
        assert card["batch_size"] == 32 and card["batch_size_per_replica"] == 16
    # Same gradients everywhere and batch-norm statistics averaged over the workers: both hold
    # the same model, so they measure the same loss and accuracy.
    assert chief["final_loss"] == pytest.approx(other["final_loss"])
    assert chief["test_accuracy"] == other["test_accuracy"]

    # The chief alone wrote, atomically: the export and its card, nothing else anywhere.
    assert chief["saved_model"] == str(output / "saved_model")
    assert other["saved_model"] is None
    assert sorted(p.name for p in output.parent.iterdir()) == ["digits"]
    assert sorted(p.name for p in output.iterdir()) == ["saved_model", "trtconv.json"]
    assert json.loads((output / "trtconv.json").read_text())["strategy"]["workers"] == 2
    assert not any(workers[1].cwd.iterdir()) and not any(workers[0].cwd.iterdir())

    loaded = tf.saved_model.load(str(output / "saved_model"))
    test = load_digits("test")
    probabilities = loaded.signatures["serving_default"](image=tf.constant(test.x))["probabilities"]
    accuracy = float(np.mean(np.argmax(probabilities.numpy(), axis=-1) == test.labels))
    assert accuracy == pytest.approx(chief["test_accuracy"], abs=1e-6)
    assert accuracy > 0.8  # it learned across the two workers


@pytest.mark.slow
def test_amp_xla_benchmark_runs_on_two_workers(tmp_path: Path) -> None:
    args = ("--benchmark", "--model", "digits-cnn", "--batch-size", "16")
    args += ("--warmup-steps", "1", "--num-iter", "3", "--xla", "--amp-dtype", "bfloat16")
    with two_workers(tmp_path, *args) as workers:
        wait_all(workers)
    for worker in workers:
        assert worker.process.returncode == 0, worker.log()
        result = worker.document()
        assert result["strategy"]["replicas"] == 2 and result["xla"] is True
        assert result["amp"]["policy"] == "mixed_bfloat16"
        assert result["amp"]["training_compute_dtype"] == "bfloat16"
        assert result["images_per_s"] > 0 and np.isfinite(result["final_loss"])
        assert not any(worker.cwd.iterdir())


@pytest.mark.slow
@pytest.mark.serial
def test_a_worker_stopped_mid_run_exits_143_and_stops_the_other_with_exit_1(
    tmp_path: Path,
) -> None:
    args = ("--benchmark", "--model", "digits-cnn", "--batch-size", "16", "--num-iter", "100000")
    with two_workers(tmp_path, *args) as workers:
        victim = workers[1]
        end = time.monotonic() + DEADLINE_S
        while "benchmarking digits-cnn" not in victim.stderr.read_text():
            assert victim.process.poll() is None, victim.log()
            assert time.monotonic() < end, "worker 1 never started its steps"
            time.sleep(0.5)
        time.sleep(1.0)  # some steps in
        victim.process.terminate()  # SIGTERM, as a container stop or a CI time-out sends
        wait_all(workers, deadline_s=60)
    assert victim.process.returncode == 143, victim.log()
    assert victim.document()["error"]["type"] == "Interrupted"
    survivor = workers[0]
    assert survivor.process.returncode == 1, survivor.log()
    error = survivor.document()["error"]
    assert error["type"] == "ClusterError"
    assert "Worker 0 stopped: the cluster failed during a step" in error["message"]


@pytest.mark.slow
def test_a_peer_that_answers_but_never_joins_ends_the_worker_after_the_timeout(
    tmp_path: Path,
) -> None:
    """The last resort: past trtconv's own wait, TensorFlow's join blocks without a limit."""
    mine, impostor_port = free_ports(2)
    with socket.create_server(("127.0.0.1", impostor_port)):  # answers, never joins
        command = [sys.executable, "-m", "trtconv", "train", "--strategy", "multi-worker"]
        command += ["--workers", f"127.0.0.1:{mine},127.0.0.1:{impostor_port}"]
        command += ["--worker-index", "0", "--cluster-timeout", "5", "--json"]
        command += ["--output", str(tmp_path / "out")]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            # Ring worker 0 as worker 1 would, then never start TensorFlow.
            end = time.monotonic() + DEADLINE_S
            while time.monotonic() < end and process.poll() is None:
                try:
                    with socket.create_connection(("127.0.0.1", mine), timeout=1) as ring:
                        ring.sendall(f"127.0.0.1:{impostor_port}\n".encode())
                    break
                except OSError:
                    time.sleep(0.2)
            _, stderr = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert process.returncode == 1, stderr.decode()[-2000:]
    assert b"Timeout (0:00:05)!" in stderr  # faulthandler's watchdog ended it
    assert not (tmp_path / "out").exists()
