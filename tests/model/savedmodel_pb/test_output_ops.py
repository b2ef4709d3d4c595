"""The op that ends each output's graph, read from saved_model.pb without TensorFlow."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtconv.model.savedmodel_pb.output_ops import final_ops


@pytest.mark.slow  # saves a SavedModel with TensorFlow
@pytest.mark.tensorflow
def test_final_ops_follow_calls_casts_and_identities(tmp_path: Path) -> None:
    import keras
    import tensorflow as tf

    inputs = keras.Input((4,), name="x")
    hidden = keras.layers.Dense(8, activation="relu")(inputs)
    model = keras.Model(inputs, [keras.layers.Dense(3)(hidden), keras.layers.Dense(1)(hidden)])

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32, name="x")])
    def serve(x: tf.Tensor) -> dict[str, tf.Tensor]:
        logits, score = model(x, training=False)
        return {
            "probabilities": tf.nn.softmax(logits),
            "score": tf.cast(tf.cast(tf.sigmoid(score), tf.float16), tf.float32),
            "raw": logits + 1.0,
            "scaled": tf.reshape(logits, [-1, 3]),
        }

    module = tf.Module()
    module.model, module.serve = model, serve
    tf.saved_model.save(module, str(tmp_path), signatures={"serving_default": serve})
    assert final_ops(tmp_path) == {
        "probabilities": "Softmax",
        "raw": "AddV2",
        "scaled": "BiasAdd",  # Reshape keeps the meaning of the Dense layer's output
        "score": "Sigmoid",  # through two casts
    }


def test_unreadable_models_give_nothing(tmp_path: Path) -> None:
    (tmp_path / "saved_model.pb").write_bytes(b"\x12\x05trash")
    assert final_ops(tmp_path) == {}
    assert final_ops(tmp_path / "missing") == {}
