"""ReleaseResult: release.json's keys as recorded before it was typed, and a lossless round trip.

test_release_run.py checks the same on real releases; this builds the document from a judged
target without running one.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.conversions import bench_row, converted
from trtconv.facts.environment import Environment
from trtconv.facts.hardware import CpuBlock, GpuBlock
from trtconv.measure.bench_result import BenchResult, BenchRow, Settings
from trtconv.release.config import load_config
from trtconv.release.document import (
    ReleaseDocument,
    ReleaseResult,
    SourceModel,
    StepEntry,
    TargetEntry,
)
from trtconv.release.markdown import release_markdown
from trtconv.release.verdict import judge_targets

KEYS = json.loads(Path(__file__).with_name("release_keys.json").read_text())


def judged_document(tmp_path: Path) -> ReleaseDocument:
    """A release of one converted target with figures that pass its gates, judged."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "saved_model.pb").write_bytes(b"")
    config = tmp_path / "release.toml"
    config.write_text(
        f'[model]\npath = "{model}"\n[[targets]]\nbackend = "ort"\nprecision = "fp32"\n'
        "[gates]\nmin_speedup = 1.0\nmax_accuracy_drop = 0.01\n"
    )
    release = load_config(config)
    row = bench_row(batch_size=8, throughput_per_s=900.5, speedup_vs_baseline=2.0)
    target = TargetEntry("ort-fp32", "ort", "fp32", converted("ort", "fp32"))
    target.artifact, target.artifact_sha256, target.bench = "artifacts/ort-fp32", "ab", [row]
    document = ReleaseDocument(
        config=release,
        config_sha256="cd",
        release_dir=str(tmp_path / "out"),
        source_model=SourceModel(str(model), "ef", False, None),
        targets=[target],
        bench=bench_of([row]),
        plots=[],
        steps=[StepEntry("convert-ort-fp32", False, "not run before", 1.25, 1.25)],
        environment=Environment(),
        created_at="2024-01-01T00:00:00Z",
        native_bench=[bench_row(batch_size=8, throughput_per_s=450.25)],
    )
    document.recommendation, document.recommendation_reason = judge_targets(release, [target])
    return document


def bench_of(rows: list[BenchRow]) -> BenchResult:
    """A bench document holding `rows` (no models, default settings)."""
    settings = Settings(batch_sizes=(8,), data="random", device="cpu")
    return BenchResult(
        baseline="native",
        baseline_model="model",
        baseline_reason="the first SavedModel given",
        order=[],
        models=[],
        results=rows,
        harness_overhead_ms=None,
        settings=settings,
        threads=None,
    )


def test_release_json_has_the_recorded_keys_in_their_order(tmp_path: Path) -> None:
    document = judged_document(tmp_path).result().to_json()
    target = document["targets"][0]
    assert list(document) == KEYS["document"]
    assert list(target) == KEYS["target"]
    assert list(target["gates"][0]) == KEYS["gate"]
    assert list(document["recommendation"]) == KEYS["recommendation"]
    assert list(document["steps"][0]) == KEYS["step"]
    assert list(document["config"]["targets"][0]) == KEYS["config_target"]
    assert document["verdict"] == "passed" and document["exit_code"] == 0
    assert document["timings"] == {"convert-ort-fp32": 1.25, "total_seconds": 0.0}
    assert document["reused_steps"] == []
    assert json.loads(json.dumps(document)) == document  # JSON types only


def test_result_loads_back_as_itself(tmp_path: Path) -> None:
    result = judged_document(tmp_path).result()
    assert result.recommendation is not None and result.targets[0].passed
    loaded = ReleaseResult.from_json(json.loads(json.dumps(result.to_json())))
    assert loaded == result
    assert loaded.to_json() == result.to_json()


def test_release_md_names_the_machine_from_the_typed_environment(tmp_path: Path) -> None:
    document = judged_document(tmp_path)
    document.environment = Environment(
        python="3.12.1",
        platform="Linux",
        cpu=CpuBlock("AMD EPYC 9R14", "x86_64", 2, {"avx512_vnni": True}),
        gpus=[GpuBlock("NVIDIA L4"), GpuBlock("NVIDIA L4")],
        libraries={"onnxruntime": "1.20.1", "tensorrt": None},
        commit=None,
    )
    saved = json.loads(json.dumps(document.result().to_json()))  # as release.json reads back
    markdown = release_markdown(ReleaseResult.from_json(saved))
    assert "- CPU: AMD EPYC 9R14 (2 cores)\n- GPUs: NVIDIA L4, NVIDIA L4\n" in markdown
    assert "- Python 3.12.1, commit unknown\n- Libraries: onnxruntime 1.20.1\n" in markdown
