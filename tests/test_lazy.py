"""TensorFlow's environment is in place before TensorFlow starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
