"""`convert --backend best`: convert with every backend and precision that can run here, validate
each, time each in the bench harness, keep the fastest that passed validation.

Everything the candidates share is made once: the native model and its outputs on the held-out
data, the calibration data, the ONNX export and each Q/DQ model (`conversion.Workspace`). Each
candidate is converted into its own folder in a scratch directory and validated exactly as
`convert` validates; those that pass are benchmarked together, with the native SavedModel as the
baseline, in one `trtconv bench` run at one batch size (backends with a throughput mode are also
timed in it). The winner's folder becomes the output, its manifest carrying the whole table
(`conversion_summary.tournament`); the rules of the decision are in `trtconv.convert.tournament`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import trtconv.convert.tournament as tournament
from trtconv.artifact.manifest import Manifest, read_manifest, write_manifest
from trtconv.backends import registry
from trtconv.bench.harness import bench
from trtconv.calib.judged_data import data_spec
from trtconv.calib.readers import RANDOM
from trtconv.convert.convert_result import ConvertResult
from trtconv.convert.data import ConversionData, deciding_data, read_data
from trtconv.convert.plan import ConversionPlan, default_output, refusal
from trtconv.convert.single import conversion_result
from trtconv.convert.tournament import Entrant, TournamentTable
from trtconv.convert.workspace import Workspace, convert_into, open_workspace
from trtconv.core.errors import (
    AccuracyError,
    ConversionError,
    MissingDependencyError,
    TrtconvError,
)
from trtconv.core.fsutil import atomic_directory, check_output_free
from trtconv.core.model_io import ModelSignature
from trtconv.core.precision import Precision
from trtconv.core.progress import Progress, Steps
from trtconv.measure.bench_result import BenchRow
from trtconv.options.bench import BenchOptions
from trtconv.options.convert import Contest, ConvertOptions
from trtconv.outputs.confidence import INCONCLUSIVE
from trtconv.outputs.exact import samples_to_decide
from trtconv.protocol.runner import Runner, RunOptions

log = logging.getLogger(__name__)

THROUGHPUT_SUFFIX = "+throughput"
NO_CALIBRATION = "int8 needs calibration data and the model card names none"
CALIBRATION_FIX = "pass --calib-data digits|PATH.npz|IMAGE_DIR"
RUNS_ELSEWHERE_FIX = "run on a machine with a GPU, or convert it alone with its --backend"


def candidates(
    precision: str | None, int8_data: bool, saved_model: Path, signature: ModelSignature
) -> list[Entrant]:
    """Every converter x precision (only `precision` when given), in registry order; those that
    cannot convert this model (`plan.refusal`) or cannot run here are already out, with the
    reason and the fix."""
    found = []
    for backend in registry.converters():
        refused = refusal(backend, saved_model, signature)
        for name in backend.precisions:
            if precision is not None and name != precision:
                continue
            candidate = Entrant(backend.name, name)
            verdict = registry.support(backend.name, name)
            if refused:
                candidate.drop(tournament.NOT_AVAILABLE, refused)
            elif not verdict.ok:
                candidate.drop(tournament.NOT_AVAILABLE, verdict.reason, verdict.fix)
            elif not verdict.runs_here:  # converts here, but cannot be timed here
                candidate.drop(tournament.NOT_AVAILABLE, verdict.reason, RUNS_ELSEWHERE_FIX)
            elif name == Precision.INT8 and not int8_data:
                candidate.drop(tournament.NOT_AVAILABLE, NO_CALIBRATION, CALIBRATION_FIX)
            found.append(candidate)
    return found


def convert_best(
    options: ConvertOptions,
    signature: ModelSignature,
    progress: Progress | None = None,
    source: Path | None = None,
) -> ConvertResult:
    """`convert --backend best`: the result of the winner, as if converted with its backend
    alone, plus the `tournament` table. Nothing is loaded when no candidate can run here.
    `signature` and `source` as for `convert_single`.

    Raises what `run` raises, before anything is written.
    """
    named = source or options.saved_model
    output = options.output or default_output(named, registry.BEST, options.precision)
    check_output_free(output, options.force)
    has_data = options.calib_data is not None or data_spec(None, options.saved_model)[0] != RANDOM
    entrants = candidates(options.precision, has_data, options.saved_model, signature)
    if all(candidate.verdict for candidate in entrants):
        raise no_winner(entrants, None)
    base = ConversionPlan(
        options=options,
        backend=registry.native(),
        precision=options.precision or "",
        output=Path(output),
        reason="",
        passed_over=(),
        source=source,
    )
    live = [base.for_candidate(registry.get(c.backend), c.precision) for c in entrants]
    live = [plan for plan, c in zip(live, entrants, strict=True) if not c.verdict]
    int8 = any(plan.precision == Precision.INT8 for plan in live)
    run_options = RunOptions(signature=signature.name)
    with registry.native().runner(options.saved_model, None, run_options) as native:
        options.judging.check_names(native.signature.output_names)
        data = read_data(options, native, int8, any(plan.calibrated for plan in live))
        table = run(base, entrants, native, data)
    manifest = read_manifest(base.output)
    winner = replace(
        base,
        backend=registry.get(manifest.backend),
        precision=manifest.precision,
        reason=manifest.backend_reason,
    )
    result = conversion_result(winner, manifest)
    result.tournament = table
    return result


def run(
    base: ConversionPlan, entrants: list[Entrant], native: Runner, data: ConversionData
) -> TournamentTable:
    """Convert, validate and time every candidate still in `entrants`; write the winner to
    `base.output` (atomically). Returns the tournament block of the result.

    Raises AccuracyError (4) when candidates converted but none passed validation,
    MissingDependencyError (3) when none could run here, ConversionError (1) when none
    converted; nothing is written then.
    """
    contest = base.options.contest
    with (
        atomic_directory(base.output, base.options.force) as staging,
        tempfile.TemporaryDirectory() as tmp,
    ):
        work = Path(tmp)
        (work / "shared").mkdir()
        space = open_workspace(base, native, data, work / "shared")
        converted = {
            c.label: done for c in entrants if (done := _convert(base, space, c, work)) is not None
        }
        entrants += _time(base, data.spec, entrants, converted)
        winner = tournament.decide(entrants, contest.batch_size)
        if winner is not None:
            winner.artifact = str(base.output)  # the others are discarded with the scratch dir
        table = _table(entrants, winner, contest)
        if winner is None:
            raise no_winner(entrants, table)
        _crown(winner, converted[winner.label], table, staging)
    return table


def _convert(
    base: ConversionPlan, space: Workspace, candidate: Entrant, work: Path
) -> tuple[Path, Manifest] | None:
    """Convert and validate one candidate into work/BACKEND-PRECISION; drop it on failure."""
    if candidate.verdict:
        return None
    directory = work / candidate.label
    directory.mkdir()
    entry = base.for_candidate(registry.get(candidate.backend), candidate.precision)
    log.info("best: converting %s", candidate.name)
    try:
        manifest, report = convert_into(entry, space, directory, Steps(None, 1))
    except TrtconvError as exc:
        candidate.drop(tournament.CONVERSION_FAILED, str(exc))
        return None
    candidate.conversion_seconds = manifest.conversion_seconds
    candidate.top1_agreement = report.top1_agreement
    errors = [o.max_abs_error for o in report.outputs.values() if o.max_abs_error is not None]
    candidate.max_abs_error = max(errors, default=None)
    if not report.passed and report.verdict == INCONCLUSIVE:
        needed = samples_to_decide(report)
        decide = f"; {deciding_data(space.data, needed)}" if needed else ""
        candidate.drop(tournament.INCONCLUSIVE_VALIDATION, report.failures() + decide)
    elif not report.passed:
        candidate.drop(tournament.FAILED_VALIDATION, report.failures())
    return directory, manifest


def _time(
    base: ConversionPlan,
    data_spec: str,
    entrants: list[Entrant],
    converted: dict[str, tuple[Path, Manifest]],
) -> list[Entrant]:
    """Bench the validated candidates (and their throughput modes) in one run; fill in their
    figures. Returns the throughput-mode candidates the bench added."""
    contest = base.options.contest
    passed = [c for c in entrants if not c.verdict]
    if not passed:
        return []
    paths = [base.saved_model, *(converted[c.label][0] for c in passed)]
    log.info("best: timing %d candidate(s) at batch %d", len(passed), contest.batch_size)
    timed = BenchOptions(
        models=tuple(paths),
        signature=base.options.signature,
        input_shapes=base.options.input_shapes,
        batch_sizes=(contest.batch_size,),
        duration_s=None if contest.iterations else contest.duration_s,
        iterations=contest.iterations,
        threads=contest.threads,
        data=data_spec,
        throughput=True,
    )
    rows = {row.label: row for row in bench(timed).results}
    added = []
    for candidate in passed:
        _fill(candidate, rows.get(candidate.label))
        if candidate.label + THROUGHPUT_SUFFIX in rows:
            extra = replace(candidate, mode=tournament.THROUGHPUT)
            _fill(extra, rows[candidate.label + THROUGHPUT_SUFFIX])
            added.append(extra)
    return added


def _fill(candidate: Entrant, row: BenchRow | None) -> None:
    if row is not None:
        candidate.throughput_per_s = row.throughput_per_s
        interval = row.throughput_per_s_ci95
        candidate.throughput_per_s_ci95 = list(interval) if interval is not None else None
        candidate.latency_ms_p50 = row.latency_ms_p50
        candidate.speedup_vs_native = row.speedup_vs_baseline


def _table(entrants: list[Entrant], winner: Entrant | None, contest: Contest) -> TournamentTable:
    """The tournament block: the rules, the winner and every candidate in table order."""
    return TournamentTable(
        batch_size=contest.batch_size,
        duration_s=None if contest.iterations else contest.duration_s,
        iterations=contest.iterations,
        threads=contest.threads,
        winner=winner.name if winner else None,
        within_noise_of=_within_noise_of(entrants, winner),
        # Copies: the table is the record of the verdicts given, whatever happens to entrants.
        candidates=[replace(c) for c in tournament.ordered(entrants)],
    )


def _within_noise_of(entrants: list[Entrant], winner: Entrant | None) -> str | None:
    """The runner-up whose throughput interval overlaps the winner's (None: none does)."""
    if winner is None:
        return None
    timed = [c for c in entrants if c.verdict in (tournament.WINNER, tournament.SLOWER)]
    rival = tournament.runner_up_within_noise(timed, winner)
    return rival.name if rival is not None else None


