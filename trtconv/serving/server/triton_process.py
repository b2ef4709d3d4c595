"""Triton Inference Server as a child process: the `tritonserver` binary and Python backend
that PyTriton's wheel carries (triton_install.py), a model repository written in a
workspace that is removed on the way out, and the model run by triton_model.py inside
the backend's own processes.

Stopping sends SIGINT: Triton stops accepting new requests and connections, answers those in
flight within `exit_timeout_s`, unloads the model (each instance records its traffic) and
exits; one that outlives that gets SIGKILL with its process group. Triton gets SIGKILL from the
kernel when trtconv ends without stopping it (killed outright), and its model instances end
with it; what that leaves behind (the workspace, the backend's shared-memory regions) the next
server's start removes (`sweep_leftovers`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import trtconv
from trtconv.core.errors import TrtconvError
from trtconv.core.processes import dies_with_this_process
from trtconv.options.serving import LOOPBACK
from trtconv.serving.repository.triton_config import ModelConfigSpec, render_config
from trtconv.serving.server.batch_runner import Traffic
from trtconv.serving.server.triton_install import Binaries, binaries

LOG = logging.getLogger(__name__)
START_TIMEOUT_S = 600.0  # a large native model loads in the backend before Triton is ready
STOP_MARGIN_S = 30.0  # beyond Triton's own exit timeout, before it is killed
POLL_S = 0.1
LOG_TAIL_LINES = 20
ERROR_LINES = 3
TRITON_ERROR = re.compile(r"^E\d{4} ")  # glog's error lines: E1128 12:20:36.889883 ...
WORKSPACE_PREFIX = "trtconv-serve-"  # in the temporary folder
MAKING_PREFIX = ".trtconv-serve-new-"  # a workspace until its lock is held
LOCK_FILE = "serving.lock"  # held while the workspace's server runs: a sweep leaves it alone
SHM_DIR = Path("/dev/shm")  # where the Python backend's shared-memory regions live
# The workspaces of servers running now: a forced stop removes them (remove_live_workspaces).
LIVE_WORKSPACES: set[Path] = set()
ACCESS_HEADER = "triton-access-token"  # the header Triton's restricted API checks
GUARDED_ENDPOINTS = ("shared-memory", "model-repository", "trace", "logging")
# The repository's model.py: trtconv's model, told where its settings are.
MODEL_PY = """from pathlib import Path

from trtconv.serving.server.triton_model import TritonPythonModel as Model


class TritonPythonModel(Model):
    settings_file = str(Path(__file__).with_name("settings.json"))
