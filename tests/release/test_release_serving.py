"""`trtconv release` with [serving] and [deploy]: native and the int8 target served under
LoadGen's load, the min_qps_at_budget gate, and the recommendation's Triton repository."""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from tests.helpers.cli_runner import run_cli
from tests.helpers.serving_fixtures import left_running, pytriton_or_skip
from trtconv.core.processes import descendants
from trtconv.release.schema import release_schema

pytestmark = [
    pytest.mark.slow,
    pytest.mark.tensorflow,
]  # converts digits to int8, serves two models, runs LoadGen

CONFIG = """[model]
path = "{model}"

[[targets]]
backend = "ort"
precision = "int8"

[calibration]
data = "digits"
samples = 128

[bench]
batch_sizes = [1, 8]
iterations = 20
warmup = 3

[gates]
min_qps_at_budget = 1

[serving]
latency_budget_ms = 2000
duration_s = 3
search_runs = 2

[deploy]
triton = true
"""


def test_a_release_serves_its_targets_gates_them_and_deploys_the_recommendation(
    digits_saved_model: Path, tmp_path: Path
) -> None:
    pytriton_or_skip()
    pytest.importorskip("mlperf_loadgen", reason="mlcommons-loadgen is not installed")
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config = tmp_path / "release.toml"
    config.write_text(CONFIG.format(model=digits_saved_model))
    out = tmp_path / "out"
    completed = run_cli("release", config, "--output", out, "--json")  # in this process
    document = json.loads(completed.stdout)
    assert completed.returncode == 0, document.get("recommendation_reason", completed.stderr)
    jsonschema.validate(document, release_schema())
    native, int8 = document["serving"]["rows"]
    assert native["backend"] == "tf" and int8["precision"] == "int8"
    (entry,) = document["targets"]
    assert entry["serving"] == int8 and int8["qps_at_budget"] > 0
    # At a 2 s budget the second rate (doubled, and no lower than where a 3 s run holds queries
    # enough to bound its p99: `bounding_rate`) shows the budget surely met.
    (gate,) = [g for g in entry["gates"] if g["name"] == "min_qps_at_budget"]
    assert gate["verdict"] == "passed" and gate["measured"] == int8["qps_at_budget"]
    assert (out / "serving" / "result.json").is_file()
    # Each LoadGen run is told as it ends.
    assert "ort-int8: run 2 of 2 at " in completed.stderr, completed.stderr[-2000:]
    # The recommendation's repository, its batching from the serving run.
    assert document["triton_repository"] == "triton"
    model_config = model_config_pb2.ModelConfig()
    text_format.Parse((out / "triton" / "ort-int8" / "config.pbtxt").read_text(), model_config)
    assert model_config.dynamic_batching.max_queue_delay_microseconds == 100
    side = json.loads((out / "triton" / "ort-int8" / "trtconv.json").read_text())
    assert side["batching"]["source"].startswith("serving run ")
    markdown = (out / "release.md").read_text()
    assert "## Serving (p99 budget 2000 ms)" in markdown and "| ort-int8 |" in markdown
    assert left_running(descendants(os.getpid())) == []
