"""Run a release: (train) → convert each target → validate → bench → gates → recommendation.

steps.py runs (or reuses) each step, verdict.py judges the targets, rundir.py guards the release
directory; this module strings them together and writes release.json and release.md.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from trtconv import __version__
from trtconv.backends import registry
from trtconv.core.errors import GateError
from trtconv.core.fsutil import sha256_path, write_atomic
from trtconv.core.interrupts import sigterm_as_interrupt
from trtconv.core.progress import Progress
from trtconv.facts.environment import machine_environment
from trtconv.measure.bench_result import BenchResult
from trtconv.options.release import ReleaseOptions
from trtconv.release.config import load_config
from trtconv.release.document import (
    Conversion,
    ReleaseDocument,
    ReleaseResult,
    SourceModel,
    TargetEntry,
)
from trtconv.release.markdown import release_markdown
from trtconv.release.rundir import (
    LOG_FILE,
    RELEASE_JSON,
    RELEASE_MD,
    check_release_dir,
    clean_release_dir,
    exclusive,
    release_log,
)
from trtconv.release.settings import ReleaseConfig, Target
from trtconv.release.steps import ReleaseRun
from trtconv.release.store import write_json_atomic
from trtconv.release.verdict import bench_rows_by_label, judge_targets
from trtconv.train.pipeline import TrainResult

log = logging.getLogger(__name__)

NATIVE = "native"
DEFAULT_OUTPUT_ROOT = Path("release-out")  # git-ignored


def default_output(config_path: Path) -> Path:
    """release-out/CONFIG_STEM under the working directory."""
    return DEFAULT_OUTPUT_ROOT / Path(config_path).stem


def release(options: ReleaseOptions, progress: Progress | None = None) -> ReleaseResult:
    """Run a release from its TOML config; return its result (also written as release.json).

    With a recommended artifact its `exit_code` is 0. Raises GateError (exit 4, carrying the whole
    result, also written) when no target passed every gate, UsageError for a bad config or
    output, and TrtconvError for a failure that stops the whole release (training,
    benchmarking); a target that fails to convert does not.
    """
    config = load_config(Path(options.config))
    directory = Path(options.output or default_output(options.config)).resolve()
    check_release_dir(directory, options.resume, options.force)
    directory.mkdir(parents=True, exist_ok=True)
    with exclusive(directory):
        clean_release_dir(directory, options.force)
        with release_log(directory / LOG_FILE), sigterm_as_interrupt():
            log.info("release %s into %s (trtconv %s)", options.config, directory, __version__)
            result = run_release(config, directory, options.resume, progress)
    if result.recommendation is None:
        raise GateError(result.recommendation_reason, result=result)
    return result


def run_release(
    config: ReleaseConfig, directory: Path, resume: bool, progress: Progress | None = None
) -> ReleaseResult:
    """The steps, then the verdict and the reports (release.json, release.md); returns the
    release's result."""
    started = time.perf_counter()
    run = ReleaseRun(config, directory, resume, progress)
    source, card = run.source_model()
    source_sha = sha256_path(source)
    targets = [
        _target_entry(target, run.convert(target, source, source_sha), directory)
        for target in config.targets
    ]
    artifacts = {t.id: directory / t.artifact for t in targets if t.artifact is not None}
    for entry, target in zip(targets, config.targets, strict=True):
        if entry.artifact is not None:
            entry.eval = run.evaluate(target, artifacts[entry.id], source, source_sha)
    bench = run.bench(source, source_sha, artifacts)
    rows = bench_rows_by_label(bench, [NATIVE, *artifacts])
    for entry in targets:
        entry.bench = rows.get(entry.id, [])
    serving = None
    if config.serving.latency_budget_ms is not None:
        serving = run.serving(source, source_sha, artifacts)
        by_id = {entry.id: entry for entry in targets}
        # Rows in the order served: native first, then the artifacts.
        for target_id, row in zip(artifacts, serving.rows[1:], strict=True):
            by_id[target_id].serving = row
    document = _document(config, directory, run, (source, source_sha, card), targets, bench)
    document.native_bench = rows[NATIVE]
    document.serving = serving
    document.recommendation, document.recommendation_reason = judge_targets(config, targets)
    if config.deploy.triton and document.recommendation is not None:
        artifact = directory / document.recommendation.artifact
        document.triton_repository = run.deploy(artifact, served=serving is not None)
    document.total_seconds = time.perf_counter() - started
    result = document.result()
    write_json_atomic(directory / RELEASE_JSON, result.to_json())
    write_atomic(directory / RELEASE_MD, release_markdown(result))
    run.finish()
    log.info("verdict: %s (%s)", result.verdict, result.recommendation_reason)
    return result


def _target_entry(target: Target, conversion: Conversion, directory: Path) -> TargetEntry:
    entry = TargetEntry(target.id, target.backend, target.precision, conversion)
    if entry.converted:
        artifact = directory / "artifacts" / target.id
        entry.artifact = _relative(artifact, directory)
        entry.artifact_sha256 = sha256_path(artifact)
    return entry


def _document(
    config: ReleaseConfig,
    directory: Path,
    run: ReleaseRun,
    source: tuple[Path, str, TrainResult | None],
    targets: list[TargetEntry],
    bench: BenchResult,
) -> ReleaseDocument:
    """The document before the verdict; `source` is (SavedModel, its sha256, model card)."""
    path, sha256, card = source
    plots = sorted(_relative(p, directory) for p in (directory / "bench").rglob("*.png"))
    return ReleaseDocument(
        config=config,
        config_sha256=sha256_path(config.source),
        release_dir=str(directory),
        source_model=SourceModel(
            str(path), sha256, card is not None, None if card is None else card.test_accuracy
        ),
        targets=targets,
        bench=bench,
        plots=plots,
        steps=run.steps,
        environment=machine_environment(registry.declared_packages()),
        created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()
