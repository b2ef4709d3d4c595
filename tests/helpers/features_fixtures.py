"""Gaussian features with four classes and a small MLP trained on them, for tests (and
examples/calibration_samples.py) that need a model and data no file of the tests holds."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.helpers.model_cache import built_once, shared_dir
from trtconv.calib.sources import ArraySet

FEATURES, CLASSES = 16, 4


def features(samples: int, seed: int) -> ArraySet:
    """Gaussian features labelled by which of four fixed directions they lean to most."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(samples, FEATURES)).astype(np.float32)
    directions = np.random.default_rng(99).normal(size=(FEATURES, CLASSES))
    return ArraySet({"x": x}, (x @ directions).argmax(axis=1).astype(np.int64), f"f{seed}")


@built_once
def mlp() -> Path:
    """A 16-feature MLP trained on 2,000 samples none of the tests' files hold; no model card."""
    import keras

    from trtconv.train.export import export_saved_model

    keras.utils.set_random_seed(0)
    train = features(2000, seed=1)
    model = keras.Sequential(
        [keras.Input((FEATURES,)), keras.layers.Dense(32, "relu"), keras.layers.Dense(CLASSES)]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    model.fit(train.x, train.labels, epochs=8, batch_size=64, verbose=0)
    path = shared_dir() / "mlp16" / "saved_model"
    export_saved_model(model, path, "features", (FEATURES,))
    return path