"""


class ServingError(TrtconvError):
    """The server could not start or stopped on its own (exit 1)."""


@dataclass(frozen=True)
class Launch:
    """How Triton is started: where it listens, how long its drain may take, its log, and the
    access key inference needs (None: inference open; the admin endpoints are always guarded)."""

    host: str
    http_port: int
    grpc_port: int
    metrics_port: int
    exit_timeout_s: int
    log_file: Path | None = None
    log_verbose: int = 0
    api_key: str | None = None
    metrics_host: str | None = None  # where the metrics listen (None: `host`)


@dataclass(frozen=True)
class InstanceSettings:
    """What each model instance is told (triton_model.py): the model, its intra-op
    threads (None: the runner's default) and device, whether requests are batched, the largest
    batch to warm up at, the folder it records its traffic in (the workspace's), and the shadow
    check it offers samples to."""

    model: str
    threads: int | None
    device: str
    batched: bool
    largest: int
    traffic: str = ""
    # The shadow check (shadow/link.py): the share of requests offered, where and with
    # which key (hex); the native SavedModel (and signature) served once the check says so.
    shadow_rate: float = 0.0
    shadow_address: str = ""
    shadow_key: str = ""
    fallback_model: str = ""
    fallback_signature: str = ""

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def load(cls, path: Path) -> InstanceSettings:
        return cls(**json.loads(path.read_text()))


class TritonProcess:
    """A started `tritonserver`; `traffic` is what its model instances recorded, read once it
    has stopped."""

    def __init__(self, process: subprocess.Popen[bytes], workspace: Path) -> None:
        self.process = process
        self.workspace = workspace
        self.traffic = Traffic()
        self.ready = False  # its model loaded and warmed up (wait_ready)

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self) -> str:
        """What Triton's output (its log unless --log-file took it) says went wrong: its error
        lines when it has some (glog's `E` lines), else its last lines."""
        try:
            lines = (self.workspace / "triton.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        errors = [line for line in lines if TRITON_ERROR.match(line)]
        chosen = errors[-ERROR_LINES:] if errors else lines[-LOG_TAIL_LINES:]
        return " | ".join(line.strip() for line in chosen if line.strip())

    def stop(self, timeout_s: float) -> None:
        """SIGINT, then SIGKILL for its process group after `timeout_s`; its traffic read."""
        if self.alive():
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        records = sorted((self.workspace / "traffic").glob("*.json"))
        if self.ready and not records:  # an instance that failed in finalize, or was killed
            LOG.warning("Triton's model instances recorded no traffic: %s", self.log_tail())
        for record in records:
            self.traffic.add(Traffic.load(record))


@contextlib.contextmanager
def triton_process(
    launch: Launch, model: ModelConfigSpec, settings: InstanceSettings
) -> Iterator[TritonProcess]:
    """Triton serving `model`, run by triton_model.py with `settings`, until the block ends,
    ready when yielded. Raises ServingError with the end of Triton's log when it does not get
    ready."""
    found = binaries()
    with locked_workspace() as workspace:
        write_repository(workspace, model, settings, found)
        with (workspace / "triton.log").open("wb") as log:
            process = subprocess.Popen(
                dies_with_this_process(command(launch, workspace, found)), stdout=log,
                stderr=subprocess.STDOUT, env=environment(found), start_new_session=True,
            )  # its own session: a terminal's Ctrl-C reaches trtconv, which stops it # fmt: skip
        triton = TritonProcess(process, workspace)
        try:
            wait_ready(triton, launch)
            yield triton
        finally:
            triton.stop(launch.exit_timeout_s + STOP_MARGIN_S)


@contextlib.contextmanager
def locked_workspace() -> Iterator[Path]:
    """A new workspace, its lock held until the block ends, then removed with its server's
    shared-memory regions; first, what servers killed outright left (`sweep_leftovers`).

    Made under another name and renamed once locked, so a sweep never finds it unlocked."""
    sweep_leftovers()
    making = Path(tempfile.mkdtemp(prefix=MAKING_PREFIX))
    with (making / LOCK_FILE).open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        workspace = making.with_name(WORKSPACE_PREFIX + making.name.removeprefix(MAKING_PREFIX))
        making.rename(workspace)
        LIVE_WORKSPACES.add(workspace)
        try:
            yield workspace
        finally:
            LIVE_WORKSPACES.discard(workspace)
            remove_server_files(workspace)


def shm_prefix(workspace: Path) -> str:
    """The prefix of the shared-memory regions of `workspace`'s server: its own (two servers
    on one machine would otherwise share regions), and known after the server is killed."""
    return f"trtconv-{workspace.name.removeprefix(WORKSPACE_PREFIX)}-"


def remove_server_files(workspace: Path) -> None:
    """`workspace` and its server's shared-memory regions (Triton removes them when it stops,
    not when it is killed)."""
    for region in SHM_DIR.glob(f"{shm_prefix(workspace)}*"):
        with contextlib.suppress(OSError):
            region.unlink()
    shutil.rmtree(workspace, ignore_errors=True)


def sweep_leftovers() -> None:
    """Remove what servers killed outright left behind: every workspace of this user whose lock
    no running server holds, with its shared-memory regions."""
    for workspace in Path(tempfile.gettempdir()).glob(f"{WORKSPACE_PREFIX}*"):
        try:
            if workspace.stat().st_uid != os.getuid():
                continue  # another user's: not ours to remove
            lock = (workspace / LOCK_FILE).open("rb")
        except OSError:
            continue  # not a workspace of this kind, or not ours to open
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its server runs
            LOG.info("removed the files of a server that was killed: %s", workspace)
            remove_server_files(workspace)


def remove_live_workspaces() -> None:
    """Remove the files of the servers running now (a forced stop, which does not wait for
    them to end on their own)."""
    for workspace in list(LIVE_WORKSPACES):
        remove_server_files(workspace)


def write_repository(
    workspace: Path, model: ModelConfigSpec, settings: InstanceSettings, found: Binaries
) -> None:
    """The model repository (config.pbtxt, model.py and its settings), the Python backend's
    folder (its library and this interpreter's stub, linked) and the folder the instances
    record their traffic in."""
    (workspace / "traffic").mkdir()
    version = workspace / "models" / model.name / "1"
    version.mkdir(parents=True)
    (version.parent / "config.pbtxt").write_text(render_config(model))
    (version / "model.py").write_text(MODEL_PY)
    dataclasses.replace(settings, traffic=str(workspace / "traffic")).save(
        version / "settings.json"
    )
    backend = workspace / "backends" / "python"
    backend.mkdir(parents=True)
    for source in found.python_backend.iterdir():
        if source.is_file():
            (backend / source.name).symlink_to(source)
    (backend / "triton_python_backend_stub").symlink_to(found.stub)


def command(launch: Launch, workspace: Path, found: Binaries) -> list[str]:
    """tritonserver's command line: the repository, the addresses, the drain, the log, the
    guarded endpoints (a random key when none is given: nobody reaches them) and a shared-memory
    prefix of its own (two servers on one machine would otherwise share regions)."""
    key = launch.api_key or secrets.token_urlsafe(32)
    guarded = ",".join([*GUARDED_ENDPOINTS, *(["inference"] if launch.api_key else [])])
    restricted = f"{guarded}:{ACCESS_HEADER}={key}"
    host = launch.host
    argv = [
        str(found.server),
        f"--model-repository={workspace / 'models'}",
        f"--backend-directory={workspace / 'backends'}",
        f"--http-address={host}", f"--http-port={launch.http_port}",
        f"--grpc-address={host}", f"--grpc-port={launch.grpc_port}",
        f"--metrics-address={launch.metrics_host or host}",
        f"--metrics-port={launch.metrics_port}",
        f"--exit-timeout-secs={launch.exit_timeout_s}",
        f"--backend-config=python,shm-region-prefix-name={shm_prefix(workspace)}",
        f"--http-restricted-api={restricted}",
        f"--grpc-restricted-protocol={restricted}",
    ]  # fmt: skip
    if launch.log_file is not None:
        argv.append(f"--log-file={launch.log_file}")
    if launch.log_verbose:
        argv.append(f"--log-verbose={launch.log_verbose}")
    return argv


def environment(found: Binaries) -> dict[str, str]:
    """Triton's environment: its libraries, this interpreter's libpython first (the stub loads
    libpython3.X through the dynamic linker; a non-system interpreter's standard library needs
    its own build), this environment's `python3` first on PATH (the stub's embedded Python takes
    its prefix, and so its packages, from it) and trtconv importable."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    package_root = str(Path(trtconv.__file__).resolve().parents[1])
    return {
        **os.environ,
        **_around("LD_LIBRARY_PATH", [libdir], [str(found.libraries)]),
        **_around("PATH", [str(Path(sys.exec_prefix) / "bin")]),
        **_around("PYTHONPATH", [package_root]),
    }


def _around(variable: str, first: Sequence[str], last: Sequence[str] = ()) -> dict[str, str]:
    """`variable` (a path list) with `first` before what it holds now and `last` after it."""
    now = os.environ.get(variable, "").split(os.pathsep)
    return {variable: os.pathsep.join(p for p in [*first, *now, *last] if p)}


def reach(host: str) -> str:
    """The address this process reaches a server bound to `host` at (loopback for any)."""
    return LOOPBACK if host in ("0.0.0.0", "::", "localhost") else host


def wait_ready(triton: TritonProcess, launch: Launch) -> None:
    """Until Triton says ready (its model loaded and warmed up). Raises ServingError when it
    exits first or takes longer than START_TIMEOUT_S."""
    url = f"http://{reach(launch.host)}:{launch.http_port}/v2/health/ready"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not triton.alive():
            raise ServingError(f"Triton could not serve the model: {triton.log_tail()}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status == 200:
                triton.ready = True
                return
        time.sleep(POLL_S)
    raise ServingError(f"Triton was not ready within {START_TIMEOUT_S:.0f} s: {triton.log_tail()}")
