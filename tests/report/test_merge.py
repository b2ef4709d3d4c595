"""`trtconv report merge` over real `bench --report` directories made here: one relabelled as
another machine (its environment block edited, as a run on that machine would have written)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli_runner import run_cli
from trtconv import api
from trtconv.core.errors import UsageError
from trtconv.options.bench import BenchOptions
from trtconv.report.merge import first_difference, machine_name, merge_reports
from trtconv.report.merge_result import MergeResult

OTHER_CPU = "AMD EPYC 7B13 64-Core Processor"
BENCH_OPTIONS: dict[str, Any] = {"batch_sizes": (1, 4), "warmup": 1, "iterations": 10}


@dataclass
class Reports:
    here: Path  # as measured on this machine
    other: Path  # a second run, relabelled as another machine
    root: Path


def relabel(directory: Path, cpu_model: str) -> None:
    results = directory / "results.json"
    document = json.loads(results.read_text())
    document["environment"]["cpu"]["model"] = cpu_model
    results.write_text(json.dumps(document))


@pytest.fixture(scope="module")
def reports(digits_saved_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Reports:
    root = tmp_path_factory.mktemp("merge")
    for name in ("here", "other"):
        api.bench(BenchOptions((digits_saved_model,), report=root / name, **BENCH_OPTIONS))
    relabel(root / "other", OTHER_CPU)
    return Reports(root / "here", root / "other", root)


def merge_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`trtconv report merge ARGS --json` in this process (tests/helpers/cli_runner.py)."""
    return run_cli("report", "merge", *args, "--json")


