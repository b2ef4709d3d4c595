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
