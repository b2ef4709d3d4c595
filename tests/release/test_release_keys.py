"""Resume keys: the same config gives the same step keys as the release that wrote them.

A release directory written by an earlier trtconv must resume without redoing its steps, so
each step's input key is pinned here (step_keys.json), recorded from the code before the
options redesign. Machine facts (tool versions, device) are fixed, data sources are files
this test writes or "random", so the keys do not depend on the machine.
TRTCONV_UPDATE_GOLDEN=1 records them again (only after a deliberate change of a step's inputs).
"""

from __future__ import annotations

import json
import os
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from trtconv.release.config import load_config
from trtconv.release.steps import ReleaseRun
from trtconv.release.store import StepRecord, step_key

GOLDEN = Path(__file__).with_name("step_keys.json")
SOURCE_SHA = "5" * 64

FULL = """
[model]
path = "model"

[[targets]]
backend = "ort"
precision = "int8"
tolerance = 0.1

[[targets]]
backend = "ort"
precision = "fp32"

[[targets]]
backend = "best"

[[targets]]
backend = "trt"
precision = "fp16"

[calibration]
data = "calib.bin"
method = "entropy"
samples = 64
int8_target = "portable"
fallback = false
fallback_time_limit_s = 120

[eval]
data = "random"
samples = 50
split = "all"

[bench]
batch_sizes = [1, 4]
duration_s = 2.0
warmup = 2
threads = 2
data = "random"

[gates]
min_top1_agreement = 0.99
max_accuracy_drop = 0.001
min_speedup = 1.0
gate_batch_size = 4

[preprocessing]
scale = 0.5
offset = 0.1
mean = [0.1]
std = [0.2]

[outputs]
allow_unjudged = true
"""

MINIMAL = """
[model]
path = "model"

[[targets]]
backend = "ort"
precision = "fp32"
"""

ZOO = """
[model]
zoo = "digits-cnn"

[train]
epochs = 2
batch_size = 16
amp = false
seed = 3
data = "calib.bin"

[[targets]]
backend = "ort"
precision = "int8"
roles = { probabilities = "classes" }
tolerances = { probabilities = 0.01 }

[[targets]]
backend = "auto"
precision = "fp16"

[calibration]
data = "random"

[eval]
data = "calib.bin"

[bench]
iterations = 10

[gates]
max_accuracy_drop = 0.5
min_top1_agreement = 0.5

[outputs]
roles = { probabilities = "classes" }
tolerances = { probabilities = 0.2 }
"""

BEST = """
[model]
path = "model"

[[targets]]
backend = "best"

[[targets]]
backend = "best"
precision = "int8"

[calibration]
data = "calib.bin"

[gates]
min_top1_agreement = 0.95
"""

CONFIGS = {"full": FULL, "minimal": MINIMAL, "zoo": ZOO, "best": BEST}


class Recorded(Exception):
    """A step's key is noted; the step itself is not needed."""


class RecordingStore:
    """A step store that notes each step's key and stops the step there, so the steps' inputs
    are computed exactly as a resume computes them and nothing runs."""

    def __init__(self) -> None:
        self.keys: dict[str, str] = {}

    def lookup(self, step: str, inputs: dict[str, Any]) -> tuple[StepRecord, str]:
        self.keys[step] = step_key(inputs)
        raise Recorded


def step_keys(root: Path, text: str) -> dict[str, str]:
    """Every step key of a release of `text` (run from `root`, which holds its files)."""
    (root / "model").mkdir()
    (root / "model" / "saved_model.pb").write_bytes(b"")
    (root / "calib.bin").write_bytes(b"calibration data")
    (root / "release.toml").write_text(text)
    config = load_config(Path("release.toml"))
    run = ReleaseRun(config, root / "out", resume=True)
    store = RecordingStore()
    run.store = store  # type: ignore[assignment]
    run.tools = {"trtconv": "0.0", "onnxruntime": "1.0"}
    run.device = {"cpu": "a CPU", "cpu_features": ["avx2"], "gpus": []}
    with suppress(Recorded):
        run.source_model()
    artifacts: dict[str, Path] = {}
    for target in config.targets:
        with suppress(Recorded):
            run.convert(target, Path("model"), SOURCE_SHA)
        artifacts[target.id] = root / f"artifact-{target.id}"
        artifacts[target.id].write_text(target.id)
        with suppress(Recorded):
            run.evaluate(target, artifacts[target.id], Path("model"), SOURCE_SHA)
    with suppress(Recorded):
        run.bench(Path("model"), SOURCE_SHA, artifacts)
    return store.keys


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_same_config_gives_the_recorded_step_keys(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    keys = step_keys(tmp_path, CONFIGS[name])
    golden = json.loads(GOLDEN.read_text()) if GOLDEN.is_file() else {}
    if os.environ.get("TRTCONV_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps({**golden, name: keys}, indent=2, sort_keys=True) + "\n")
        return
    assert keys == golden[name]
