"""tf.distribute strategies for data-parallel training."""

from __future__ import annotations

import faulthandler
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from trtconv.core.errors import ClusterError, UsageError
from trtconv.core.lazy import require
from trtconv.core.results import optional_key
from trtconv.options.train import DEFAULT_CLUSTER_TIMEOUT_S, STRATEGIES, ClusterOptions
from trtconv.train.cluster import (
    TF_CONFIG_ENV,
    Cluster,
    resolve_cluster,
    task_name,
    wait_for_peers,
)

log = logging.getLogger(__name__)

# Honoured like --cpu-devices: lets tests and CPU-only hosts exercise MirroredStrategy.
CPU_DEVICES_ENV = "TRTCONV_CPU_DEVICES"


@dataclass(frozen=True)
class DistributionPlan:
    """The checked --strategy, --cpu-devices and cluster options; nothing started yet."""

    name: str
    cpu_devices: int | None = None
    cluster: Cluster | None = None
    timeout_s: float = DEFAULT_CLUSTER_TIMEOUT_S

    @property
    def writes_outputs(self) -> bool:
        """Only the chief of a cluster writes; every other run is its own chief."""
        return self.cluster is None or self.cluster.is_chief


def plan_distribution(
    strategy: str | None = None,
    cpu_devices: int | None = None,
    workers: str | None = None,
    worker_index: int | None = None,
    timeout_s: float | None = None,
) -> DistributionPlan:
    """Check the distribution options before any data or TensorFlow work.

    `timeout_s` None is DEFAULT_CLUSTER_TIMEOUT_S. Returns the plan (with the cluster for
    `multi-worker`). Raises UsageError for an unknown
    strategy, options that do not go with it, or a malformed TF_CONFIG / --workers.
    """
    name = strategy or "default"
    if name not in STRATEGIES:
        raise UsageError(f"Unknown --strategy '{name}'; expected one of {', '.join(STRATEGIES)}.")
    devices = cpu_device_count(cpu_devices)
    timeout_s = DEFAULT_CLUSTER_TIMEOUT_S if timeout_s is None else timeout_s
    if timeout_s <= 0:
        raise UsageError(f"--cluster-timeout must be more than 0 seconds, found {timeout_s:g}.")
    if name != "multi-worker":
        if workers or worker_index is not None:
            raise UsageError("--workers and --worker-index apply to --strategy multi-worker.")
        return DistributionPlan(name, devices)
    if devices is not None:
        # MultiWorkerMirroredStrategy runs one replica per CPU worker, whatever the split.
        raise UsageError(
            "--cpu-devices applies to --strategy mirrored; multi-worker runs one replica per "
            "worker on a CPU (one per GPU on a GPU host)."
        )
    return DistributionPlan(name, None, resolve_cluster(workers, worker_index), timeout_s)


def plan_cluster(options: ClusterOptions) -> DistributionPlan:
    """`plan_distribution` for the cluster options of train and train --benchmark."""
    return plan_distribution(
        options.strategy,
        options.cpu_devices,
        options.workers,
        options.worker_index,
        options.cluster_timeout_s,
    )


def start_strategy(plan: DistributionPlan) -> Any:
    """Split the CPU if asked, then create the strategy (for multi-worker: join the cluster).

    Must run before TensorFlow initialises its devices. Raises UsageError when it already has,
    and ClusterError when the other workers cannot be reached within the plan's timeout.
    """
    if plan.cpu_devices is not None:
        split_cpu(plan.cpu_devices)
    if plan.cluster is not None:
        return join_cluster(plan.cluster, plan.timeout_s)
    return make_strategy(plan.name)


def make_strategy(name: str | None) -> Any:
    """`None`/`default`: the default (single-device) strategy; `mirrored`: all local GPUs.

    Without GPUs, mirrored uses the logical CPU devices (see `split_cpu`), which is how it is
    tested here. `multi-worker` needs a cluster: see `join_cluster`.
    """
    tf = require("tensorflow")
    if name in (None, "default"):
        return tf.distribute.get_strategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices=devices)
    raise UsageError(f"Unknown --strategy '{name}'; expected one of {', '.join(STRATEGIES[:2])}.")


@contextmanager
def _hang_guard(timeout_s: float) -> Iterator[None]:
    """End the process (exit 1, with a traceback on stderr) if the block outlives `timeout_s`.

    TensorFlow joins the cluster inside one C++ call that holds the interpreter, so no Python
    timer can interrupt it; faulthandler's watchdog thread runs without the interpreter. It is
    the last resort for a worker that answered and then never joined (another cluster, a crash).
    """
    try:
        faulthandler.dump_traceback_later(timeout_s, exit=True, file=sys.stderr)
    except (AttributeError, OSError, RuntimeError, ValueError):  # stderr is no real file
        yield
        return
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def join_cluster(cluster: Cluster, timeout_s: float) -> Any:
    """Write TF_CONFIG, wait for every other worker, and create MultiWorkerMirroredStrategy.

    Collective steps time out after `timeout_s` too (a worker that died mid-training). Returns
    the strategy. Raises ClusterError when a worker does not answer within `timeout_s`.
    """
    os.environ[TF_CONFIG_ENV] = cluster.tf_config()  # what the strategy's resolver reads
    tf = require("tensorflow")  # imported first: the others may already be waiting for us
    log.info(
        "%s at %s: waiting for %d other workers",
        cluster.name,
        cluster.address,
        len(cluster.peers()),
    )
    wait_for_peers(cluster, timeout_s)
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout_s)
    log.info("joining the cluster (a worker that never joins ends this one after %g s)", timeout_s)
    with _hang_guard(timeout_s), _keep_sigterm_handler():
        try:
            return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        except (RuntimeError, ValueError, tf.errors.OpError) as exc:
            raise ClusterError(f"{cluster.name} could not join the cluster: {exc}") from exc


