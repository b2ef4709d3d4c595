"""How the fixture modules write what they build under shared_dir(): data as an .npz, a model
card naming a model's training data (as `trtconv train` writes one), and a SavedModel saved as
users save theirs (tf.saved_model.save of a module with serving signatures)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.helpers.model_cache import shared_dir
from trtconv.calib.sources import ArraySet


def model_card(saved_model: Path, data: Path) -> Path:
    """Say in a model card beside `saved_model` that it trained on `data` (its 80% part, the
    split `trtconv train` uses), as `trtconv train` would: convert and validate then keep the
    file's held-out part for validation. Returns `saved_model`."""
    card = {"data": {"source": str(data), "split": "held-out 20%"}}
    (saved_model.parent / "trtconv.json").write_text(json.dumps(card))
    return saved_model


def save_npz(data: ArraySet, name: str) -> Path:
    """`data` as shared_dir()/NAME with arrays x and y (its labels)."""
    path = shared_dir() / name
    np.savez(path, x=data.x, y=data.labels)
    return path


def save_serving(model: object, model_fn: object, path: Path, input_spec: object) -> Path:
    """Save `model_fn` (inputs -> dict of outputs, calling the Keras `model`) as a SavedModel
    with serving_default."""
    import tensorflow as tf

    @tf.function(input_signature=[input_spec])
    def serve(image: tf.Tensor) -> dict[str, tf.Tensor]:
        return model_fn(image)  # type: ignore[operator, no-any-return]

    module = tf.Module()
    module.serve = serve
    module.model = model  # tracked: its variables are saved with the module
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})
    return path


def save_signatures(name: str, signatures: dict[str, object], model: object) -> Path:
    """tf.saved_model.save of a module tracking `model`, with these signatures."""
    import tensorflow as tf

    module = tf.Module()
    module.model = model  # tracked: its variables are saved with the module
    path = shared_dir() / name / "saved_model"
    tf.saved_model.save(module, str(path), signatures=signatures)
    return path
