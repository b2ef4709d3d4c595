"""`trtconv bench --scenario single-stream|offline`: LoadGen's SingleStream and Offline
scenarios against a served int8 artifact."""

from __future__ import annotations

import json
import os

import pytest

from tests.helpers.serving_fixtures import artifact, left_running, pytriton_or_skip
from trtconv.cli import main
from trtconv.core.processes import descendants
from trtconv.serving.load.latency import trace_latencies_ms
from trtconv.serving.load.scenarios import early_stopping, throughput

pytestmark = pytest.mark.tensorflow  # builds, converts or serves Keras models

SINGLE_STREAM = """Scenario : SingleStream
90.0th percentile latency (ns) : 8364820
Result is : INVALID
Early Stopping Result:
 * Processed at least 64 queries (434).
 * Would discard 27 highest latency queries.
 * Early stopping 90.0th percentile estimate: 9717066
 * Not enough queries processed for 99.0th percentile
 early stopping estimate (would need to process at
 least 662 total queries).

================================================
Additional Stats
================================================
QPS w/ loadgen overhead         : 214.95
"""
# SingleStream and Offline traces have no Latency events: each Sample's issue and completion.
SAMPLES = """{"name":"Sample","ph":"b","id":0,"args":{"issue_start_ns":0,"complete_ns":896416}},
{"name":"Sample","ph":"e", "pid":1,"id":0,"ts":292875.113},
{"name":"Sample","ph":"b","id":1,"args":{"issue_start_ns":100,"complete_ns":1968300}},
"""


def test_single_stream_summary_gives_its_rate_and_early_stopping_lines() -> None:
    assert throughput(SINGLE_STREAM) == 214.95
    assert throughput("Samples per second: 3418.11\n") == 3418.11
    assert early_stopping(SINGLE_STREAM) == [
        "Processed at least 64 queries (434).",
        "Would discard 27 highest latency queries.",
        "Early stopping 90.0th percentile estimate: 9717066",
        "Not enough queries processed for 99.0th percentile early stopping estimate (would "
        "need to process at least 662 total queries).",
    ]
    assert trace_latencies_ms(SAMPLES).tolist() == pytest.approx([0.896416, 1.9682])


@pytest.mark.slow  # converts a small model, serves it twice and runs LoadGen
@pytest.mark.parametrize("scenario", ["single-stream", "offline"])
def test_scenarios_run_loadgen_against_the_served_model(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pytriton_or_skip()
    pytest.importorskip("mlperf_loadgen", reason="mlcommons-loadgen is not installed")
    model = artifact("ort", "int8")
    with pytest.raises(SystemExit) as stopped:
        main(["bench", str(model), "--scenario", scenario, "--duration", "1", "--json"])
    out, err = capsys.readouterr()
    assert stopped.value.code in (0, None), err
    result = json.loads(out)
    (row,) = result["rows"]
    assert result["scenario"] == scenario and row["precision"] == "int8"
    assert row["completed_qps"] > 0 and row["errors"] == 0 and row["queries"] > 0
    assert row["latency_ms_p50"] <= row["latency_ms_p90"] <= row["latency_ms_p99"]
    low = row["latency_ms_p99_ci95"][0]
    assert low <= row["latency_ms_p99"]
    if scenario == "single-stream":
        assert "Min duration satisfied : NO" in row["loadgen_reasons"]  # 1 s of MLPerf's 600
        assert set(row["batches"]) == {"1"}  # one query at a time: nothing to batch
        assert any("90.0th percentile estimate" in line for line in row["early_stopping"])
    else:
        assert "600 s" in result["notes"][0] and "not an MLPerf VALID" in result["notes"][0]
        assert max(map(int, row["batches"])) > 1  # every sample at once: the batcher batches
    assert left_running(descendants(os.getpid())) == []
