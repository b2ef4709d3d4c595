"""`trtconv release` end to end on the real digits-cnn: convert, validate, bench, gates, resume.

Each release runs in its own `python -m trtconv` process, as a CI job would run it; bench
iterations are tiny so the whole file runs in a few minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.helpers.cli_runner import run_cli
from tests.helpers.release_configs import LENIENT_GATES, config_text
from trtconv import api
from trtconv.core.errors import GateError, UsageError
from trtconv.core.fsutil import sha256_path
from trtconv.release.document import ReleaseResult
from trtconv.release.schema import release_schema

KEYS = Path(__file__).with_name("release_keys.json")


def run_release(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`trtconv release ARGS --json` in this process (tests/helpers/cli_runner.py); the SIGTERM test
    below runs the real `python -m trtconv release`."""
    return run_cli("release", *args, "--json")


@dataclass
class Release:
    config: Path
    directory: Path
    returncode: int
    document: dict[str, Any]


def release_from(config: Path, directory: Path, *extra: str) -> Release:
    completed = run_release(config, "--output", directory, *extra)
    assert completed.stdout, completed.stderr
    return Release(config, directory, completed.returncode, json.loads(completed.stdout))


def target(document: dict[str, Any], target_id: str) -> dict[str, Any]:
    return next(t for t in document["targets"] if t["id"] == target_id)


def at_batch(entry: dict[str, Any], batch_size: int) -> dict[str, Any]:
    return next(row for row in entry["bench"] if row["batch_size"] == batch_size)


