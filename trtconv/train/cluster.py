"""The cluster of a multi-worker run: TF_CONFIG read and checked (or written from --workers), and
a bounded wait until every other worker answers on its address.

Pure Python: nothing here imports TensorFlow, so every check runs before it starts.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from trtconv.core.errors import ClusterError, UsageError

log = logging.getLogger(__name__)

TF_CONFIG_ENV = "TF_CONFIG"
# MultiWorkerMirroredStrategy runs these task types; an optional single chief, then workers.
ROLES = ("chief", "worker")
EXAMPLE = (
    '{"cluster": {"worker": ["host1:2222", "host2:2222"]}, "task": {"type": "worker", "index": 0}}'
)
RETRY_S = 0.5  # between rounds of connection attempts while waiting for the others


def task_name(role: str, index: int) -> str:
    """`chief` or `worker 1`, as messages name a task."""
    return "chief" if role == "chief" else f"{role} {index}"


@dataclass(frozen=True)
class Cluster:
    """The addresses of every task by role, and which task this process is."""

    jobs: dict[str, list[str]]  # "chief" (at most one) and/or "worker" -> host:port addresses
    task_type: str
    task_index: int

    @property
    def address(self) -> str:
        return self.jobs[self.task_type][self.task_index]

    @property
    def name(self) -> str:
        """`worker 1` or `chief`, as in messages."""
        return task_name(self.task_type, self.task_index)

    @property
    def workers(self) -> int:
        """Every task that trains (the chief trains too)."""
        return sum(len(self.jobs.get(role, [])) for role in ROLES)

    @property
    def is_chief(self) -> bool:
        """TensorFlow's rule: the `chief` task, or worker 0 when the cluster names no chief."""
        if "chief" in self.jobs:
            return self.task_type == "chief"
        return self.task_index == 0

    def peers(self) -> list[tuple[str, str]]:
        """(name, address) of every other task."""
        return [
            (task_name(role, index), address)
            for role in ROLES
            for index, address in enumerate(self.jobs.get(role, []))
            if (role, index) != (self.task_type, self.task_index)
        ]

    def tf_config(self) -> str:
        """This cluster as the TF_CONFIG document TensorFlow reads."""
        task = {"type": self.task_type, "index": self.task_index}
        return json.dumps({"cluster": self.jobs, "task": task})


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (or `[v6]:port`) -> (host, port). Raises UsageError when it is not one."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"Worker address '{address}' is not host:port (a port from 1 to 65535).")
    return host, int(port)