def merge_process(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The same in a real `python -m trtconv` process: the merge contract's one such test."""
    return subprocess.run(
        [sys.executable, "-m", "trtconv", "report", "merge", *map(str, args), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )


def rows_of(directory: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = json.loads((directory / "results.json").read_text())["results"]
    return rows


@pytest.mark.slow
def test_two_machines_merge_into_one_table(reports: Reports, tmp_path: Path) -> None:
    output = tmp_path / "merged"
    completed = merge_process(reports.here, reports.other, "--output", output)
    assert completed.returncode == 0, completed.stderr
    result = json.loads(completed.stdout)
    here = machine_name(json.loads((reports.here / "results.json").read_text())["environment"])
    assert result["machines"] == [here, OTHER_CPU]
    assert here != OTHER_CPU

    # Every row of both runs, each with its machine, figures unchanged.
    expected = [(here, r) for r in rows_of(reports.here)]
    expected += [(OTHER_CPU, r) for r in rows_of(reports.other)]
    assert len(result["results"]) == len(expected) == 4
    for merged, (machine, row) in zip(result["results"], expected, strict=True):
        assert merged == {"machine": machine, **row}

    # results.csv: the machine is the first column; report.md: one column per machine.
    with (output / "results.csv").open() as handle:
        lines = list(csv.DictReader(handle))
    assert [line["machine"] for line in lines] == [here, here, OTHER_CPU, OTHER_CPU]
    assert float(lines[3]["throughput_per_s"]) == pytest.approx(
        rows_of(reports.other)[1]["throughput_per_s"]
    )
    markdown = (output / "report.md").read_text()
    assert f"| model | runs as | batch | {here} | {OTHER_CPU} |" in markdown
    for title in ("## Throughput, samples/s", "## Speedup over the baseline", "## Latency p99"):
        assert title in markdown
    assert f"### {OTHER_CPU}" in markdown and f"### {here}" in markdown
    assert sorted(p.name for p in output.glob("*.png")) == [
        "latency_vs_batch.png",
        "throughput_vs_batch.png",
    ]
    assert result["report"]["markdown"] == str(output / "report.md")
    assert MergeResult.from_json(result).to_json() == result
    written = json.loads((output / "results.json").read_text())
    assert written == {key: value for key, value in result.items() if key != "report"}

    again = merge_cli(output, reports.here, "--output", tmp_path / "again")
    assert again.returncode == 1
    assert "already a merged report" in json.loads(again.stdout)["error"]["message"]


@pytest.mark.slow
def test_different_settings_exit_2_naming_the_key(
    reports: Reports, digits_saved_model: Path, tmp_path: Path
) -> None:
    third = tmp_path / "batch1"
    options = {**BENCH_OPTIONS, "batch_sizes": (1,)}
    api.bench(BenchOptions((digits_saved_model,), report=third, **options))
    output = tmp_path / "merged"
    completed = merge_cli(reports.here, third, "--output", output)
    assert completed.returncode == 2, completed.stderr
    error = json.loads(completed.stdout)["error"]
    assert error["type"] == "UsageError"
    assert "settings.batch_sizes differs ([1] there, [1, 4] in the first)" in error["message"]
    assert not output.exists()


@pytest.mark.slow
def test_different_models_exit_2_naming_the_key(reports: Reports, tmp_path: Path) -> None:
    int8 = tmp_path / "int8"
    shutil.copytree(reports.other, int8)
    document = json.loads((int8 / "results.json").read_text())
    document["models"][0]["precision"] = "int8"
    (int8 / "results.json").write_text(json.dumps(document))
    with pytest.raises(UsageError, match=r"models\[0\]\.precision differs"):
        merge_reports([reports.here, int8], tmp_path / "merged")
    assert not (tmp_path / "merged").exists()


def as_release(report: Path, directory: Path, sha256: str) -> Path:
    """`report` as a release directory would hold it (bench/results.json) of a source model
    with `sha256`."""
    shutil.copytree(report, directory / "bench")
    source = {"path": "model", "sha256": sha256}
    (directory / "release.json").write_text(json.dumps({"source_model": source}))
    return directory


@pytest.mark.slow
def test_releases_of_different_source_models_exit_2_naming_the_key(
    reports: Reports, tmp_path: Path
) -> None:
    first = as_release(reports.here, tmp_path / "first", "a" * 64)
    second = as_release(reports.other, tmp_path / "second", "b" * 64)
    with pytest.raises(UsageError, match=r"source_model\.sha256 differs \(\"b+\" there"):
        merge_reports([first, second], tmp_path / "merged")
    merged = merge_reports([first, reports.other], tmp_path / "merged")  # a bench has no sha
    assert [source.source_sha256 for source in merged.sources] == ["a" * 64, None]


@pytest.mark.slow
def test_output_is_never_replaced_silently_nor_an_input(reports: Reports, tmp_path: Path) -> None:
    output = tmp_path / "merged"
    merge_reports([reports.here, reports.other], output)
    with pytest.raises(UsageError, match="already exists; pass --force"):
        merge_reports([reports.here, reports.other], output)
    merge_reports([reports.here, reports.other], output, force=True)
    with pytest.raises(UsageError, match="would replace the input"):
        merge_reports([reports.here, reports.other], reports.other, force=True)
    with pytest.raises(UsageError, match="given twice"):
        merge_reports([reports.here, reports.here], tmp_path / "again")
    assert rows_of(reports.other)  # untouched


def test_not_a_report_is_exit_1_and_missing_is_exit_2(tmp_path: Path) -> None:
    completed = merge_cli(tmp_path, "--output", tmp_path / "out")
    assert completed.returncode == 1
    assert (
        "neither a `trtconv bench --report` directory"
        in json.loads(completed.stdout)["error"]["message"]
    )
    completed = merge_cli(tmp_path / "missing", "--output", tmp_path / "out")
    assert completed.returncode == 2


def test_machine_is_the_gpus_else_the_cpu() -> None:
    cpu = {"cpu": {"model": "Neoverse-V2"}, "gpus": []}
    assert machine_name(cpu) == "Neoverse-V2"
    two_l4 = {**cpu, "gpus": [{"name": "NVIDIA L4"}, {"name": "NVIDIA L4"}]}
    assert machine_name(two_l4) == "2x NVIDIA L4"


def test_first_difference_names_the_key_path() -> None:
    a = {"models": [{"label": "x", "precision": "fp32"}], "settings": {"batch_sizes": [1, 8]}}
    assert first_difference(a, json.loads(json.dumps(a))) is None
    b = {"models": [{"label": "x", "precision": "fp16"}], "settings": {"batch_sizes": [1, 8]}}
    assert first_difference(a, b) == ("models[0].precision", "fp32", "fp16")
    c = {**a, "settings": {"batch_sizes": [1]}}
    assert first_difference(a, c) == ("settings.batch_sizes", [1, 8], [1])
    e = {**a, "models": [*a["models"], {"label": "y"}]}
    assert first_difference(a, e) == ("models (count)", 1, 2)
    d = {**a, "settings": {"batch_sizes": [1, 8], "threads": 4}}
    assert first_difference(a, d) == ("settings.threads", "(absent)", 4)
