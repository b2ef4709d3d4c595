"""`trtconv serve`: a real Triton server (PyTriton) on loopback in front of an int8 artifact,
asked by tritonclient; every process it starts is ended and checked gone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.serving_fixtures import (
    artifact,
    command_of,
    left_running,
    pytriton_or_skip,
    serving_line,
    workspace_of,
)
from trtconv.core.processes import alive, descendants

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # converts a small model and starts a Triton server

REPOSITORY = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60


@pytest.fixture(autouse=True)
def _serving_can_run() -> None:
    """Every test here serves: skip them all, saying why, where serving cannot run."""
    pytriton_or_skip()


@contextlib.contextmanager
def serving(
    *flags: str, started: list[int] | None = None, model: Path | None = None
) -> Iterator[subprocess.Popen[str]]:
    """`trtconv serve` of `model` (default: the int8 ort artifact) as model `digits` with
    `flags`, in its own session. Whatever is still running at the end (its processes, and
    `started`: those seen below it while serving) is killed."""
    pytriton_or_skip()
    model = model or artifact("ort", "int8")
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    argv = [sys.executable, "-m", "trtconv", "serve", str(model), "--name", "digits", *flags]
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # flags beside values # fmt: skip
    try:
        yield process
    finally:
        for pid in [process.pid, *descendants(process.pid), *(started or [])]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.wait(STOP_TIMEOUT_S)


@pytest.fixture
def server() -> Iterator[tuple[subprocess.Popen[str], str, list[int]]]:
    """`trtconv serve` of the int8 ort artifact: (process, model name, every process below it
    once serving)."""
    started: list[int] = []
    with serving(started=started) as process:
        yield process, _wait_for_announcement(process), started


def shm_regions_of(pids: list[int]) -> list[Path]:
    """The shared-memory regions of the tritonserver among `pids`, by the prefix its command
    gives its Python backend."""
    option = "--backend-config=python,shm-region-prefix-name="
    for pid in pids:
        for argument in command_of(pid):
            if argument.startswith(option):
                return sorted(Path("/dev/shm").glob(f"{argument.removeprefix(option)}*"))
    raise AssertionError("no tritonserver among the processes below serve")


def _wait_for_announcement(process: subprocess.Popen[str]) -> str:
    """The URL from the "serving NAME at URL" line on stderr."""
    line = serving_line(process, "digits", START_TIMEOUT_S)
    return line.split(" at http://", 1)[1].split()[0]


def test_serves_the_int8_artifact_like_onnx_runtime_and_stops_on_sigterm(
    server: tuple[subprocess.Popen[str], str, list[int]],
) -> None:
    import onnxruntime as ort
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    process, url, started = server
    started += descendants(process.pid)
    assert started, "the Triton server runs as a child process"
    workspace = workspace_of(started)
    assert (workspace / "models" / "digits" / "config.pbtxt").is_file()
    images = np.random.default_rng(0).random((3, 32, 32, 3), dtype=np.float32)
    session = ort.InferenceSession(
        str(artifact("ort", "int8") / "model.onnx"), providers=["CPUExecutionProvider"]
    )
    expected = session.run(["probabilities"], {"image": images})[0]

    client = http.InferenceServerClient(url)
    try:
        assert client.is_server_live() and client.is_model_ready("digits")
        metadata = client.get_model_metadata("digits")
        assert [i["name"] for i in metadata["inputs"]] == ["image"]
        assert np.allclose(_infer(client, images), expected, atol=1e-5, rtol=0)
        with pytest.raises(InferenceServerException, match="unexpected shape"):
            _infer(client, images[:, :, :31])
        with pytest.raises(InferenceServerException, match="FP64"):
            _infer(client, images.astype(np.float64))
        assert np.allclose(_infer(client, images[:1]), expected[:1], atol=1e-5, rtol=0)
    finally:
        client.close()  # an open connection would hold the server's drain until its time-out

    process.send_signal(signal.SIGTERM)
    assert process.wait(STOP_TIMEOUT_S) == 143
    assert process.stderr is not None and "terminated (SIGTERM)" in process.stderr.read()
    assert left_running(started) == []
    assert not workspace.exists()  # the repository it wrote for Triton is removed


def _infer(client: object, images: np.ndarray) -> np.ndarray:
    import tritonclient.http as http
    from tritonclient.utils import np_to_triton_dtype

    request = http.InferInput("image", list(images.shape), np_to_triton_dtype(images.dtype))
    request.set_data_from_numpy(images)
    response = client.infer("digits", [request])  # type: ignore[attr-defined]
    return np.asarray(response.as_numpy("probabilities"))


def test_a_key_guards_inference_two_instances_serve_and_triton_logs_to_its_file(
    tmp_path: Path,
) -> None:
    import json
    import re

    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    key, log = tmp_path / "key", tmp_path / "triton.log"
    key.write_text("s3cret\n")
    guarded = ("--host", "127.0.0.1", "--api-key-file", str(key), "--stop-after", "30")
    logged = ("--log-file", str(log), "--log-verbose", "1", "--json", "--instances", "2")
    with serving(*guarded, *logged) as process:
        assert process.stderr is not None
        url = ""
        for line in process.stderr:
            found = re.search(r"serving digits at http://(\S+) \(gRPC .*metrics (\S+)\)", line)
            if found:
                url = found.group(1)
                assert found.group(2).endswith("/metrics")  # the metrics URL, announced
                break
        images = np.zeros((1, 32, 32, 3), dtype=np.float32)
        client = http.InferenceServerClient(url)
        try:
            with pytest.raises(InferenceServerException, match="restricted"):
                _infer(client, images)
            request = http.InferInput("image", [1, 32, 32, 3], "FP32")
            request.set_data_from_numpy(images)
            answer = client.infer("digits", [request], headers={"triton-access-token": "s3cret"})
            assert answer.as_numpy("probabilities").shape == (1, 10)
            groups = client.get_model_config("digits")["instance_group"]
            assert sum(group["count"] for group in groups) == 2
        finally:
            client.close()
        # Two instances: two Python-backend processes, each with its own runner.
        below = descendants(process.pid)
        stubs = [pid for pid in below if command_of(pid)[0].endswith("python_backend_stub")]
        assert len(stubs) == 2
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=STOP_TIMEOUT_S)
        assert process.returncode == 143, err
        assert "warning: inference" not in err  # loopback, and a key besides
        summary = json.loads(out)
        assert summary["requests"] == 1 and summary["instances"] == 2  # warm-up not counted
        assert log.is_file() and log.stat().st_size > 0


def test_sigterm_drains_not_ready_and_a_second_one_ends_at_once() -> None:
    import http.client
    import time

    started: list[int] = []
    with serving("--drain-timeout", "60", started=started) as process:
        host, port = _wait_for_announcement(process).split(":")
        started += descendants(process.pid)
        workspace, regions = workspace_of(started), shm_regions_of(started)
        assert regions  # the Python backend's, which Triton removes only when it stops itself
        # A connection left open is in flight for Triton: it holds the drain to its time-out.
        held = http.client.HTTPConnection(host, int(port), timeout=5)
        held.request("GET", "/v2/health/live")
        assert held.getresponse().read() is not None
        process.send_signal(signal.SIGTERM)
        answers: list[int | None] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not answers or answers[-1] == 200):
            probe = http.client.HTTPConnection(host, int(port), timeout=2)
            try:
                probe.request("GET", "/v2/health/ready")
                answers.append(probe.getresponse().status)
            except OSError:
                answers.append(None)
            finally:
                probe.close()
            time.sleep(0.05)
        # Draining: Triton stops answering new connections (a readiness probe or a load
        # balancer's health check is refused), while the process still drains.
        assert answers[-1] != 200, answers
        time.sleep(0.5)
        assert process.poll() is None
        second = time.monotonic()
        process.send_signal(signal.SIGTERM)
        assert process.wait(STOP_TIMEOUT_S) == 143
        assert time.monotonic() - second < 5  # not the 60 s drain
        assert process.stderr is not None
        assert "second signal: stopped at once" in process.stderr.read()
        held.close()
        assert left_running(started) == []
        assert not workspace.exists()  # removed by the forced stop too
        assert not [region for region in regions if region.exists()]


def test_a_port_in_use_is_one_sentence_from_tritons_error_lines() -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        with serving("--http-port", port, "--stop-after", "30") as process:
            _, err = process.communicate(timeout=START_TIMEOUT_S)
    assert process.returncode == 1, err
    (line,) = [line for line in err.splitlines() if line.startswith("trtconv: error:")]
    assert "Triton could not serve the model" in line and "already in use" in line
    assert "+------" not in line  # Triton's error lines, not its start-up tables


def nan_refuser(path: Path) -> Path:
    """A SavedModel that fails a request holding a NaN: y = check_numerics(x) * 2 for x
    float32[?, 4] (Triton's checks, on names, dtypes and shapes, let it through)."""
    import tensorflow as tf

    class NanRefuser(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
        def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"y": tf.debugging.check_numerics(x, "a NaN in x") * 2.0}

    module = NanRefuser()
    tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
    return path


def test_a_request_the_model_fails_gets_its_own_error_and_the_others_their_answers(
    tmp_path: Path,
) -> None:
    import json

    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    def request(row: np.ndarray) -> http.InferInput:
        tensor = http.InferInput("x", list(row.shape), "FP32")
        tensor.set_data_from_numpy(row)
        return tensor

    good, bad = np.arange(4, dtype=np.float32)[None], np.full((1, 4), np.nan, np.float32)
    # A long queue delay: the two requests sent at once are one batch, which fails and is
    # run again request by request.
    flags = ("--instances", "1", "--queue-delay-us", "100000", "--stop-after", "60", "--json")
    with serving(*flags, model=nan_refuser(tmp_path / "model")) as process:
        client = http.InferenceServerClient(_wait_for_announcement(process), concurrency=2)
        try:
            pending = [client.async_infer("digits", [request(row)]) for row in (bad, good)]
            with pytest.raises(InferenceServerException, match="a NaN in x"):
                pending[0].get_result()
            assert np.array_equal(pending[1].get_result().as_numpy("y"), good * 2)
        finally:
            client.close()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=STOP_TIMEOUT_S)
    assert process.returncode == 143, err
    summary = json.loads(out)
    assert (summary["requests"], summary["failed_requests"]) == (2, 1)
    assert summary["retried_requests"] == 2 and summary["batches"] == {"1": 1}
