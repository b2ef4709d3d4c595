"""`convert --backend best`: convert with every backend and precision that can run here, validate
each, time each in the bench harness, keep the fastest that passed validation.

Everything the candidates share is made once: the native model and its outputs on the held-out
data, the calibration data, the ONNX export and each Q/DQ model (`conversion.Workspace`). Each
candidate is converted into its own folder in a scratch directory and validated exactly as
`convert` validates; those that pass are benchmarked together, with the native SavedModel as the
baseline, in one `trtconv bench` run at one batch size (backends with a throughput mode are also
timed in it). The winner's folder becomes the output, its manifest carrying the whole table
(`conversion_summary.tournament`); the rules of the decision are in `trtconv.tournament`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from trtconv import tournament
from trtconv.backends import registry
from trtconv.backends.runner import Runner
from trtconv.core.errors import (
    AccuracyError,
    ConversionError,
    MissingDependencyError,
    TrtconvError,
)
from trtconv.core.fsutil import atomic_directory
from trtconv.manifest import Manifest, write_manifest
from trtconv.options import BenchOptions, Contest
from trtconv.report.schema import BenchRow
from trtconv.tournament import Candidate

log = logging.getLogger(__name__)

THROUGHPUT_SUFFIX = "+throughput"
NO_CALIBRATION = "int8 needs calibration data and the model card names none"
CALIBRATION_FIX = "pass --calib-data digits|PATH.npz|IMAGE_DIR"


def candidates(precision: str | None, int8_data: bool) -> list[Candidate]:
    """Every converter x precision (only `precision` when given), in registry order; those that
    cannot run here are already out, with the reason and the fix."""
    found = []
    for backend in registry.converters():
        for name in backend.precisions:
            if precision is not None and name != precision:
                continue
            candidate = Candidate(backend.name, name)
            verdict = registry.support(backend.name, name)
            if not verdict.ok:
                candidate.drop(tournament.NOT_AVAILABLE, verdict.reason, verdict.fix)
            elif name == "int8" and not int8_data:
                candidate.drop(tournament.NOT_AVAILABLE, NO_CALIBRATION, CALIBRATION_FIX)
            found.append(candidate)
    return found


def run(
    plan: Any, entrants: list[Candidate], native: Runner, contest: Contest, force: bool
) -> dict[str, Any]:
    """Convert, validate and time every candidate still in `entrants`; write the winner to
    `plan.output` (atomically). Returns the tournament block of the result.

    `plan` is the base `conversion.Plan` (data read). Raises AccuracyError (4) when candidates
    converted but none passed validation, MissingDependencyError (3) when none could run here,
    ConversionError (1) when none converted; nothing is written then.
    """
    from trtconv.conversion import Workspace, reference_outputs
    from trtconv.outputs.compare import output_roles

    assert plan.held_out is not None
    with atomic_directory(plan.output, force) as staging, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        space = Workspace(native, reference_outputs(native, plan.held_out), work / "shared")
        space.work.mkdir()
        plan.roles = output_roles(plan.saved_model, space.reference, plan.judging)
        converted = {
            c.label: done for c in entrants if (done := _convert(plan, space, c, work)) is not None
        }
        entrants += _time(plan, entrants, converted, contest)
        winner = tournament.decide(entrants, contest.batch_size)
        if winner is not None:
            winner.artifact = str(plan.output)  # the others are discarded with the scratch dir
        table = _table(entrants, winner, contest)
        if winner is None:
            raise no_winner(entrants, table)
        _crown(winner, converted[winner.label], table, staging)
    return table


def _convert(
    plan: Any, space: Any, candidate: Candidate, work: Path
) -> tuple[Path, Manifest] | None:
    """Convert and validate one candidate into work/BACKEND-PRECISION; drop it on failure."""
    from trtconv.conversion import convert_into

    if candidate.verdict:
        return None
    directory = work / candidate.label
    directory.mkdir()
    entry = replace(
        plan,
        backend=registry.get(candidate.backend),
        backend_reason="--backend best",
        precision=candidate.precision,
        calibration=plan.calibration if candidate.precision == "int8" else None,
    )
    log.info("best: converting %s", candidate.name)
    try:
        manifest, report = convert_into(entry, space, directory)
    except TrtconvError as exc:
        candidate.drop(tournament.CONVERSION_FAILED, str(exc))
        return None
    candidate.conversion_seconds = manifest.conversion_seconds
    candidate.top1_agreement = report.top1_agreement
    errors = [o.max_abs_error for o in report.outputs.values() if o.max_abs_error is not None]
    candidate.max_abs_error = max(errors, default=None)
    if not report.passed:
        candidate.drop(tournament.FAILED_VALIDATION, report.failures())
    return directory, manifest


def _time(
    plan: Any,
    entrants: list[Candidate],
    converted: dict[str, tuple[Path, Manifest]],
    contest: Contest,
) -> list[Candidate]:
    """Bench the validated candidates (and their throughput modes) in one run; fill in their
    figures. Returns the throughput-mode candidates the bench added."""
    from trtconv.bench.harness import bench

    passed = [c for c in entrants if not c.verdict]
    if not passed:
        return []
    paths = [plan.saved_model, *(converted[c.label][0] for c in passed)]
    log.info("best: timing %d candidate(s) at batch %d", len(passed), contest.batch_size)
    options = BenchOptions(
        models=tuple(paths),
        batch_sizes=(contest.batch_size,),
        duration_s=None if contest.iterations else contest.duration_s,
        iterations=contest.iterations,
        threads=contest.threads,
        data=plan.data_spec,
        throughput=True,
    )
    rows = {row.label: row for row in bench(options).results}
    added = []
    for candidate in passed:
        _fill(candidate, rows.get(candidate.label))
        if candidate.label + THROUGHPUT_SUFFIX in rows:
            extra = replace(candidate, mode=tournament.THROUGHPUT)
            _fill(extra, rows[candidate.label + THROUGHPUT_SUFFIX])
            added.append(extra)
    return added


def _fill(candidate: Candidate, row: BenchRow | None) -> None:
    if row is not None:
        candidate.throughput_per_s = row.throughput_per_s
        candidate.latency_ms_p50 = row.latency_ms_p50
        candidate.speedup_vs_native = row.speedup_vs_baseline


def _table(entrants: list[Candidate], winner: Candidate | None, contest: Contest) -> dict[str, Any]:
    """The tournament block: the rules, the winner and every candidate in table order."""
    return {
        "batch_size": contest.batch_size,
        "duration_s": None if contest.iterations else contest.duration_s,
        "iterations": contest.iterations,
        "threads": contest.threads,
        "rule": "fastest (samples/s at batch_size) of those that passed validation",
        "winner": winner.name if winner else None,
        "candidates": [c.to_dict() for c in tournament.ordered(entrants)],
    }


def no_winner(entrants: list[Candidate], table: dict[str, Any]) -> TrtconvError:
    """The error when nobody won: exit 3 when no candidate could run here, 4 (carrying the
    tournament as the result) when some converted but failed validation, else 1."""
    from trtconv.conversion import RESULT_SCHEMA_VERSION

    tried = [c for c in entrants if c.verdict != tournament.NOT_AVAILABLE]
    if not tried:
        groups = tournament.absent_groups([c.to_dict() for c in entrants])
        detail = "; ".join(f"{names}: {reason}" for names, reason, _ in groups)
        return MissingDependencyError(f"--backend best: nothing can run here ({detail}).")
    detail = "; ".join(f"{c.name}: {c.verdict}: {c.reason}" for c in tried)
    message = f"--backend best: no candidate passed validation ({detail})."
    if any(c.verdict == tournament.FAILED_VALIDATION for c in tried):
        result = {"schema_version": RESULT_SCHEMA_VERSION, "artifact": None, "tournament": table}
        return AccuracyError(message, result)
    return ConversionError(message)


def _crown(
    winner: Candidate,
    converted: tuple[Path, Manifest],
    table: dict[str, Any],
    staging: Path,
) -> None:
    """Write the winner's artifact into `staging` with the tournament in its manifest."""
    directory, manifest = converted
    manifest.backend_reason = f"--backend best: {winner.reason}"
    manifest.conversion_summary["tournament"] = table
    if winner.mode == tournament.THROUGHPUT:
        # Runners of this artifact run it in its backend's throughput mode by default.
        manifest.conversion_summary["run_options"] = {"throughput": True}
    write_manifest(directory, manifest)
    shutil.copytree(directory, staging, dirs_exist_ok=True)
    log.info("best: %s won (%s)", winner.name, winner.reason)
