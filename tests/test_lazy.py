"""TensorFlow's environment is in place before TensorFlow starts."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import types

import pytest

from trtconv.core.lazy import without_keras_optional_imports

# Records the environment at the moment `import tensorflow` starts, then stops the import (the
# test needs only that moment, not TensorFlow).
PROBE = """
import json, os, sys
NAMES = ("TF_FORCE_GPU_ALLOW_GROWTH", "TF_CPP_MIN_LOG_LEVEL")
seen = {}
class Watch:
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow":
            seen.update({k: os.environ.get(k) for k in NAMES})
            raise ImportError("stopped by the test")
        return None
sys.meta_path.insert(0, Watch())
from trtconv.core.errors import MissingDependencyError
from trtconv.core.lazy import require
try:
    require("tensorflow")
except MissingDependencyError:
    pass
print(json.dumps(seen))
"""


def _seen_at_import(**env: str) -> dict[str, str | None]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TF_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env={**clean, **env}
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_gpu_memory_growth_is_on_before_tensorflow_starts() -> None:
    assert _seen_at_import() == {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "TF_CPP_MIN_LOG_LEVEL": "3"}


def test_the_users_settings_win() -> None:
    seen = _seen_at_import(TF_FORCE_GPU_ALLOW_GROWTH="false", TF_CPP_MIN_LOG_LEVEL="0")
    assert seen == {"TF_FORCE_GPU_ALLOW_GROWTH": "false", "TF_CPP_MIN_LOG_LEVEL": "0"}


# Starts TensorFlow the way a bench worker does, runs a Keras model, and lists which of the
# optional imports ended up as real modules.
LEAN_START = """
import json, sys
from trtconv.core.lazy import KERAS_OPTIONAL_IMPORTS, without_keras_optional_imports
without_keras_optional_imports()
import numpy as np
import tensorflow as tf
model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
out = model(np.ones((1, 3), np.float32)).numpy()
loaded = [n for n in sys.modules if n.split(".")[0] in KERAS_OPTIONAL_IMPORTS and sys.modules[n]]
print(json.dumps({"shape": list(out.shape), "loaded": loaded}))
"""


@pytest.mark.tensorflow
def test_tensorflow_and_keras_start_without_their_optional_imports() -> None:
    done = subprocess.run([sys.executable, "-c", LEAN_START], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"shape": [1, 2], "loaded": []}


def test_optional_imports_fail_unless_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    imported = types.ModuleType("matplotlib")
    monkeypatch.setitem(sys.modules, "matplotlib", imported)
    monkeypatch.delitem(sys.modules, "sklearn", raising=False)
    without_keras_optional_imports()
    with pytest.raises(ImportError):
        importlib.import_module("sklearn")
    assert sys.modules["matplotlib"] is imported
