"""`trtconv serve`: a real Triton server (PyTriton) on loopback in front of an int8 artifact,
asked by tritonclient; every process it starts is ended and checked gone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from serving_fixtures import alive, artifact, descendants, pytriton_or_skip

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # converts a small model and starts a Triton server

REPOSITORY = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 60


@pytest.fixture
def server() -> Iterator[tuple[subprocess.Popen[str], str, list[int]]]:
    """`trtconv serve` of the int8 ort artifact in its own session: (process, model name,
    every process below it once serving). Whatever is still running at the end is killed."""
    pytriton_or_skip()
    model = artifact("ort", "int8")
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    process = subprocess.Popen(
        [sys.executable, "-m", "trtconv", "serve", str(model), "--name", "digits"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    started: list[int] = []
    try:
        yield process, _wait_for_announcement(process), started
    finally:
        for pid in [process.pid, *descendants(process.pid), *started]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.wait(STOP_TIMEOUT_S)


def _wait_for_announcement(process: subprocess.Popen[str]) -> str:
    """The URL from the "serving NAME at URL" line on stderr."""
    import selectors
    import time

    assert process.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and selector.select(deadline - time.monotonic()):
        line = process.stderr.readline()
        if not line:
            break
        if "serving digits at http://" in line:
            return line.split(" at http://", 1)[1].split()[0]
    process.kill()
    raise AssertionError(f"no 'serving' line within {START_TIMEOUT_S} s: {process.stderr.read()}")


def test_serves_the_int8_artifact_like_onnx_runtime_and_stops_on_sigterm(
    server: tuple[subprocess.Popen[str], str, list[int]],
) -> None:
    import onnxruntime as ort
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    process, url, started = server
    started += descendants(process.pid)
    assert started, "the Triton server runs as a child process"
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
    assert [pid for pid in started if alive(pid)] == []


def _infer(client: object, images: np.ndarray) -> np.ndarray:
    import tritonclient.http as http
    from tritonclient.utils import np_to_triton_dtype

    request = http.InferInput("image", list(images.shape), np_to_triton_dtype(images.dtype))
    request.set_data_from_numpy(images)
    response = client.infer("digits", [request])  # type: ignore[attr-defined]
    return np.asarray(response.as_numpy("probabilities"))
