"""Small real models and artifacts the serving tests share, built once per session."""

from __future__ import annotations

import functools
from pathlib import Path

from convert_fixtures import DIGITS32, _save_signatures, cnn32, digits32_npz, work_dir


@functools.cache
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


@functools.cache
def artifact(backend: str, precision: str) -> Path:
    """small_model converted by trtconv (calibrated and validated on digits32; verdicts on point
    figures: these tests are about serving, not about how many samples decide a verdict)."""
    from trtconv import api

    output = work_dir() / f"serving-{backend}-{precision}"
    options = api.ConvertOptions(
        small_model(), precision, backend=backend, output=output,
        calib_data=str(digits32_npz()), calib_samples=200, validate_samples=200, confidence=0,
    )  # fmt: skip
    api.convert(options)
    return output