def _addresses(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise UsageError(f"{where} must be a non-empty list of 'host:port' strings, found {value}.")
    for address in value:
        split_address(address)
    return list(value)


def _check_jobs(cluster: Any) -> dict[str, list[str]]:
    if not isinstance(cluster, dict) or not cluster:
        raise UsageError(f"TF_CONFIG 'cluster' must map task types to addresses, found {cluster}.")
    unknown = sorted(set(cluster) - set(ROLES))
    if unknown:
        raise UsageError(
            f"TF_CONFIG names task type '{unknown[0]}'; multi-worker training runs only "
            f"{' and '.join(ROLES)} tasks."
        )
    jobs = {role: _addresses(cluster[role], f"TF_CONFIG cluster.{role}") for role in cluster}
    if len(jobs.get("chief", [])) > 1:
        raise UsageError(f"TF_CONFIG lists {len(jobs['chief'])} chiefs; a cluster has at most one.")
    every = [address for role in ROLES for address in jobs.get(role, [])]
    repeated = sorted({address for address in every if every.count(address) > 1})
    if repeated:
        raise UsageError(f"TF_CONFIG lists {repeated[0]} twice; each task needs its own address.")
    return jobs


def _check_index(jobs: dict[str, list[str]], task_type: str, index: Any, source: str) -> int:
    addresses = jobs[task_type]
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(addresses):
        raise UsageError(
            f"{source} {index!r} is out of range: the cluster lists {len(addresses)} "
            f"'{task_type}' address{'es' if len(addresses) > 1 else ''} "
            f"(index 0 to {len(addresses) - 1})."
        )
    return index


def parse_tf_config(text: str) -> Cluster:
    """Read a TF_CONFIG document. Raises UsageError naming what is wrong (not JSON, no cluster,
    an unknown task type, a bad address, an index outside the cluster)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"TF_CONFIG is not JSON ({exc.msg} at column {exc.colno}); expected e.g. {EXAMPLE}."
        ) from None
    if not isinstance(document, dict) or not {"cluster", "task"} <= set(document):
        found = sorted(document) if isinstance(document, dict) else type(document).__name__
        raise UsageError(f"TF_CONFIG must hold 'cluster' and 'task', found {found}.")
    jobs = _check_jobs(document["cluster"])
    task = document["task"]
    task_type = task.get("type") if isinstance(task, dict) else None
    if task_type not in jobs:
        raise UsageError(
            f"TF_CONFIG task type {task_type!r} is not in its cluster ({', '.join(jobs)})."
        )
    index = _check_index(jobs, task_type, task.get("index", 0), "TF_CONFIG task index")
    return Cluster(jobs, task_type, index)


def cluster_from_workers(workers: str, worker_index: int | None) -> Cluster:
    """`--workers host:port,host:port --worker-index N` as a cluster of workers (worker 0 is
    the chief). Raises UsageError for a bad address or index."""
    addresses = _addresses([a.strip() for a in workers.split(",") if a.strip()], "--workers")
    jobs = _check_jobs({"worker": addresses})
    if worker_index is None:
        raise UsageError("--workers needs --worker-index N: which of the addresses this worker is.")
    return Cluster(jobs, "worker", _check_index(jobs, "worker", worker_index, "--worker-index"))


def resolve_cluster(workers: str | None, worker_index: int | None) -> Cluster:
    """The cluster from --workers/--worker-index, else from $TF_CONFIG.

    Raises UsageError when neither is given, or for a malformed one.
    """
    if workers:
        return cluster_from_workers(workers, worker_index)
    if worker_index is not None:
        raise UsageError("--worker-index applies with --workers host:port,host:port,...")
    text = os.environ.get(TF_CONFIG_ENV, "")
    if not text.strip():
        raise UsageError(
            "--strategy multi-worker needs the cluster: set TF_CONFIG (e.g. "
            f"{EXAMPLE}) or pass --workers host:port,... --worker-index N."
        )
    return parse_tf_config(text)


class _Doorbell:
    """Our own port while we wait: a thread accepts the others' connections and records the
    address each one says it is. Listening on every interface, as TensorFlow's server will."""

    def __init__(self, port: int) -> None:
        try:
            if socket.has_dualstack_ipv6():
                family = socket.AF_INET6
                self._server = socket.create_server(("", port), family=family, dualstack_ipv6=True)
            else:
                self._server = socket.create_server(("", port))
        except OSError as exc:
            raise ClusterError(
                f"This worker cannot listen on port {port}: {exc.strerror}."
            ) from exc
        self._server.settimeout(RETRY_S)
        self.rung_by: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with connection:
                connection.settimeout(2.0)
                try:
                    self.rung_by.add(connection.recv(1024).decode(errors="replace").strip())
                except OSError:
                    continue

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._server.close()


def _ring(address: str, me: str, timeout_s: float) -> str | None:
    """Connect to `address` and say who we are; None on success, else why it failed."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host, port), timeout=max(0.1, timeout_s)) as connection:
            connection.sendall(f"{me}\n".encode())
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def _unreachable(
    cluster: Cluster,
    timeout_s: float,
    pending: dict[str, str],
    why: dict[str, str],
    silent: list[tuple[str, str]],
) -> ClusterError:
    parts = [f"could not reach {name} at {pending[name]} ({why[name]})" for name in pending]
    parts += [f"was never reached by {n} at {a}" for n, a in silent if n not in pending]
    return ClusterError(
        f"{cluster.name.capitalize()} ({cluster.address}) {'; '.join(parts)} within "
        f"{timeout_s:g} s: start every worker with the same cluster, and check the addresses "
        "and that their ports are open."
    )


def wait_for_peers(cluster: Cluster, timeout_s: float) -> None:
    """Return once this worker has reached every other task and every other task has reached
    it (each connects to the others' addresses and says which task it is).

    TensorFlow's own join blocks without a limit (and holds the interpreter while it does), so
    trtconv first checks this within `timeout_s`. Keeping our port open until everyone has rung
    means no worker leaves the wait while another still looks for it. Raises ClusterError
    naming each task that could not be reached or never rang, and why.
    """
    deadline = time.monotonic() + timeout_s
    pending = dict(cluster.peers())
    why: dict[str, str] = {}
    doorbell = _Doorbell(split_address(cluster.address)[1])
    try:
        while True:
            for name, address in list(pending.items()):
                failure = _ring(address, cluster.address, min(2.0, deadline - time.monotonic()))
                if failure is None:
                    del pending[name]
                else:
                    why[name] = failure
            silent = [(n, a) for n, a in cluster.peers() if a not in doorbell.rung_by]
            if not pending and not silent:
                break
            if time.monotonic() + RETRY_S > deadline:
                raise _unreachable(cluster, timeout_s, pending, why, silent)
            time.sleep(RETRY_S)
    finally:
        doorbell.close()
    log.info("%s of %d: every other worker answered", cluster.name, cluster.workers)
