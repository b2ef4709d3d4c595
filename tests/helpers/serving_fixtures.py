"""Small real models and artifacts the serving tests share, built once per session."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.helpers.convert_fixtures import DIGITS32, _save_signatures, cnn32, digits32_npz
from tests.helpers.model_cache import built_once, shared_dir


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
    return _save_signatures("serving-cnn32", {"serving_default": serve}, model)


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
    return _save_signatures("serving-slow", {"serving_default": serve}, model)


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
    with --no-deps: serving/triton_install.py) or tritonclient missing."""
    from trtconv.serving.triton_install import serving_reason

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
