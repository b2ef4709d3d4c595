"""One report from bench runs on several machines: the machine becomes a column.

Reads `trtconv bench --report` directories (results.json) and release directories (release.json
and bench/results.json). They merge only when they measured the same models with the same
settings; the machine of each comes from its result's `environment` block (the GPUs, else the
CPU). Speedups stay per machine: each is over the baseline measured on that same machine.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from trtconv.backends import registry
from trtconv.core.errors import InputError, UsageError
from trtconv.core.fsutil import atomic_directory, check_output_free
from trtconv.core.results import JsonResult, optional_key, to_jsonable
from trtconv.environment import BenchEnvironment, Environment, machine_environment
from trtconv.measure.bench_result import ROW_KEYS, BenchResult, BenchRow, ModelInfo, Settings
from trtconv.report.plots import PlotView, write_plots
from trtconv.report.writers import (
    TABLE_COLUMNS,
    environment_lines,
    format_value,
    markdown_table,
    model_cells,
    write_csv,
)
from trtconv.report.writers import write_json as write_result_json

T = TypeVar("T")

MERGE_SCHEMA_VERSION = 1
MERGED_KIND = "bench-merge"  # the merged document's `kind`: not a run to merge again
RESULTS_JSON = "results.json"
RELEASE_JSON = "release.json"
BENCH_KEYS = ("schema_version", "baseline", "order", "models", "results", "settings", "environment")
# What identifies a model across machines (its path differs from one runner to the next).
MODEL_IDENTITY = ("label", "backend", "precision", "xla", "kind", "is_baseline")
# The per-machine tables of report.md and the terminal: (title, row key).
PIVOTS = (
    ("Throughput, samples/s", "throughput_per_s"),
    ("Speedup over the baseline on the same machine", "speedup_vs_baseline"),
    ("Latency p50, ms", "latency_ms_p50"),
    ("Latency p99, ms", "latency_ms_p99"),
)
CSV_KEYS = ("machine", *ROW_KEYS)
SEPARATOR = " @ "  # plot series: "model @ machine"


@dataclass
class BenchSource:
    """One directory given to merge: its bench result and, for a release, its source model."""

    directory: Path
    kind: str  # "bench" or "release"
    result: BenchResult
    source_sha256: str | None = None


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


def pivot(result: MergeResult, key: str) -> tuple[list[str], list[list[str]]]:
    """One figure per machine side by side: headers and text rows (model, runs as, batch,
    then one cell per machine), models in measuring order, then batch size."""
    pattern = next(fmt for _, column, fmt in TABLE_COLUMNS if column == key)
    first: dict[tuple[str, int], BenchRow] = {}
    by_machine: dict[tuple[str, int], dict[str, Any]] = {}
    for merged in result.results:
        row = merged.row
        cell = (row.label, row.batch_size)
        first.setdefault(cell, row)
        by_machine.setdefault(cell, {})[merged.machine] = getattr(row, key)
    order = sorted(first, key=lambda cell: (result.order.index(cell[0]), cell[1]))
    rows = [
        [
            *model_cells(first[cell]),
            str(cell[1]),
            *(format_value(by_machine[cell].get(m), pattern) for m in result.machines),
        ]
        for cell in order
    ]
    return ["model", "runs as", "batch", *result.machines], rows


def render_markdown(result: MergeResult, plots: list[str] | None = None) -> str:
    """report.md: the per-machine tables, then each machine's environment, settings, plots."""
    lines = [
        f"# trtconv bench report: {len(result.machines)} machines",
        "",
        f"Models, measured in this order on every machine, each in its own process: "
        f"{', '.join(result.order)}. `*` baseline (**{result.baseline}**): every speedup "
        "is over the baseline measured on the same machine.",
        "",
    ]
    for title, key in PIVOTS:
        lines += [f"## {title}", "", *markdown_table(*pivot(result, key)), ""]
    lines += ["## Machines", ""]
    for source in result.sources:
        lines += [f"### {source.machine}", "", f"- from: `{source.directory}`"]
        lines += environment_lines(source.environment)
        lines += [f"- warning: {w}" for w in source.warnings] + [""]
    settings: dict[str, Any] = to_jsonable(result.settings)
    lines += ["## Settings", "", *(f"- {k}: {v}" for k, v in settings.items()), ""]
    if plots:
        lines += ["## Plots", "", *(f"![{Path(p).stem}]({p})" for p in plots), ""]
    return "\n".join(lines)


def plot_view(result: MergeResult) -> PlotView:
    """The merged rows as the plots read a bench result: one series per model and machine."""
    return PlotView(
        order=[f"{label}{SEPARATOR}{m}" for m in result.machines for label in result.order],
        baseline=f"{result.baseline}{SEPARATOR}{result.machines[0]}",
        rows=[
            replace(merged.row, label=f"{merged.row.label}{SEPARATOR}{merged.machine}")
            for merged in result.results
        ],
    )


def write_merged_report(
    result: MergeResult, directory: Path, force: bool = False
) -> dict[str, str]:
    """results.json, results.csv (a `machine` column first), report.md and the plots, written
    atomically into `directory`. Returns the written files by kind."""
    directory = Path(directory)
    with atomic_directory(directory, force=force) as staging:
        names = [png.name for png in write_plots(plot_view(result), staging)]
        write_result_json(result.to_json(), staging / "results.json")
        rows = [merged.to_json() for merged in result.results]
        write_csv(rows, staging / "results.csv", keys=CSV_KEYS)
        (staging / "report.md").write_text(render_markdown(result, names))
    files = {"json": "results.json", "csv": "results.csv", "markdown": "report.md"}
    files.update({Path(name).stem: name for name in names})
    return {kind: str(directory / name) for kind, name in files.items()}


def _check_paths(directories: list[Path], output: Path, force: bool) -> None:
    if not directories:
        raise UsageError("Give at least one bench report or release directory to merge.")
    resolved = [Path(d).resolve() for d in directories]
    repeated = next((d for d in directories if resolved.count(Path(d).resolve()) > 1), None)
    if repeated is not None:
        raise UsageError(f"{repeated} is given twice; give each run once.")
    target = Path(output).resolve()
    inside = next((d for d, r in zip(directories, resolved, strict=True)
                   if r == target or target in r.parents), None)  # fmt: skip
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