def no_winner(entrants: list[Entrant], table: TournamentTable | None) -> TrtconvError:
    """The error when nobody won: exit 3 when no candidate could run here, 4 (carrying the
    tournament as the result) when some converted but failed validation or were inconclusive
    (each candidate's reason says which data would decide it), else 1."""
    tried = [c for c in entrants if c.verdict != tournament.NOT_AVAILABLE]
    if not tried:
        groups = tournament.absent_groups(entrants)
        detail = "; ".join(f"{names}: {reason}" for names, reason, _ in groups)
        return MissingDependencyError(f"--backend best: nothing can run here ({detail}).")
    detail = "; ".join(f"{c.name}: {c.verdict}: {c.reason}" for c in tried)
    judged = (tournament.FAILED_VALIDATION, tournament.INCONCLUSIVE_VALIDATION)
    undecided = any(c.verdict == tournament.INCONCLUSIVE_VALIDATION for c in tried)
    # Inconclusive is not failed: the data could not show the budget either way.
    outcome = "none passed and some are inconclusive" if undecided else "none passed"
    message = f"--backend best: no candidate passed validation, {outcome} ({detail})."
    if any(c.verdict in judged for c in tried):
        return AccuracyError(message, ConvertResult(artifact=None, tournament=table))
    return ConversionError(message)


def _crown(
    winner: Entrant,
    converted: tuple[Path, Manifest],
    table: TournamentTable,
    staging: Path,
) -> None:
    """Write the winner's artifact into `staging` with the tournament in its manifest."""
    directory, manifest = converted
    manifest.backend_reason = f"--backend best: {winner.reason}"
    manifest.conversion_summary["tournament"] = table.to_json()
    if winner.mode == tournament.THROUGHPUT:
        # Runners of this artifact run it in its backend's throughput mode by default.
        manifest.conversion_summary["run_options"] = {"throughput": True}
    write_manifest(directory, manifest)
    shutil.copytree(directory, staging, dirs_exist_ok=True)
    log.info("best: %s won (%s)", winner.name, winner.reason)
