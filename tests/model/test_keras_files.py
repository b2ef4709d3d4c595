"""Keras files as users have them: a Keras 2 `.h5` (an LSTM, whose `time_major` argument Keras 3
refuses, and a custom attention layer) and its weights-only twin, written here by Keras 2
(`tf_keras`) in a subprocess. trtconv's commands run in one more subprocess (through the CLI's
`main`, one after another): tf_keras, once imported, registers Keras 2's objects in the process
for good (tests/model/test_signature_graph.py emulates a machine without it). The token ids are
integers for a float32 input: an exact cast.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("tf_keras") is None,
        reason="the fixture is written by Keras 2 (pip install 'tf-keras==2.17.*')",
    ),
    pytest.mark.tensorflow,
]

LAYERS = '''
import tensorflow as tf
import tf_keras as keras


class AttentionWeightedAverage(keras.layers.Layer):
    """Attention over the time steps: their softmax-weighted mean."""

    def build(self, input_shape):
        self.w = self.add_weight(name="w", shape=(input_shape[-1], 1))
        super().build(input_shape)

    def call(self, x):
        weights = tf.nn.softmax(tf.squeeze(tf.matmul(x, self.w), -1), axis=-1)
        return tf.reduce_sum(x * weights[..., None], axis=1)
'''

WRITE = """
import numpy as np
import tf_keras as keras
from attention_layers import AttentionWeightedAverage

keras.utils.set_random_seed(0)
ids = keras.Input((10,), name="ids")
hidden = keras.layers.LSTM(8, return_sequences=True)(keras.layers.Embedding(50, 8)(ids))
pooled = AttentionWeightedAverage()(hidden)
probs = keras.layers.Dense(4, activation="softmax", name="probs")(pooled)
model = keras.Model(ids, probs)
model.save("model.h5")
model.save_weights("weights.h5")
x = np.random.default_rng(1).integers(0, 50, (64, 10))
np.savez("ids.npz", ids=x)
np.save("expected.npy", model.predict(x.astype(np.float32), verbose=0))
"""


# Every trtconv command the tests below check, in this order, run in one Keras 2 process (one
# TensorFlow import for all of them): the class missing first, while nothing has imported it.
CONVERT = shlex.split("convert model.h5 --precision fp32 --calib-data ids.npz --output artifact")
CLASSES = ["--custom-objects", "attention_layers:AttentionWeightedAverage"]
NO_MODULE = "--custom-objects no_such_module:Layer"
COMMANDS = {
    "missing": CONVERT,
    "done": [*CONVERT, *CLASSES, "--json"],
    "inspected": ["inspect", "model.h5", *CLASSES, "--json"],
    "validated": ["validate", "artifact"],
    "benched": shlex.split("bench artifact --batch-sizes 8 --iterations 5 --data ids.npz"),
    "weights": shlex.split("convert weights.h5 --precision fp32 --calib-data ids.npz --output w"),
    "wrong": shlex.split(f"convert model.h5 --precision fp32 --output x {NO_MODULE}"),
}
RUN = """
import json
import sys

from tests.helpers.cli_runner import run_cli

done = {name: run_cli(*argv) for name, argv in json.loads(sys.argv[1]).items()}
answers = {name: [run.returncode, run.stdout, run.stderr] for name, run in done.items()}
with open("answers.json", "w") as file:
    json.dump(answers, file)
"""


def _run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        # The repository root (never tests/: its folders mirror the package, inspect/ among
        # them, and would hide the standard library's modules of the same names).
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )


@pytest.fixture(scope="module")
def keras2_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the custom layer's module, model.h5, weights.h5, ids.npz, expected.npy,
    and answers.json: each of COMMANDS' [exit code, stdout, stderr]."""
    work = tmp_path_factory.mktemp("keras2_h5")
    (work / "attention_layers.py").write_text(LAYERS)
    written = _run(work, "-c", WRITE)
    assert written.returncode == 0, written.stderr[-2000:]
    ran = _run(work, "-c", RUN, json.dumps(COMMANDS))
    assert ran.returncode == 0, ran.stderr[-3000:]
    return work


def answer(work: Path, name: str) -> subprocess.CompletedProcess[str]:
    code, out, err = json.loads((work / "answers.json").read_text())[name]
    return subprocess.CompletedProcess(COMMANDS[name], code, out, err)


def test_a_keras2_h5_with_a_custom_layer(keras2_files: Path) -> None:
    work = keras2_files
    missing = answer(work, "missing")
    assert missing.returncode == 1
    assert (
        "Keras file model.h5 needs the custom class 'AttentionWeightedAverage', which is not "
        "available here: give its code with --custom-objects MODULE:AttentionWeightedAverage"
    ) in " ".join(missing.stderr.split())
    done = answer(work, "done")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["validation"]["passed"]  # stdout: one JSON document
    inspected = answer(work, "inspected")
    assert json.loads(inspected.stdout)["serving_signature"] == "serving_default"
    assert "loaded by Keras 2 (tf_keras): Keras 3 could not (Unrecognized keyword" in done.stderr
    assert "input 'ids' cast from int64 to float32: every value (in [0, 49]) is exact" in (
        done.stderr
    )
    import onnxruntime as ort

    manifest = json.loads((work / "artifact" / "manifest.json").read_text())
    session = ort.InferenceSession(str(work / "artifact" / manifest["payload"]))
    ids = np.load(work / "ids.npz")["ids"].astype(np.float32)
    probs = session.run(None, {"ids": ids})[0]  # the one output
    np.testing.assert_allclose(probs, np.load(work / "expected.npy"), atol=1e-5)
    # validate exports the Keras source again, with the classes the manifest recorded (the
    # class is not registered with Keras: without them the file does not load)
    recorded = manifest["source_model"]["custom_objects"]
    assert recorded == ["attention_layers:AttentionWeightedAverage"]
    validated = answer(work, "validated")
    assert validated.returncode == 0, validated.stderr[-2000:]
    benched = answer(work, "benched")
    assert benched.returncode == 0, benched.stderr[-2000:]
    assert "baseline: model (" in benched.stdout  # the Keras source, exported with its class


def test_weights_only_and_unimportable_classes_say_what_works(keras2_files: Path) -> None:
    work = keras2_files
    weights = answer(work, "weights")
    assert weights.returncode == 1
    said = " ".join(weights.stderr.split())
    assert "Keras file weights.h5 holds weights only" in said
    assert "a model needs its code" in said and "internal error" not in said
    wrong = answer(work, "wrong")
    assert wrong.returncode == 2
    assert "--custom-objects no_such_module:Layer: module 'no_such_module' cannot be imported" in (
        wrong.stderr
    )