@contextmanager
def _keep_sigterm_handler() -> Iterator[None]:
    """Put back this process's SIGTERM handler after the block.

    Joining a cluster starts TensorFlow's preemption watcher, which takes SIGTERM over and only
    records it (the run goes on). trtconv's own handling applies instead: stop, remove anything
    half-written, exit 143.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if handler is not None:
            signal.signal(signal.SIGTERM, handler)


def split_cpu(count: int) -> None:
    """Split the CPU into `count` logical devices; must run before TensorFlow initialises.

    Raises UsageError when TensorFlow's devices are already initialised in this process.
    """
    tf = require("tensorflow")
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    except RuntimeError as exc:
        raise UsageError(
            f"Cannot split the CPU into {count} logical devices: TensorFlow is already "
            f"initialised in this process ({exc})."
        ) from exc


def cpu_device_count(option: int | None) -> int | None:
    """The --cpu-devices option, else $TRTCONV_CPU_DEVICES, else None (no split).

    Raises UsageError for a non-integer or a count below 1.
    """
    raw: int | str | None = option if option is not None else os.environ.get(CPU_DEVICES_ENV)
    if raw in (None, ""):
        return None
    try:
        count = int(raw)
    except ValueError:
        raise UsageError(f"${CPU_DEVICES_ENV} must be an integer, found '{raw}'.") from None
    if count < 1:
        raise UsageError(f"--cpu-devices must be at least 1, found {count}.")
    return count


def check_global_batch(batch_size: int, replicas: int) -> None:
    """The batch size is global: each replica gets batch/replicas, so it must divide evenly."""
    if batch_size % replicas:
        raise UsageError(
            f"Global batch size {batch_size} does not divide over {replicas} replicas; use a "
            f"multiple of {replicas} (nothing is scaled silently)."
        )


def strategy_devices(strategy: Any) -> list[str]:
    """The devices the replicas run on; [] for the default strategy (TensorFlow's placement)."""
    try:
        return [str(device) for device in strategy.extended.worker_devices]
    except RuntimeError:  # the default strategy does not list devices
        return []


# "/job:worker/replica:0/task:1" or "/job:worker/task:1" in TensorFlow's collective errors
TASK_NAME = re.compile(r"/job:(\w+)/(?:replica:\d+/)?task:(\d+)")
CAUSE_WORDS = ("aborted by", "timed out", "deadline", "unavailable", "connection")


def _failure_summary(cluster: Cluster, message: str) -> str:
    """The line of a TensorFlow collective error that says why, and the task it came from."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    cause = next((ln for ln in lines if any(w in ln.lower() for w in CAUSE_WORDS)), None)
    summary = cause or (lines[0] if lines else "no message")
    ours = (cluster.task_type, cluster.task_index)
    tasks = [(m.group(1), int(m.group(2))) for m in TASK_NAME.finditer(message)]
    role, index = next((task for task in tasks if task != ours), (None, 0))
    addresses = cluster.jobs.get(role or "", [])
    if index < len(addresses):
        summary = f"{task_name(role or '', index)} at {addresses[index]}: {summary}"
    return summary


@contextmanager
def cluster_failures(plan: DistributionPlan) -> Iterator[None]:
    """Turn TensorFlow's errors from a failed collective step (a worker died, hung past the
    timeout, or dropped its connection) into one ClusterError sentence; no-op off a cluster."""
    if plan.cluster is None:
        yield
        return
    tf = require("tensorflow")
    failures = (
        tf.errors.UnavailableError,
        tf.errors.DeadlineExceededError,
        tf.errors.CancelledError,
        tf.errors.AbortedError,
    )
    try:
        yield
    except failures as exc:
        raise ClusterError(
            f"{plan.cluster.name.capitalize()} stopped: the cluster failed during a step "
            f"({_failure_summary(plan.cluster, exc.message)}); restart every worker."
        ) from exc


@dataclass(frozen=True, kw_only=True)
class StrategyBlock:
    """The `strategy` block of a model card or benchmark: name, workers, replicas, devices
    (this worker's), and for a cluster which task this was, its address, whether it is the
    chief and every task's address by role."""

    name: str
    workers: int = 1
    replicas: int = 1
    devices: list[str]
    task: str | None = optional_key()
    address: str | None = optional_key()
    is_chief: bool | None = optional_key()
    cluster: dict[str, list[str]] | None = optional_key()


def describe_strategy(plan: DistributionPlan, strategy: Any) -> StrategyBlock:
    """The `strategy` block of a model card or benchmark (see StrategyBlock)."""
    cluster = plan.cluster
    return StrategyBlock(
        name=plan.name,
        workers=cluster.workers if cluster else 1,
        replicas=int(strategy.num_replicas_in_sync),
        devices=strategy_devices(strategy),
        task=cluster.name if cluster else None,
        address=cluster.address if cluster else None,
        is_chief=cluster.is_chief if cluster else None,
        cluster=cluster.jobs if cluster else None,
    )
