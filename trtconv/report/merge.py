"""One report from bench runs on several machines: the machine becomes a column.

Reads `trtconv bench --report` directories (results.json) and release directories (release.json
and bench/results.json). They merge only when they measured the same models with the same
settings; the machine of each comes from its result's `environment` block (the GPUs, else the
CPU). Speedups stay per machine: each is over the baseline measured on that same machine. The
merged result's types are trtconv.report.merge_result's; trtconv.report.merged_report writes it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from trtconv.backends import registry
from trtconv.core.errors import InputError, UsageError
from trtconv.core.fsutil import check_output_free
from trtconv.core.results import JsonResult, optional_key, to_jsonable
from trtconv.facts.environment import Environment, machine_environment
from trtconv.measure.bench_result import BenchResult, Settings
from trtconv.report.merge_result import (
    MERGED_KIND,
    MergedRow,
    MergedSource,
    MergeResult,
    ModelIdentity,
)
from trtconv.report.merged_report import write_merged_report

T = TypeVar("T")

RESULTS_JSON = "results.json"
RELEASE_JSON = "release.json"
BENCH_KEYS = ("schema_version", "baseline", "order", "models", "results", "settings", "environment")


@dataclass
class BenchSource:
    """One directory given to merge: its bench result and, for a release, its source model."""

    directory: Path
    kind: str  # "bench" or "release"
    result: BenchResult
    source_sha256: str | None = None


@dataclass(frozen=True)
class SourceModelSha:
    """A release's source model as a merge compares it: its sha256 (None: not recorded)."""

    sha256: str | None = None


@dataclass(frozen=True)
class ReleaseSource(JsonResult):
    """What a merge reads of a release.json: the source model its bench measured."""

    source_model: SourceModelSha | None = None


@dataclass(frozen=True, kw_only=True)
class RunIdentity:
    """What must be equal for two runs to share a table, in the order differences are named
    (by key path of its JSON: `settings.batch_sizes`, `source_model.sha256`); the source model
    is compared only between two releases."""

    schema_version: int
    models: list[ModelIdentity]
    order: list[str]
    baseline: str
    settings: Settings
    source_model: SourceModelSha | None = optional_key()

    @classmethod
    def of(cls, source: BenchSource, with_source_model: bool) -> RunIdentity:
        result = source.result
        return cls(
            schema_version=result.schema_version,
            models=[ModelIdentity.of(model) for model in result.models],
            order=result.order,
            baseline=result.baseline,
            settings=result.settings,
            source_model=SourceModelSha(source.source_sha256) if with_source_model else None,
        )


def _read_document(path: Path, reads: Callable[[Mapping[str, Any]], T]) -> T:
    """`reads` applied to the JSON object `path` holds. Raises InputError when the file is not
    readable JSON or holds no object."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path} is not readable JSON ({exc}).") from None
    if not isinstance(document, dict):
        raise InputError(f"{path} must hold a JSON object, found {type(document).__name__}.")
    return reads(document)


def _bench_result(path: Path, document: Mapping[str, Any]) -> BenchResult:
    """The bench result `document` (read from `path`) is. Raises InputError for a merged
    report or a document that is not a bench result."""
    if document.get("kind") == MERGED_KIND:
        raise InputError(f"{path} is already a merged report; merge the runs it came from.")
    missing = [key for key in BENCH_KEYS if key not in document]
    if missing:
        raise InputError(f"{path} is not a bench result: it has no '{missing[0]}'.")
    try:
        return BenchResult.from_json(document)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise InputError(f"{path} is not a bench result this trtconv reads ({exc}).") from None


def read_source(directory: Path) -> BenchSource:
    """Read a bench report or release directory.

    Raises UsageError when it does not exist, InputError when it is neither kind or its JSON is
    unreadable or lacks a bench key.
    """
    directory = Path(directory)
    if not directory.exists():
        raise UsageError(f"{directory} does not exist.")
    kind, sha = "bench", None
    results = directory / RESULTS_JSON
    if (directory / RELEASE_JSON).is_file():
        release = _read_document(directory / RELEASE_JSON, ReleaseSource.from_json)
        kind, results = "release", directory / "bench" / RESULTS_JSON
        sha = release.source_model.sha256 if release.source_model else None
    if not results.is_file():
        raise InputError(
            f"{directory} is neither a `trtconv bench --report` directory ({RESULTS_JSON}) nor a "
            f"release directory ({RELEASE_JSON} and bench/{RESULTS_JSON})."
        )
    result = _read_document(results, lambda document: _bench_result(results, document))
    return BenchSource(directory, kind, result, sha)


def machine_name(block: Mapping[str, Any]) -> str:
    """`2x NVIDIA L4` from the GPUs of an environment block (as JSON), else its CPU model."""
    return Environment.from_json(block).machine


def first_difference(a: Any, b: Any, where: str = "") -> tuple[str, Any, Any] | None:
    """The first key path at which `a` and `b` differ (`settings.batch_sizes`,
    `models[1].precision`), with both values; None when they are equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            path = f"{where}.{key}" if where else str(key)
            if key not in a or key not in b:
                return path, a.get(key, "(absent)"), b.get(key, "(absent)")
            found = first_difference(a[key], b[key], path)
            if found:
                return found
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            nested = any(isinstance(item, (dict, list)) for item in [*a, *b])
            return (f"{where} (count)", len(a), len(b)) if nested else (where, a, b)
        for index, (left, right) in enumerate(zip(a, b, strict=True)):
            found = first_difference(left, right, f"{where}[{index}]")
            if found:
                return found
        return None
    return None if a == b else (where, a, b)


