"""SavedModels TF 2.17 cannot revive: a Keras 2 model saved with its (legacy) optimizer.

The fixture is written here by Keras 2 (`tf_keras`) in a subprocess. TF 2.17 revives its
optimizer's slot variables only through tf_keras; a machine without tf_keras is emulated by a
`tf_keras` package on PYTHONPATH whose import fails (every subprocess: tf2onnx, bench workers)
and `sys.modules["tf_keras"] = None` in this process.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trtconv import api
from trtconv.artifact.manifest import read_manifest
from trtconv.calib.sources import load_digits
from trtconv.core.errors import InputError
from trtconv.model.savedmodel import load_saved_model, saved_model_for
from trtconv.model.signature_graph import holds_optimizer_state

# Not importorskip: importing tf_keras here would register Keras 2's objects in this process.
pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("tf_keras") is None,
        reason="the fixture is written by Keras 2 (pip install 'tf-keras==2.17.*')",
    ),
    pytest.mark.tensorflow,
]

WRITE_KERAS2_MODEL = """
import sys
import numpy as np
import tf_keras as keras
from trtconv.calib.sources import load_digits

train = load_digits("train")
keras.utils.set_random_seed(0)
image = keras.Input((8, 8, 1), name="image")
hidden = keras.layers.Dense(32, activation="relu")(keras.layers.Flatten()(image))
model = keras.Model(image, keras.layers.Dense(10, activation="softmax", name="probs")(hidden))
# The legacy optimizer keeps slot variables: what TF 2.17 cannot revive without tf_keras.
model.compile(keras.optimizers.legacy.Adam(0.01), "sparse_categorical_crossentropy")
model.fit(train.x, train.labels, epochs=8, verbose=0)
model.save(sys.argv[1], save_format="tf")
np.save(sys.argv[2], model.predict(load_digits("test").x, verbose=0))
"""

# Keras' optional imports (scikit-learn, matplotlib) skipped: a second of CPU, nothing to load.
LOAD = """import sys
from trtconv.core.lazy import without_keras_optional_imports
without_keras_optional_imports()
import tensorflow as tf
tf.saved_model.load(sys.argv[1])
print("loaded")
"""


@pytest.fixture(scope="module")
def keras2_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, np.ndarray]:
    """(a SavedModel written by Keras 2 with its Adam state, Keras' own probs on digits test)."""
    work = tmp_path_factory.mktemp("keras2")
    path, expected = work / "saved_model", work / "expected.npy"
    subprocess.run(
        [sys.executable, "-c", WRITE_KERAS2_MODEL, str(path), str(expected)],
        check=True,
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    return path, np.load(expected)


@pytest.fixture
def no_tf_keras(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process and its children as on a machine without tf_keras; the blocker's folder."""
    blocker = tmp_path / "blocker"
    (blocker / "tf_keras").mkdir(parents=True)
    (blocker / "tf_keras" / "__init__.py").write_text(
        'raise ImportError("No module named tf_keras (blocked by the test)")\n'
    )
    paths = [str(blocker), str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    monkeypatch.setitem(sys.modules, "tf_keras", None)  # type: ignore[arg-type]
    return blocker


def _load_in_subprocess(path: Path, pythonpath: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": pythonpath, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, "-c", LOAD, str(path)], capture_output=True, text=True, env=env
    )


def test_fixture_is_one_tf_cannot_revive_without_tf_keras(
    keras2_model: tuple[Path, np.ndarray], no_tf_keras: Path
) -> None:
    path, _ = keras2_model
    assert holds_optimizer_state(path)
    failed = _load_in_subprocess(path, os.environ["PYTHONPATH"])
    assert failed.returncode != 0
    assert "'_UserObject' object has no attribute 'add_slot'" in failed.stderr
    # With tf_keras installed, TensorFlow revives it itself (it imports tf_keras for an optimizer).
    revived = _load_in_subprocess(path, str(Path(__file__).resolve().parents[2]))
    assert revived.returncode == 0, revived.stderr[-2000:]


def test_loads_as_its_signature_graphs_and_says_why(
    keras2_model: tuple[Path, np.ndarray], no_tf_keras: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, expected = keras2_model
    with caplog.at_level(logging.WARNING, logger="trtconv"):
        model = load_saved_model(path)
    assert model.signature.input_names == ["image"]
    assert model.signature.output_names == ["probs"]
    import tensorflow as tf

    probs = model.function(image=tf.constant(load_digits("test").x))["probs"].numpy()
    np.testing.assert_allclose(probs, expected, atol=1e-5)
    said = [r.getMessage() for r in caplog.records if "could not revive" in r.getMessage()]
    assert len(said) == 1
    assert "add_slot" in said[0] and "tf_keras" in said[0] and "v1 loader" in said[0]


def test_consumers_get_a_frozen_copy_only_when_needed(
    keras2_model: tuple[Path, np.ndarray], no_tf_keras: Path
) -> None:
    path, _ = keras2_model
    with saved_model_for(path) as loadable:
        assert loadable != path
        assert not holds_optimizer_state(loadable)  # the signature graphs, frozen
    assert not loadable.exists()


def test_nothing_loads_it_names_the_fix(
    keras2_model: tuple[Path, np.ndarray], no_tf_keras: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(keras2_model[0], broken)
    shutil.rmtree(broken / "variables")  # neither the objects nor the graph's variables load
    with pytest.raises(InputError, match=r"tf-keras.*include_optimizer=False") as caught:
        load_saved_model(broken)
    assert str(broken) in str(caught.value)


def test_converts_validates_and_benches_without_resaving(
    keras2_model: tuple[Path, np.ndarray], no_tf_keras: Path, tmp_path: Path
) -> None:
    path, _ = keras2_model
    artifact = tmp_path / "ort"
    converted = api.convert(
        api.ConvertOptions(
            path, "fp32", backend="ort", output=artifact, calib_data="digits", confidence=0
        )
    )
    assert converted.validation is not None and converted.validation.verdict == "passed"
    assert read_manifest(artifact).source_model["path"] == str(path.resolve())

    validated = api.validate(api.ValidateOptions(artifact, data="digits", confidence=0))
    assert validated.verdict == "passed"
    assert Path(validated.reference) == path

    options = api.BenchOptions(
        (path, artifact), batch_sizes=(1,), eval_data="digits", rounds=2, warmup=1, iterations=4
    )
    bench = api.bench(options)
    rows = {row.label: row for row in bench.results}
    assert rows["ort"].top1_agreement == pytest.approx(1.0, abs=0.01)
    assert json.dumps(bench.to_json())  # serialises


def test_openvino_converts_its_signature_graph(
    keras2_model: tuple[Path, np.ndarray], no_tf_keras: Path, tmp_path: Path
) -> None:
    """OpenVINO reads the frozen v1 copy from its directory (it cannot read a v1 graph's
    loaded function)."""
    pytest.importorskip("openvino")
    options = api.ConvertOptions(
        keras2_model[0],
        "fp32",
        backend="openvino",
        output=tmp_path / "ov",
        calib_data="digits",
        confidence=0,
    )
    converted = api.convert(options)
    assert converted.validation is not None and converted.validation.verdict == "passed"