@pytest.fixture(scope="module")
def ort_release(digits_saved_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Release:
    """A finished release of digits-cnn to ort fp32 and ort int8 with lenient gates."""
    root = tmp_path_factory.mktemp("ort-release")
    config = root / "release.toml"
    targets = [("ort", "fp32"), ("ort", "int8")]
    config.write_text(config_text(str(digits_saved_model), targets, LENIENT_GATES))
    return release_from(config, root / "out")


@pytest.fixture(scope="module")
def mixed_release(digits_saved_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Release:
    """A finished clean release to ort int8 and tftrt fp16 (which cannot convert here)."""
    root = tmp_path_factory.mktemp("mixed-release")
    config = root / "release.toml"
    targets = [("ort", "int8"), ("tftrt", "fp16")]
    config.write_text(config_text(str(digits_saved_model), targets, LENIENT_GATES))
    return release_from(config, root / "out")


def copy_release(
    release: Release, destination: Path, gates: dict[str, float], edit: tuple[str, str] = ("", "")
) -> Path:
    """Copy a finished release directory; write its config with other gates (and one edit)."""
    shutil.copytree(release.directory, destination / "out")
    text = release.config.read_text().split("[gates]")[0].replace(*edit)
    config = destination / "release.toml"
    config.write_text(text + "[gates]\n" + "".join(f"{k} = {v}\n" for k, v in gates.items()))
    return config


@pytest.mark.slow
def test_release_recommends_the_faster_passing_target(ort_release: Release) -> None:
    document = ort_release.document
    assert ort_release.returncode == 0, document
    jsonschema.validate(document, release_schema())
    assert json.loads((ort_release.directory / "release.json").read_text()) == document
    speeds = {
        t["id"]: at_batch(t, 8)["throughput_per_s"] for t in document["targets"] if t["passed"]
    }
    assert set(speeds) == {"ort-fp32", "ort-int8"}
    assert document["recommendation"]["target"] == max(speeds, key=lambda k: speeds[k])
    assert document["verdict"] == "passed" and document["exit_code"] == 0
    for entry in document["targets"]:
        artifact = ort_release.directory / entry["artifact"]
        assert entry["manifest"]["status"] == "passed"
        assert entry["artifact_sha256"] == sha256_path(artifact)
        assert entry["eval"]["accuracy_reference"] > 0.9
        assert {g["name"] for g in entry["gates"]} == {"validation_passed", *LENIENT_GATES}
    assert [row["batch_size"] for row in document["native_bench"]] == [1, 8]
    assert document["steps"] and not document["reused_steps"]
    for plot in document["plots"]:
        assert (ort_release.directory / plot).read_bytes().startswith(b"\x89PNG")
    # int8 met the budget at once: a one-step ladder, with what int8 buys over fp32.
    ladder = target(document, "ort-int8")["ladder"]
    assert ladder["outcome"] == "full int8 meets the budget" and ladder["kept_float"] == []
    assert [row["batch_size"] for row in ladder["speed"]["rows"]] == [1, 8]
    assert target(document, "ort-fp32")["ladder"] is None
    markdown = (ort_release.directory / "release.md").read_text()
    assert "Verdict: release" in markdown
    assert "### `ort-int8`: full int8 meets the budget" in markdown
    assert "step bench: running" in (ort_release.directory / "release.log").read_text()


def key_structure(document: dict[str, Any]) -> dict[str, Any]:
    """The keys (in order) of release.json and of the blocks the release itself writes."""
    target = next(t for t in document["targets"] if t["gates"])
    config = document["config"]
    return {
        "document": list(document),
        "config": {k: list(v) if isinstance(v, dict) else None for k, v in config.items()},
        "config_target": list(config["targets"][0]),
        "source_model": list(document["source_model"]),
        "target": list(target),
        "gate": list(target["gates"][0]),
        "recommendation": list(document["recommendation"]),
        "step": list(document["steps"][0]),
    }


@pytest.mark.slow
def test_release_json_keeps_its_keys_and_loads_back_as_its_type(ort_release: Release) -> None:
    """release.json's keys are those recorded before it became a typed result (KEYS), and the
    document loads back as a ReleaseResult that writes it out again unchanged."""
    document = ort_release.document
    assert key_structure(document) == json.loads(KEYS.read_text())
    result = ReleaseResult.from_json(document)
    assert result.to_json() == document
    assert result.recommendation is not None and result.targets[0].gates[0].name
    assert result.steps[0].name == document["steps"][0]["name"]


@pytest.mark.slow
def test_releases_from_two_machines_merge_with_speedups_per_machine(
    ort_release: Release, tmp_path: Path
) -> None:
    """`trtconv report merge` reads release directories; a release of another model is refused."""
    other = tmp_path / "on-l4"
    shutil.copytree(ort_release.directory, other)
    bench_json = other / "bench" / "results.json"
    bench = json.loads(bench_json.read_text())
    bench["environment"]["gpus"] = [{"name": "NVIDIA L4"}]  # as a GPU runner would record it
    bench_json.write_text(json.dumps(bench))

    merged = api.merge_reports([ort_release.directory, other], tmp_path / "merged")
    here = merged.machines[0]
    assert merged.machines == [here, "NVIDIA L4"]
    assert [s.kind for s in merged.sources] == ["release", "release"]
    rows = ort_release.document["bench"]["results"]
    for machine in merged.machines:
        mine = [r.row for r in merged.results if r.machine == machine]
        assert [r.speedup_vs_baseline for r in mine] == [r["speedup_vs_baseline"] for r in rows]
    assert "ort-int8" in (tmp_path / "merged" / "report.md").read_text()

    document = json.loads((other / "release.json").read_text())
    document["source_model"]["sha256"] = "0" * 64
    (other / "release.json").write_text(json.dumps(document))
    with pytest.raises(UsageError, match=r"source_model\.sha256 differs"):
        api.merge_reports([ort_release.directory, other], tmp_path / "refused")


@pytest.mark.slow
def test_resume_after_a_finished_run_reuses_every_step(
    ort_release: Release, tmp_path: Path
) -> None:
    # A copy also proves a release directory can move: records hold hashes, not paths.
    config = copy_release(ort_release, tmp_path, LENIENT_GATES)
    resumed = release_from(config, tmp_path / "out", "--resume")
    assert resumed.returncode == 0
    steps = resumed.document["steps"]
    assert [s["name"] for s in steps] == [s["name"] for s in ort_release.document["steps"]]
    assert all(s["reused"] for s in steps)
    assert resumed.document["reused_steps"] == [s["name"] for s in steps]
    assert resumed.document["recommendation"] == ort_release.document["recommendation"]
    jsonschema.validate(resumed.document, release_schema())


@pytest.mark.slow
def test_impossible_gate_exits_4_with_every_measured_value(
    ort_release: Release, tmp_path: Path
) -> None:
    config = copy_release(ort_release, tmp_path, {**LENIENT_GATES, "min_speedup": 1000})
    progress: list[tuple[int, int, str]] = []
    # In-process this time: the API raises the GateError the CLI maps to exit 4.
    options = api.ReleaseOptions(config, tmp_path / "out", resume=True)
    with pytest.raises(GateError, match="no target passed every gate") as caught:
        api.release(options, progress=lambda *event: progress.append(event))
    result = caught.value.result
    assert isinstance(result, ReleaseResult) and result.exit_code == 4
    document = result.to_json()
    assert ReleaseResult.from_json(document) == result
    assert json.loads((tmp_path / "out" / "release.json").read_text()) == document
    assert progress == [(len(document["steps"]),) * 2 + ("done",)]  # nothing ran, all reused
    assert document["recommendation"] is None and document["verdict"] == "failed"
    assert "no target passed every gate" in document["recommendation_reason"]
    for entry in document["targets"]:
        gates = {g["name"]: g for g in entry["gates"]}
        assert set(gates) == {"validation_passed", *LENIENT_GATES}
        assert all(g["measured"] is not None for g in gates.values())
        speedup = gates["min_speedup"]
        assert speedup["threshold"] == 1000 and speedup["passed"] is False
        assert speedup["measured"] == at_batch(entry, 8)["speedup_vs_baseline"]
        assert entry["passed"] is False
    assert "no artifact recommended" in (tmp_path / "out" / "release.md").read_text()
    # Gates are judged on recorded measurements: changing one re-runs nothing.
    assert all(step["reused"] for step in document["steps"])
    jsonschema.validate(document, release_schema())


@pytest.mark.slow
def test_resume_redoes_only_the_steps_whose_inputs_changed(
    ort_release: Release, tmp_path: Path
) -> None:
    edit = ("samples = 128", "samples = 96")  # calibration samples: only int8 depends on them
    config = copy_release(ort_release, tmp_path, LENIENT_GATES, edit)
    resumed = release_from(config, tmp_path / "out", "--resume")
    assert resumed.returncode == 0
    steps = {step["name"]: step for step in resumed.document["steps"]}
    assert set(resumed.document["reused_steps"]) == {"convert-ort-fp32", "eval-ort-fp32"}
    assert steps["convert-ort-int8"]["reason"] == "inputs changed (calibration)"
    assert steps["eval-ort-int8"]["reason"] == "inputs changed (artifact_sha256)"
    assert steps["bench"]["reason"] == "inputs changed (artifacts)"
    int8 = target(resumed.document, "ort-int8")
    assert int8["manifest"]["calibration"]["samples"] == 96


@pytest.mark.slow
@pytest.mark.no_gpu
def test_tftrt_target_is_recorded_as_failed_and_the_release_completes(
    mixed_release: Release,
) -> None:
    document = mixed_release.document
    assert mixed_release.returncode == 0
    failed = target(document, "tftrt-fp16")
    assert failed["status"] == "failed" and failed["passed"] is False
    assert failed["error"]["type"] == "MissingDependencyError"
    assert failed["error"]["exit_code"] == 3
    assert "TensorRT" in failed["error"]["message"]
    assert failed["artifact"] is None
    assert not (mixed_release.directory / "artifacts" / "tftrt-fp16").exists()
    assert document["recommendation"]["target"] == "ort-int8"
    # Native and the one converted artifact were benched, at both batch sizes.
    assert len(document["bench"]["results"]) == 4
    assert len({row["label"] for row in document["bench"]["results"]}) == 2
    jsonschema.validate(document, release_schema())


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
@pytest.mark.serial
def test_sigterm_mid_conversion_then_resume_matches_a_clean_run(
    mixed_release: Release, tmp_path: Path
) -> None:
    output = tmp_path / "out"
    command = [sys.executable, "-m", "trtconv", "release", str(mixed_release.config)]
    process = subprocess.Popen(
        [*command, "--output", str(output), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Strike while the artifact is half-written: its staging directory exists.
        staging = output / "artifacts"
        wait_for(lambda: any(staging.glob(".partial-ort-int8-*")), "the staging directory", 180)
        time.sleep(0.5)
        process.send_signal(signal.SIGTERM)
        stdout, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143  # 128 + SIGTERM, as shells report it
    assert json.loads(stdout)["error"]["type"] == "Interrupted"
    # Nothing half-written survives, and nothing unfinished is recorded as done.
    assert not [p for p in output.rglob("*") if p.name.startswith(".partial-")]
    assert not (output / "artifacts" / "ort-int8").exists()
    assert not (output / ".state" / "steps" / "convert-ort-int8.json").exists()
    assert not (output / "release.json").exists()

    resumed = release_from(mixed_release.config, output, "--resume")
    clean, document = mixed_release.document, resumed.document
    assert resumed.returncode == clean_code(clean) == 0
    assert not document["steps"][0]["reused"] and document["steps"][0]["name"] == "convert-ort-int8"
    assert document["recommendation"]["target"] == clean["recommendation"]["target"]
    mine, theirs = target(document, "ort-int8"), target(clean, "ort-int8")
    assert mine["artifact_sha256"] == sha256_path(output / mine["artifact"])
    for key in ("source_model", "calibration", "precision", "backend", "status"):
        assert mine["manifest"][key] == theirs["manifest"][key], key
    for figures in ("validation", "eval"):
        for key in ("samples", "top1_agreement", "accuracy_reference", "accuracy_candidate"):
            assert mine[figures][key] == pytest.approx(theirs[figures][key]), (figures, key)
    assert target(document, "tftrt-fp16")["error"] == target(clean, "tftrt-fp16")["error"]
    jsonschema.validate(document, release_schema())


def clean_code(document: dict[str, Any]) -> int:
    return int(document["exit_code"])


@pytest.mark.slow
@pytest.mark.no_gpu
def test_a_best_target_is_its_tournament_winner_and_is_recommended(
    digits_saved_model: Path, tmp_path: Path
) -> None:
    config = tmp_path / "release.toml"
    gates = {**LENIENT_GATES, "gate_batch_size": 8}
    config.write_text(config_text(str(digits_saved_model), [("best", None)], gates))
    release = release_from(config, tmp_path / "out")
    assert release.returncode == 0, release.document
    document = release.document
    jsonschema.validate(document, release_schema())
    entry = target(document, "best")
    table = entry["tournament"]
    winner = next(row for row in table["candidates"] if row["verdict"] == "winner")
    assert table["winner"] == winner["name"] and table["batch_size"] == 8
    assert (entry["requested_backend"], entry["backend"]) == ("best", winner["backend"])
    assert entry["precision"] == winner["precision"] and entry["passed"]
    recommendation = document["recommendation"]
    assert (recommendation["target"], recommendation["backend"]) == ("best", winner["backend"])
    report = (tmp_path / "out" / "release.md").read_text()
    assert "## Tournament of `best`" in report and f"Winner: **{winner['name']}**" in report
    assert "| trt fp32, trt tf32, trt fp16, trt int8 | not available |" in report


@pytest.mark.tensorflow
def test_zoo_model_is_trained_first(tmp_path: Path) -> None:
    config = tmp_path / "release.toml"
    config.write_text(
        '[model]\nzoo = "digits-cnn"\n[train]\nepochs = 1\n'
        '[[targets]]\nbackend = "tftrt"\nprecision = "fp32"\n'
        "[bench]\nbatch_sizes = [1]\niterations = 5\nwarmup = 1\n"
    )
    release = release_from(config, tmp_path / "out")
    document = release.document
    assert release.returncode == 4  # the only target cannot convert here
    assert document["source_model"]["trained"] is True
    assert (tmp_path / "out" / "model" / "saved_model" / "saved_model.pb").is_file()
    assert [s["name"] for s in document["steps"]] == ["train", "convert-tftrt-fp32", "bench"]
    assert document["recommendation"] is None
    jsonschema.validate(document, release_schema())


BAD_CONFIGS = [
    ("[gates]\nmin_sped = 2\n", "gates.min_sped: unknown key"),
    (
        '[bench]\nbatch_sizes = [1, "8"]\n',
        'bench.batch_sizes[1]: expected a positive integer, found "8"',
    ),
    ('[[targets]]\nbackend = "ort"\nprecision = 8\n', "targets[1].precision: expected one of"),
    ('[gates]\nmin_speedup = "2"\n', 'gates.min_speedup: expected a positive number, found "2"'),
]


@pytest.mark.parametrize(("extra", "message"), BAD_CONFIGS)
def test_bad_config_exits_2_naming_the_key(tmp_path: Path, extra: str, message: str) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"")
    config = tmp_path / "bad.toml"
    config.write_text(
        f'[model]\npath = "{model}"\n[[targets]]\nbackend = "ort"\nprecision = "fp32"\n{extra}'
    )
    completed = run_release(config, "--output", tmp_path / "out")
    assert completed.returncode == 2
    error = json.loads(completed.stdout)["error"]
    assert error["type"] == "UsageError" and error["message"].startswith(message)
    assert message in completed.stderr
    assert not (tmp_path / "out").exists()


def test_missing_model_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[[targets]]\nbackend = "ort"\nprecision = "fp32"\n')
    completed = run_release(config)
    assert completed.returncode == 2
    assert json.loads(completed.stdout)["error"]["message"].startswith("model: missing")


def test_existing_output_needs_resume_or_force(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"")
    config = tmp_path / "ok.toml"
    config.write_text(
        f'[model]\npath = "{model}"\n[[targets]]\nbackend = "ort"\nprecision = "fp32"\n'
    )
    output = tmp_path / "out"
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="already exists; pass --resume"):
        api.release(api.ReleaseOptions(config, output=output))
    with pytest.raises(UsageError, match="is not a release directory"):
        api.release(api.ReleaseOptions(config, output=output, force=True))
    assert (output / "notes.txt").read_text() == "mine"
    assert os.listdir(output) == ["notes.txt"]