def check_mergeable(sources: list[BenchSource]) -> None:
    """Raise UsageError naming the first key in which a source differs from the first one."""
    reference = sources[0]
    for other in sources[1:]:
        both_releases = reference.kind == other.kind == "release"
        found = first_difference(
            to_jsonable(RunIdentity.of(reference, both_releases)),
            to_jsonable(RunIdentity.of(other, both_releases)),
        )
        if found:
            key, mine, theirs = found
            raise UsageError(
                f"Cannot merge {other.directory} with {reference.directory}: {key} differs "
                f"({json.dumps(theirs)} there, {json.dumps(mine)} in the first); merge runs of "
                "the same models measured with the same settings."
            )


def _machines(sources: list[BenchSource]) -> list[str]:
    """Each source's machine; a name shared by several runs is numbered (`X #1`, `X #2`)."""
    names = [source.result.environment.machine for source in sources]
    counts, seen = Counter(names), Counter[str]()
    numbered = []
    for name in names:
        seen[name] += 1
        numbered.append(f"{name} #{seen[name]}" if counts[name] > 1 else name)
    return numbered


def merge_documents(sources: list[BenchSource]) -> MergeResult:
    """The merged result: every row with its `machine`, one entry per source. Raises
    UsageError when the sources differ in models or settings."""
    check_mergeable(sources)
    machines = _machines(sources)
    first = sources[0].result
    pairs = list(zip(sources, machines, strict=True))
    return MergeResult(
        baseline=first.baseline,
        order=first.order,
        machines=machines,
        models=[ModelIdentity.of(model) for model in first.models],
        settings=first.settings,
        sources=[
            MergedSource(
                directory=source.directory,
                kind=source.kind,
                machine=machine,
                baseline_model=source.result.baseline_model,
                source_sha256=source.source_sha256,
                harness_overhead_ms=source.result.harness_overhead_ms,
                warnings=source.result.warnings,
                environment=source.result.environment,
            )
            for source, machine in pairs
        ],
        results=[
            MergedRow(machine, row) for source, machine in pairs for row in source.result.results
        ],
        environment=machine_environment(registry.declared_packages()),
    )


def _check_paths(directories: list[Path], output: Path, force: bool) -> None:
    if not directories:
        raise UsageError("Give at least one bench report or release directory to merge.")
    resolved = [Path(d).resolve() for d in directories]
    repeated = next((d for d in directories if resolved.count(Path(d).resolve()) > 1), None)
    if repeated is not None:
        raise UsageError(f"{repeated} is given twice; give each run once.")
    target = Path(output).resolve()
    inside = next(
        (
            d
            for d, r in zip(directories, resolved, strict=True)
            if r == target or target in r.parents
        ),
        None,
    )
    if inside is not None:
        raise UsageError(f"--output {output} would replace the input {inside}; write elsewhere.")
    check_output_free(Path(output), force)


def merge_reports(directories: list[Path], output: Path, force: bool = False) -> MergeResult:
    """Merge bench report / release directories into one report written to `output`.

    Returns the merged result with `report` (the written files). Raises UsageError for a
    missing input, an existing output without `force`, or runs that differ in models or
    settings (naming the first differing key), and InputError for an unreadable input.
    """
    _check_paths(directories, output, force)
    result = merge_documents([read_source(Path(d)) for d in directories])
    result.report = write_merged_report(result, output, force=force)
    return result
