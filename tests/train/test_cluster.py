"""The cluster of a multi-worker run, checked before TensorFlow starts: TF_CONFIG, --workers,
and the bounded wait for the other workers (real sockets on 127.0.0.1)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers.ports import free_ports
from trtconv.core.errors import ClusterError, UsageError
from trtconv.train.cluster import (
    TF_CONFIG_ENV,
    cluster_from_workers,
    parse_tf_config,
    resolve_cluster,
    wait_for_peers,
)
from trtconv.train.distribute import plan_distribution


def tf_config(workers: list[str], index: int, chief: str | None = None) -> str:
    cluster: dict[str, list[str]] = {"worker": workers}
    if chief:
        cluster["chief"] = [chief]
    return json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})


def test_tf_config_names_the_task_and_the_chief() -> None:
    cluster = parse_tf_config(tf_config(["a:1", "b:2", "c:3"], 2))
    assert (cluster.address, cluster.name, cluster.workers) == ("c:3", "worker 2", 3)
    assert not cluster.is_chief
    assert cluster.peers() == [("worker 0", "a:1"), ("worker 1", "b:2")]
    assert parse_tf_config(tf_config(["a:1", "b:2"], 0)).is_chief  # no chief task: worker 0
    with_chief = parse_tf_config(tf_config(["a:1"], 0, chief="boss:9"))
    assert not with_chief.is_chief  # a named chief takes the role from worker 0
    assert with_chief.workers == 2
    assert ("chief", "boss:9") in with_chief.peers()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{'cluster': ", "TF_CONFIG is not JSON"),
        ('["worker"]', "must hold 'cluster' and 'task'"),
        ('{"cluster": {"worker": ["a:1"]}}', "must hold 'cluster' and 'task'"),
        (tf_config(["a:1", "b:2"], 2), "task index 2 is out of range: the cluster lists 2"),
        (tf_config(["a:1", "b:2"], -1), "task index -1 is out of range"),
        (tf_config(["a:1", "a:1"], 0), "lists a:1 twice"),
        (tf_config(["a"], 0), "'a' is not host:port"),
        (tf_config(["a:0"], 0), "'a:0' is not host:port"),
        (
            '{"cluster": {"ps": ["a:1"], "worker": ["b:2"]}, "task": {"type": "worker"}}',
            "names task type 'ps'",
        ),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "chief"}}', "type 'chief' is not in"),
    ],
)
def test_malformed_tf_config_is_one_usage_sentence(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_tf_config(text)


def test_workers_option_writes_a_tf_config_that_reads_back() -> None:
    cluster = cluster_from_workers("127.0.0.1:5000, 127.0.0.1:5001", 1)
    assert parse_tf_config(cluster.tf_config()) == cluster
    assert json.loads(cluster.tf_config())["task"] == {"type": "worker", "index": 1}
    with pytest.raises(UsageError, match="--worker-index 2 is out of range"):
        cluster_from_workers("127.0.0.1:5000,127.0.0.1:5001", 2)
    with pytest.raises(UsageError, match="--workers needs --worker-index"):
        cluster_from_workers("127.0.0.1:5000", None)


def test_cluster_comes_from_the_option_else_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(TF_CONFIG_ENV, raising=False)
    with pytest.raises(UsageError, match="needs the cluster: set TF_CONFIG"):
        resolve_cluster(None, None)
    with pytest.raises(UsageError, match="--worker-index applies with --workers"):
        resolve_cluster(None, 0)
    monkeypatch.setenv(TF_CONFIG_ENV, tf_config(["h:1", "h:2"], 1))
    assert resolve_cluster(None, None).address == "h:2"
    assert resolve_cluster("x:1,x:2", 0).address == "x:1"  # the option wins


def test_distribution_options_that_do_not_go_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRTCONV_CPU_DEVICES", raising=False)
    with pytest.raises(UsageError, match="apply to --strategy multi-worker"):
        plan_distribution("mirrored", workers="a:1,b:2", worker_index=0)
    with pytest.raises(UsageError, match="--cpu-devices applies to --strategy mirrored"):
        plan_distribution("multi-worker", cpu_devices=2, workers="a:1,b:2", worker_index=0)
    with pytest.raises(UsageError, match="--cluster-timeout must be more than 0"):
        plan_distribution("multi-worker", workers="a:1", worker_index=0, timeout_s=0)
    plan = plan_distribution("multi-worker", workers="a:1,b:2", worker_index=1)
    assert plan.cluster is not None and not plan.writes_outputs
    assert plan_distribution("mirrored").writes_outputs


@pytest.mark.serial
def test_two_workers_find_each_other() -> None:
    addresses = ",".join(f"127.0.0.1:{port}" for port in free_ports(2))
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            wait_for_peers(cluster_from_workers(addresses, index), timeout_s=20)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.3)  # the second starts late, as real workers do
    for thread in threads:
        thread.join(30)
    assert not errors
    assert not any(thread.is_alive() for thread in threads)


@pytest.mark.serial
def test_unreachable_worker_is_named_after_the_timeout() -> None:
    mine, silent = free_ports(2)
    cluster = cluster_from_workers(f"127.0.0.1:{mine},127.0.0.1:{silent}", 0)
    started = time.monotonic()
    with pytest.raises(ClusterError) as caught:
        wait_for_peers(cluster, timeout_s=1.5)
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert f"worker 1 at 127.0.0.1:{silent}" in message
    assert "within 1.5 s" in message
    assert message.startswith(f"Worker 0 (127.0.0.1:{mine})")


@pytest.mark.serial
def test_a_worker_that_answers_but_never_rings_back_is_named() -> None:
    """A peer up but with another cluster (it never connects to our address) is not joined."""
    with socket.create_server(("127.0.0.1", 0)) as stranger:
        other = stranger.getsockname()[1]
        (mine,) = free_ports(1)
        cluster = cluster_from_workers(f"127.0.0.1:{mine},127.0.0.1:{other}", 0)
        with pytest.raises(ClusterError) as caught:
            wait_for_peers(cluster, timeout_s=1.5)
    message = str(caught.value)
    assert f"was never reached by worker 1 at 127.0.0.1:{other}" in message
    assert "could not reach" not in message


def test_port_taken_by_another_process_is_a_cluster_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        cluster = cluster_from_workers(f"127.0.0.1:{port}", 0)
        with pytest.raises(ClusterError, match=f"cannot listen on port {port}"):
            wait_for_peers(cluster, timeout_s=1)


def _train(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in (TF_CONFIG_ENV, "TRTCONV_CPU_DEVICES")}
    return subprocess.run(
        [sys.executable, "-m", "trtconv", "train", "--strategy", "multi-worker", "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
    )


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {TF_CONFIG_ENV: "not json"}, "TF_CONFIG is not JSON"),
        ((), {TF_CONFIG_ENV: tf_config(["127.0.0.1:1"], 3)}, "task index 3 is out of range"),
        (("--workers", "127.0.0.1:1,127.0.0.1:2", "--worker-index", "2"), {}, "out of range"),
        ((), {}, "needs the cluster"),
    ],
)
def test_cli_bad_cluster_exits_2_before_anything_runs(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    completed = _train(*args, "--output", str(tmp_path / "out"), env=env)
    assert completed.returncode == 2, completed.stderr
    error = json.loads(completed.stdout)["error"]
    assert error["type"] == "UsageError"
    assert message in error["message"]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.tensorflow
@pytest.mark.serial
def test_cli_unreachable_worker_exits_1_naming_it(tmp_path: Path) -> None:
    mine, silent = free_ports(2)
    workers = f"127.0.0.1:{mine},127.0.0.1:{silent}"
    output = tmp_path / "out"
    args = ("--workers", workers, "--worker-index", "0", "--cluster-timeout", "2")
    completed = _train(*args, "--output", str(output))
    assert completed.returncode == 1, completed.stderr
    error = json.loads(completed.stdout)["error"]
    assert error["type"] == "ClusterError"
    assert f"worker 1 at 127.0.0.1:{silent}" in error["message"]
    assert not output.exists() and not list(tmp_path.iterdir())
