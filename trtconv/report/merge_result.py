"""The merged report's result, typed: `trtconv report merge --json` and the merged
results.json (made by trtconv.report.merge, written by trtconv.report.merged_report)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtconv.core.results import JsonResult, optional_key
from trtconv.facts.environment import BenchEnvironment, Environment
from trtconv.measure.bench_result import BenchRow, ModelInfo, Settings

MERGE_SCHEMA_VERSION = 1
MERGED_KIND = "bench-merge"  # the merged document's `kind`: not a run to merge again
# What identifies a model across machines (its path differs from one runner to the next).
MODEL_IDENTITY = ("label", "backend", "precision", "xla", "kind", "is_baseline")


@dataclass(frozen=True)
class ModelIdentity:
    """What identifies a model across machines (an entry of the merged `models`): its path
    differs from one runner to the next."""

    label: str
    backend: str
    precision: str
    xla: bool
    kind: str
    is_baseline: bool

    @classmethod
    def of(cls, model: ModelInfo) -> ModelIdentity:
        return cls(*(getattr(model, key) for key in MODEL_IDENTITY))


@dataclass(frozen=True)
class MergedRow(JsonResult):
    """A row of the merged `results`: the machine it was measured on, then the run's row."""

    machine: str
    row: BenchRow

    def to_json(self) -> dict[str, Any]:
        """{"machine": ..., **the row}."""
        return {"machine": self.machine, **self.row.to_json()}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> MergedRow:
        """The row a `to_json` document describes."""
        return cls(str(document["machine"]), BenchRow.from_json(document))


@dataclass
class MergedSource:
    """A run in the merged report (an entry of `sources`): where it came from, its machine and
    what it said about itself."""

    directory: Path
    kind: str  # "bench" or "release"
    machine: str
    baseline_model: str | None = None
    source_sha256: str | None = None  # a release's source model
    harness_overhead_ms: float | None = None
    warnings: list[str] = field(default_factory=list)
    environment: BenchEnvironment = field(default_factory=BenchEnvironment)


@dataclass(kw_only=True)
class MergeResult(JsonResult):
    """The merged report (`trtconv report merge --json`; results.json of the merged report).

    `results` are every run's rows, each with its `machine` first; `models` the models'
    identity; `environment` where the merge ran; `report` the written files by kind.
    """

    schema_version: int = MERGE_SCHEMA_VERSION
    kind: str = MERGED_KIND
    baseline: str
    order: list[str]
    machines: list[str]
    models: list[ModelIdentity]
    settings: Settings
    sources: list[MergedSource]
    results: list[MergedRow]
    environment: Environment = field(default_factory=Environment)
    report: dict[str, str] | None = optional_key()
