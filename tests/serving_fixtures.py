"""Small real models and artifacts the serving tests share, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest
from convert_fixtures import DIGITS32, _save_signatures, cnn32, digits32_npz

from tests.model_cache import built_once, shared_dir


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
def artifact(backend: str, precision: str) -> Path:
    """small_model converted by trtconv (calibrated and validated on digits32; verdicts on point
    figures: these tests are about serving, not about how many samples decide a verdict)."""
    from trtconv import api

    output = shared_dir() / f"serving-{backend}-{precision}"
    options = api.ConvertOptions(
        small_model(), precision, backend=backend, output=output,
        calib_data=str(digits32_npz()), calib_samples=200, validate_samples=200, confidence=0,
    )  # fmt: skip
    api.convert(options)
    return output


def pytriton_or_skip() -> None:
    """Skip (saying why) where PyTriton cannot be imported: its wheel needs glibc 2.35+."""
    try:
        import pytriton.triton  # noqa: F401
        import tritonclient.http  # noqa: F401
    except ImportError as exc:
        from trtconv.serving.status import doctor_section

        why = doctor_section().reason or "see trtconv doctor"
        pytest.skip(f"serving needs nvidia-pytriton and tritonclient[http] ({exc}): {why}")


def descendants(root: int) -> list[int]:
    """Every live process below `root` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
