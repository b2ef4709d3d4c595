"""A TF1-era model as users have them: a `tf.compat.v1` graph with an `is_training` bool flag
and batch normalization (`tf.cond` between batch and moving statistics), exported as a v1
SavedModel, and its expected outputs computed here with numpy from its variables' values.

`flag="input"`: the flag is a signature input (a bool scalar, as TF1 code exports it);
`flag="default"`: a `placeholder_with_default(False)` kept out of the signature.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

FEATURES, HIDDEN, TAGS = 12, 16, 5
EPSILON = 1e-3


@dataclass(frozen=True)
class Tf1Model:
    """A v1 SavedModel and its weights (to compute expected outputs independently)."""

    path: Path
    weights: dict[str, np.ndarray]

    def expected(self, x: np.ndarray) -> np.ndarray:
        """The tags at inference (is_training false: moving statistics), in numpy float64."""
        w = self.weights
        hidden = np.maximum(x.astype(np.float64) @ w["w1"] + w["b1"], 0.0)
        normed = (hidden - w["moving_mean"]) / np.sqrt(w["moving_var"] + EPSILON)
        logits = (normed * w["gamma"] + w["beta"]) @ w["w2"] + w["b2"]
        return 1.0 / (1.0 + np.exp(-logits))


def build_tf1_model(path: Path, flag: str = "input", seed: int = 0) -> Tf1Model:
    """Write the v1 SavedModel to `path` (see the module docstring for `flag`)."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    weights = {
        "w1": rng.normal(0, 0.5, (FEATURES, HIDDEN)),
        "b1": rng.normal(0, 0.1, HIDDEN),
        "gamma": rng.uniform(0.5, 1.5, HIDDEN),
        "beta": rng.normal(0, 0.1, HIDDEN),
        "moving_mean": rng.uniform(0.0, 0.5, HIDDEN),
        "moving_var": rng.uniform(0.5, 1.5, HIDDEN),
        "w2": rng.normal(0, 0.5, (HIDDEN, TAGS)),
        "b2": rng.normal(0, 0.1, TAGS),
    }
    v1 = tf.compat.v1
    with tf.Graph().as_default(), v1.Session() as session:
        x = v1.placeholder(tf.float32, [None, FEATURES], name="x")
        if flag == "input":
            is_training = v1.placeholder(tf.bool, [], name="is_training")
        else:
            is_training = v1.placeholder_with_default(False, [], name="is_training")
        var = {
            name: v1.get_variable(name, initializer=value.astype(np.float32))
            for name, value in weights.items()
        }
        hidden = tf.nn.relu(tf.matmul(x, var["w1"]) + var["b1"])
        mean, variance = tf.nn.moments(hidden, [0])
        statistics = tf.cond(
            is_training, lambda: (mean, variance), lambda: (var["moving_mean"], var["moving_var"])
        )
        normed = tf.nn.batch_normalization(
            hidden, statistics[0], statistics[1], var["beta"], var["gamma"], EPSILON
        )
        tags = tf.sigmoid(tf.matmul(normed, var["w2"]) + var["b2"], name="tags")
        session.run(v1.global_variables_initializer())
        inputs = {"x": x, "is_training": is_training} if flag == "input" else {"x": x}
        signature = v1.saved_model.signature_def_utils.predict_signature_def(
            inputs=inputs, outputs={"tags": tags}
        )
        builder = v1.saved_model.Builder(str(path))
        builder.add_meta_graph_and_variables(
            session,
            [v1.saved_model.tag_constants.SERVING],
            signature_def_map={"serving_default": signature},
        )
        builder.save()
    return Tf1Model(Path(path), weights)


# The tagger: frames of features in, per-frame tags out (a decision map [N, FRAMES, TAGS]).
FRAMES, BINS, CHANNELS = 24, 12, 16


