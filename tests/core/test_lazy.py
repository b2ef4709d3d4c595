"""TensorFlow's environment is in place before TensorFlow starts."""

from __future__ import annotations

import gc
import importlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from trtconv.core.lazy import (
    KERAS_START,
    collector_paused,
    keras_started_lean,
    require,
    without_keras_optional_imports,
)

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


def absent(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """`name` out of sys.modules for the test, and put back as it was after it, absent
    included (`delitem` alone records nothing to undo when the name is absent, so a None
    entry the test leaves would outlive it)."""
    monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, name)


def test_optional_imports_fail_unless_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    imported = types.ModuleType("matplotlib")
    monkeypatch.setitem(sys.modules, "matplotlib", imported)
    absent(monkeypatch, "sklearn")
    without_keras_optional_imports()
    with pytest.raises(ImportError):
        importlib.import_module("sklearn")
    assert sys.modules["matplotlib"] is imported


# Starts TensorFlow through `require`, as trtconv's command line does (with `lean_keras_start`)
# or as a library user's process does (without), runs a Keras model, then says which optional
# imports Keras made and whether both are importable afterwards.
COMMAND_LINE_START = """
import json, sys
import numpy as np
from trtconv.core.lazy import KERAS_OPTIONAL_IMPORTS, lean_keras_start, require
if sys.argv[1] == "lean":
    lean_keras_start()
tf = require("tensorflow")
model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(2)])
out = model(np.ones((1, 3), np.float32)).numpy()
loaded = sorted({n.split(".")[0] for n in sys.modules
                 if n.split(".")[0] in KERAS_OPTIONAL_IMPORTS and sys.modules[n]})
import matplotlib.pyplot, sklearn.datasets
print(json.dumps({"shape": list(out.shape), "keras_loaded": loaded}))
"""


def _started(mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", COMMAND_LINE_START, mode], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.tensorflow
def test_the_command_line_starts_keras_lean_and_keeps_both_importable() -> None:
    assert _started("lean") == {"shape": [1, 2], "keras_loaded": []}
    # A library user's process: Keras imports both, as it would without trtconv.
    assert _started("library") == {"shape": [1, 2], "keras_loaded": ["matplotlib", "sklearn"]}


def test_the_lean_start_blocks_only_while_keras_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(KERAS_START, "lean", True)
    absent(monkeypatch, "keras")
    imported = types.ModuleType("matplotlib")
    monkeypatch.setitem(sys.modules, "matplotlib", imported)
    absent(monkeypatch, "sklearn")
    with keras_started_lean():
        with pytest.raises(ImportError):
            importlib.import_module("sklearn")
        assert sys.modules["matplotlib"] is imported  # already imported: left alone
    assert "sklearn" not in sys.modules  # importable again
    # Once Keras has started, nothing is blocked.
    monkeypatch.setitem(sys.modules, "keras", types.ModuleType("keras"))
    with keras_started_lean():
        assert "sklearn" not in sys.modules


# A module that records, when imported, whether Python's cyclic garbage collector was on.
SEES_THE_COLLECTOR = "import gc\nCOLLECTING = gc.isenabled()\nMADE = [[] for _ in range(1000)]\n"


def test_a_first_import_runs_with_the_collector_paused_and_its_objects_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "trtconv_sees_gc.py").write_text(SEES_THE_COLLECTOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    absent(monkeypatch, "trtconv_sees_gc")
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    module = require("trtconv_sees_gc")
    assert module.COLLECTING is False
    assert gc.isenabled()
    assert gc.get_freeze_count() >= frozen + len(module.MADE)
    # Imported already: nothing paused, nothing frozen (made since then stays collectable).
    made_since = [[] for _ in range(1000)]
    frozen = gc.get_freeze_count()
    assert require("trtconv_sees_gc") is module
    assert gc.get_freeze_count() == frozen and made_since


def test_the_collector_stays_off_after_a_block_when_it_was_off() -> None:
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
