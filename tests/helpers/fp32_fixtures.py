"""Models whose float32 outputs meet the fp32 rule in their own ways, with the weights to compute
what they should output in numpy float64 (independently of TensorFlow and the backends):

- a price regressor (Keras): outputs of about 2.5e5, where one float32 step is 0.0156;
- a `tf.Module` with logits in the hundreds (classes, no softmax);
- an onset map (`tf.Module`, a sigmoid per frame and bin) whose logits are sums of terms in
  the hundreds that cancel: float32 keeps the rounding of the terms, so TensorFlow and another
  runtime summing in another order differ by about 1e-3 in its probabilities (as basic-pitch's
  onsets did on an AVX2 EPYC), while their decisions agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PRICE_FEATURES, LOGIT_FEATURES, CLASSES = 8, 20, 10
ONSET_FRAMES, ONSET_FEATURES, ONSET_BINS, ONSET_HIDDEN = 32, 16, 8, 64


@dataclass(frozen=True)
class Fixture:
    """A SavedModel, the data it is converted with (an .npz of `inputs`), and its outputs in
    numpy float64 on those inputs."""

    path: Path
    data: Path
    inputs: np.ndarray
    expected: np.ndarray


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)


def build_price_model(work: Path, samples: int = 256) -> Fixture:
    """A Keras regressor (8 features -> price), exported with `model.export`; its data holds
    one array named `features`."""
    import keras

    rng = np.random.default_rng(0)
    inputs = keras.Input((PRICE_FEATURES,), name="features")
    seeded = [keras.initializers.GlorotUniform(seed=seed) for seed in range(3)]  # same every run
    hidden = keras.layers.Dense(32, "relu", kernel_initializer=seeded[0])(inputs)
    hidden = keras.layers.Dense(32, "relu", kernel_initializer=seeded[1])(hidden)
    price = keras.layers.Dense(1, kernel_initializer=seeded[2], name="price")(hidden)
    model = keras.Model(inputs, price)
    weights = model.get_weights()
    weights[-2] = weights[-2] * 2e4  # dollars: prices between about 2.2e5 and 2.7e5
    weights[-1] = np.full_like(weights[-1], 2.5e5)
    model.set_weights(weights)
    model.export(str(work / "price"), verbose=False)
    x = rng.normal(size=(samples, PRICE_FEATURES)).astype(np.float32)
    data = work / "price.npz"
    np.savez(data, features=x)
    w = [np.asarray(a, np.float64) for a in weights]
    expected = _relu(_relu(x @ w[0] + w[1]) @ w[2] + w[3]) @ w[4] + w[5]
    return Fixture(work / "price", data, x, expected)


def build_logits_module(work: Path, samples: int = 256) -> Fixture:
    """A `tf.Module` whose serving signature gives class logits in the hundreds."""
    import tensorflow as tf

    rng = np.random.default_rng(1)
    w1 = rng.normal(0, 1.0, (LOGIT_FEATURES, 64)).astype(np.float32)
    w2 = rng.normal(0, 8.0, (64, CLASSES)).astype(np.float32)
    bias = rng.normal(0, 50, CLASSES).astype(np.float32)

    class Logits(tf.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.w1, self.w2, self.bias = tf.Variable(w1), tf.Variable(w2), tf.Variable(bias)

        @tf.function(input_signature=[tf.TensorSpec([None, LOGIT_FEATURES], tf.float32)])
        def serve(self, features: Any) -> dict[str, Any]:
            hidden = tf.nn.relu(tf.matmul(features, self.w1))
            return {"logits": tf.matmul(hidden, self.w2) + self.bias}

    module = Logits()
    tf.saved_model.save(module, str(work / "logits"), signatures={"serving_default": module.serve})
    x = rng.normal(size=(samples, LOGIT_FEATURES)).astype(np.float32)
    data = work / "logits.npz"
    np.savez(data, features=x)
    expected = _relu(x.astype(np.float64) @ w1) @ w2.astype(np.float64) + bias
    return Fixture(work / "logits", data, x, expected)


def cancelling_weights(seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """(w1, w2) whose product is small while their terms are not: w1's entries are about 30,
    so a frame's hidden values are about 100; most of w2 lies in w1's null space (w1 @ w2 keeps
    only a small part), so the logits are sums of terms of about 100 that cancel to about 3."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(0, 30.0, (ONSET_FEATURES, ONSET_HIDDEN))
    null = np.linalg.svd(w1)[2][ONSET_FEATURES:].T  # hidden x (hidden - features): w1 @ null = 0
    cancelling = null @ rng.normal(0, 10.0, (ONSET_HIDDEN - ONSET_FEATURES, ONSET_BINS))
    kept = rng.normal(0, 3.0 / np.sqrt(ONSET_HIDDEN) / 30.0, (ONSET_HIDDEN, ONSET_BINS))
    return w1.astype(np.float32), (cancelling + kept).astype(np.float32)


def build_onset_module(work: Path, samples: int = 400) -> Fixture:
    """A `tf.Module` giving an onset map `[N, frames, bins]` (a sigmoid per element) through
    the cancelling weights; its data holds one array named `audio`."""
    import tensorflow as tf

    w1, w2 = cancelling_weights()

    class Onset(tf.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.w1, self.w2 = tf.Variable(w1), tf.Variable(w2)

        @tf.function(
            input_signature=[tf.TensorSpec([None, ONSET_FRAMES, ONSET_FEATURES], tf.float32)]
        )
        def serve(self, audio: Any) -> dict[str, Any]:
            hidden = tf.tensordot(audio, self.w1, 1)
            return {"onset": tf.sigmoid(tf.tensordot(hidden, self.w2, 1))}

    module = Onset()
    tf.saved_model.save(module, str(work / "onset"), signatures={"serving_default": module.serve})
    x = np.random.default_rng(3).normal(size=(samples, ONSET_FRAMES, ONSET_FEATURES))
    x = x.astype(np.float32)
    data = work / "onset.npz"
    np.savez(data, audio=x)
    logits = x.astype(np.float64) @ (w1.astype(np.float64) @ w2.astype(np.float64))
    return Fixture(work / "onset", data, x, 1.0 / (1.0 + np.exp(-logits)))
