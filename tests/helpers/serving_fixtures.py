"""Small real models and artifacts the serving tests share, built once per session."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.fixture_files import save_signatures
from tests.helpers.model_cache import built_once, shared_dir
from tests.helpers.user_model_fixtures import DIGITS32, cnn32, digits32_npz

START_TIMEOUT_S = 180  # a server's start, its native model loaded in the backend on busy cores


@built_once
def small_model() -> Path:
    """cnn32 (a small Keras CNN trained briefly on digits) as a SavedModel:
    serving_default(image float32[?,32,32,3]) -> probabilities float32[?,10]."""
    import tensorflow as tf

    model = cnn32()
    spec = tf.TensorSpec([None, DIGITS32, DIGITS32, 3], tf.float32, name="image")
    serve = tf.function(
        lambda image: {"probabilities": tf.nn.softmax(model(image), axis=-1)},  # type: ignore[operator]
        input_signature=[spec],
    )
    return save_signatures("serving-cnn32", {"serving_default": serve}, model)


@built_once
def slow_model() -> Path:
    """A SavedModel whose every request costs several milliseconds (two 4096-wide dense layers
    on the flattened image, random weights, about 7.6 ms at batch 1 on 2 AVX2 cores): a server
    whose capacity, not the client's, bounds a load test on shared cores.
    serving_default(image float32[?,32,32,3]) -> probabilities float32[?,10]."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    inputs = tf.keras.Input((DIGITS32, DIGITS32, 3), name="image")
    hidden = tf.keras.layers.Flatten()(inputs)
    for _ in range(2):
        hidden = tf.keras.layers.Dense(4096, activation="relu")(hidden)
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(10)(hidden))
    spec = tf.TensorSpec([None, DIGITS32, DIGITS32, 3], tf.float32, name="image")
    serve = tf.function(
        lambda image: {"probabilities": tf.nn.softmax(model(image), axis=-1)},
        input_signature=[spec],
    )
    return save_signatures("serving-slow", {"serving_default": serve}, model)


@built_once
def typed_model() -> Path:
    """A SavedModel of several dtypes, its outputs exact functions of its inputs (no reduction
    whose order could change with the batch): serving_default(x float32[?,5], ids int64[?,6],
    mask bool[?,6], pixels uint8[?,4]) -> scaled float32, half float16, wide float64, shifted
    int32, kept bool, inverted uint8."""
    import tensorflow as tf

    specs = [
        tf.TensorSpec([None, 5], tf.float32, name="x"),
        tf.TensorSpec([None, 6], tf.int64, name="ids"),
        tf.TensorSpec([None, 6], tf.bool, name="mask"),
        tf.TensorSpec([None, 4], tf.uint8, name="pixels"),
    ]

    def serve(x: tf.Tensor, ids: tf.Tensor, mask: tf.Tensor, pixels: tf.Tensor) -> dict:
        return {
            "scaled": x * 3.0 - 1.0,
            "half": tf.cast(x, tf.float16),
            "wide": tf.cast(x, tf.float64) / 7.0,
            "shifted": tf.cast(ids * 5 + 2, tf.int32),
            "kept": tf.logical_and(mask, ids > 0),
            "inverted": 255 - pixels,
        }

    function = tf.function(serve, input_signature=specs)
    return save_signatures("serving-typed", {"serving_default": function}, tf.Module())


@built_once
def string_model() -> Path:
    """A SavedModel with a string input: serving_default(text string[?,1]) -> length
    int32[?,1] (one string a sample: Triton declares no input without dims)."""
    import tensorflow as tf

    spec = tf.TensorSpec([None, 1], tf.string, name="text")
    function = tf.function(lambda text: {"length": tf.strings.length(text)}, input_signature=[spec])
    return save_signatures("serving-strings", {"serving_default": function}, tf.Module())


@built_once
def artifact(backend: str, precision: str) -> Path:
    """small_model converted by trtconv (calibrated and validated on digits32; verdicts on point
    figures: these tests are about serving, not about how many samples decide a verdict)."""
    from trtconv import api

    output = shared_dir() / f"serving-{backend}-{precision}"
    options = api.ConvertOptions(
        small_model(),
        precision,
        backend=backend,
        output=output,
        calib_data=str(digits32_npz()),
        calib_samples=200,
        validate_samples=200,
        confidence=0,
    )
    api.convert(options)
    return output


def pytriton_or_skip() -> None:
    """Skip (saying why) where Triton cannot serve here: no glibc 2.35+, its wheel (installed
    with --no-deps: serving/server/triton_install.py) or tritonclient missing."""
    from trtconv.serving.server.triton_install import serving_reason

    reason = serving_reason()
    if reason:
        pytest.skip(f"serving cannot run here: {reason}")


def left_running(pids: list[int], within_s: float = 10.0) -> list[int]:
    """Those of `pids` still running `within_s` after the call: a stopped server's processes
    may take a moment to go (a resource tracker ends once its parent has, a killed process
    once the kernel has reaped it), one that stays is left behind."""
    import time

    from trtconv.core.processes import alive

    deadline = time.monotonic() + within_s
    left = [pid for pid in pids if alive(pid)]
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = [pid for pid in left if alive(pid)]
    return left


def serving_line(process: subprocess.Popen[str], name: str, timeout_s: float) -> str:
    """The "serving NAME at URL ..." line `trtconv serve` writes on stderr once it serves;
    the process is killed and the test fails when none comes within `timeout_s`."""
    import selectors
    import time

    assert process.stderr is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stderr, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and selector.select(deadline - time.monotonic()):
        line = process.stderr.readline()
        if not line:
            break
        if f"serving {name} at http://" in line:
            return line
    process.kill()
    raise AssertionError(f"no 'serving' line within {timeout_s} s: {process.stderr.read()}")


def command_of(pid: int) -> list[str]:
    """The command line of `pid`; [""] once it has gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return [""]


def workspace_of(pids: list[int]) -> Path:
    """The workspace (`trtconv-serve-*`) of the tritonserver among `pids`, from its command."""
    for pid in pids:
        for argument in command_of(pid):
            if argument.startswith("--model-repository="):
                return Path(argument.split("=", 1)[1]).parent
    raise AssertionError("no tritonserver among the processes below serve")


@contextlib.contextmanager
def serve_process(model: Path, *flags: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`trtconv serve MODEL FLAGS` in its own session, (process, its URL) once it serves (FLAGS
    name the model: `--name NAME`); it and every process below it are killed at the end."""
    import os
    import signal
    import sys

    from trtconv.core.processes import alive, descendants

    name = flags[flags.index("--name") + 1]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    argv = [sys.executable, "-m", "trtconv", "serve", str(model), *flags]
    process = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,
    )  # flags beside values # fmt: skip
    below: list[int] = []
    try:
        line = serving_line(process, name, START_TIMEOUT_S)
        below = descendants(process.pid)
        yield process, line.split(" at http://", 1)[1].split()[0]
    finally:
        for pid in [process.pid, *descendants(process.pid), *below]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        process.wait(START_TIMEOUT_S)
