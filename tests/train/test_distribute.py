"""Data-parallel training with MirroredStrategy on two logical CPU devices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtconv.core.errors import UsageError
from trtconv.train.distribute import (
    CPU_DEVICES_ENV,
    check_global_batch,
    cpu_device_count,
    split_cpu,
)

MIRRORED_ARGS = "train --strategy mirrored --epochs 8 --batch-size 32 --json"


@pytest.mark.slow
@pytest.mark.tensorflow
def test_mirrored_trains_on_two_logical_cpus(tmp_path: Path) -> None:
    # A fresh process: the CPU can only be split before TensorFlow initialises its devices.
    output = tmp_path / "mirrored"
    env = {**os.environ, CPU_DEVICES_ENV: "2"}
    completed = subprocess.run(
        [sys.executable, "-m", "trtconv", *MIRRORED_ARGS.split(), "--output", str(output)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    card = json.loads(completed.stdout)
    assert card["strategy"]["name"] == "mirrored"
    assert card["strategy"]["replicas"] == 2
    assert [d.rsplit("/", 1)[-1] for d in card["strategy"]["devices"]] == [
        "device:CPU:0",
        "device:CPU:1",
    ]
    assert card["batch_size"] == 32  # global, as given
    assert card["batch_size_per_replica"] == 16
    # It learned across replicas: chance is a loss of ln 10 = 2.30 and an accuracy of 0.1.
    # Mirrored training on logical CPUs is not bit-deterministic (the all-reduce order varies),
    # and the exported model's batch-norm moving statistics (momentum 0.99) need some 300 steps
    # to leave their initial values: at 3 epochs (132 steps) the training loss was 0.12-0.16
    # while test accuracy ranged 0.17-0.94; at 8 epochs (352 steps) loss 0.03-0.04, 0.91-0.99.
    assert card["final_loss"] < 0.5
    assert card["test_accuracy"] > 0.6
    on_disk = json.loads((output / "trtconv.json").read_text())
    assert on_disk["strategy"]["replicas"] == 2
    assert (output / "saved_model" / "saved_model.pb").is_file()


def test_cpu_device_count_option_env_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CPU_DEVICES_ENV, raising=False)
    assert cpu_device_count(None) is None
    assert cpu_device_count(3) == 3
    monkeypatch.setenv(CPU_DEVICES_ENV, "2")
    assert cpu_device_count(None) == 2
    assert cpu_device_count(4) == 4  # the option wins over the environment
    monkeypatch.setenv(CPU_DEVICES_ENV, "two")
    with pytest.raises(UsageError, match=CPU_DEVICES_ENV):
        cpu_device_count(None)
    with pytest.raises(UsageError, match="at least 1"):
        cpu_device_count(0)


def test_global_batch_must_divide_over_replicas() -> None:
    check_global_batch(32, 2)
    with pytest.raises(UsageError, match="does not divide over 3 replicas"):
        check_global_batch(32, 3)


@pytest.mark.tensorflow
def test_splitting_after_tensorflow_started_is_a_usage_error() -> None:
    tf = pytest.importorskip("tensorflow")
    tf.config.list_logical_devices("CPU")  # initialises the runtime in this process
    with pytest.raises(UsageError, match="already initialised"):
        split_cpu(2)