@dataclass(frozen=True)
class Tf1Tagger:
    """A v1 SavedModel shaped like a TF1 audio tagger, and its weights."""

    path: Path
    weights: dict[str, np.ndarray]

    def expected(self, x: np.ndarray) -> np.ndarray:
        """The per-frame tags at inference (moving statistics), in numpy float64."""
        w = self.weights
        hidden = x.astype(np.float64)
        for layer in ("1", "2"):
            padded = np.pad(hidden, ((0, 0), (1, 1), (0, 0)))
            kernel = w[f"kernel{layer}"]
            conv = sum(padded[:, k : k + FRAMES] @ kernel[k] for k in range(3))
            scale = w[f"gamma{layer}"] / np.sqrt(w[f"variance{layer}"] + EPSILON)
            hidden = np.maximum((conv - w[f"mean{layer}"]) * scale + w[f"beta{layer}"], 0.0)
        logits = hidden @ w["dense"] + w["bias"]
        return 1.0 / (1.0 + np.exp(-logits))


def build_tf1_tagger(path: Path, seed: int = 0, dropout: bool = False) -> Tf1Tagger:
    """Two 1-D convolutions over frames, each followed by a batch norm whose statistics a bool
    `is_training` input chooses (`tf.cond` around a fused batch norm in each branch, as TF1's
    `layers.batch_normalization(training=is_training)` builds it), then per-frame sigmoid tags.
    Written as a v1 SavedModel with the flag a signature input. `dropout`: a dropout on the
    same flag before the tags, as TF1's `layers.dropout(training=is_training)` builds it (a
    `dropout/cond` whose false branch is an `Identity`); the identity at inference."""
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}
    for layer, inputs in (("1", BINS), ("2", CHANNELS)):
        weights[f"kernel{layer}"] = rng.normal(0, 0.4, (3, inputs, CHANNELS))
        weights[f"gamma{layer}"] = rng.uniform(0.5, 1.5, CHANNELS)
        weights[f"beta{layer}"] = rng.normal(0, 0.1, CHANNELS)
        weights[f"mean{layer}"] = rng.normal(0, 0.2, CHANNELS)
        weights[f"variance{layer}"] = rng.uniform(0.5, 2.0, CHANNELS)
    weights["dense"] = rng.normal(0, 0.4, (CHANNELS, TAGS))
    weights["bias"] = np.full(TAGS, -1.0)
    v1 = tf.compat.v1
    with tf.Graph().as_default(), v1.Session() as session:
        x = v1.placeholder(tf.float32, [None, FRAMES, BINS], name="x")
        is_training = v1.placeholder(tf.bool, [], name="is_training")
        var = {
            name: v1.get_variable(name, initializer=value.astype(np.float32))
            for name, value in weights.items()
        }
        hidden = x
        for layer in ("1", "2"):
            conv = tf.expand_dims(tf.nn.conv1d(hidden, var[f"kernel{layer}"], 1, "SAME"), 1)
            gamma, beta = var[f"gamma{layer}"], var[f"beta{layer}"]

            def batch(conv: object = conv, gamma: object = gamma, beta: object = beta) -> object:
                return v1.nn.fused_batch_norm(conv, gamma, beta, epsilon=EPSILON)[0]

            def moving(conv: object = conv, gamma: object = gamma, beta: object = beta,
                       layer: str = layer) -> object:  # fmt: skip
                mean, variance = var[f"mean{layer}"], var[f"variance{layer}"]
                return v1.nn.fused_batch_norm(
                    conv, gamma, beta, mean, variance, EPSILON, is_training=False
                )[0]

            normed = tf.cond(is_training, batch, moving, name=f"batch_normalization_{layer}/cond")
            hidden = tf.nn.relu(tf.squeeze(normed, 1))
        if dropout:
            with tf.name_scope("dropout"):
                kept = hidden
                hidden = tf.cond(
                    is_training, lambda: tf.nn.dropout(kept, rate=0.5), lambda: tf.identity(kept)
                )
        logits = tf.tensordot(hidden, var["dense"], 1) + var["bias"]
        tags = tf.sigmoid(logits, name="tags")
        session.run(v1.global_variables_initializer())
        signature = v1.saved_model.signature_def_utils.predict_signature_def(
            inputs={"x": x, "is_training": is_training}, outputs={"tags": tags}
        )
        builder = v1.saved_model.Builder(str(path))
        builder.add_meta_graph_and_variables(
            session,
            [v1.saved_model.tag_constants.SERVING],
            signature_def_map={"serving_default": signature},
        )
        builder.save()
    return Tf1Tagger(Path(path), weights)
