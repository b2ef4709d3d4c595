"""`convert`: SavedModel -> validated artifact (manifest.json + payload), written atomically.

Order: everything cheap and certain first (arguments, SavedModel on disk, output free, backend and
precision supported here, SavedModel loads, data readable and fitting the signature), then the
work inside a staging directory that only becomes the output when every step has finished.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trtconv.backends import registry
from trtconv.backends.registry import Backend
from trtconv.backends.request import ConversionOutcome, ConversionRequest
from trtconv.backends.runner import Runner, RunOptions
from trtconv.calib.contract import PreprocessingOptions
from trtconv.calib.sources import ArraySet
from trtconv.core.errors import UsageError
from trtconv.core.fsutil import atomic_directory, check_output_free, dir_size_bytes, sha256_path
from trtconv.core.precision import PRECISIONS
from trtconv.core.progress import Progress, Steps
from trtconv.manifest import Manifest, read_manifest, write_manifest
from trtconv.options import (
    CALIB_METHODS,
    DEFAULT_CALIB_METHOD,
    DEFAULT_FALLBACK_TIME_LIMIT_S,
    INT8_TARGETS,
    Contest,
)
from trtconv.outputs.compare import output_roles, raise_if_failed
from trtconv.outputs.roles import Judging
from trtconv.outputs.tolerance import Tolerance, budget_for
from trtconv.report.validation import ValidationReport, roles_of
from trtconv.savedmodel import check_saved_model_dir

log = logging.getLogger(__name__)

RESULT_SCHEMA_VERSION = 1
DEFAULT_CALIB_SAMPLES = 500
DEFAULT_VALIDATE_SAMPLES = 1000
DEFAULT_BATCH_SIZES = (1, 8, 32)
CALIB_BATCH = 32
# The ONNX export is checked on this many held-out samples before anything runs on it.
EXPORT_CHECK_SAMPLES = 256


@dataclass
class Plan:
    """What was decided before any conversion work starts."""

    saved_model: Path
    output: Path
    backend: Backend
    backend_reason: str
    precision: str
    batch_sizes: tuple[int, ...]
    calib_method: str
    tolerance: float | None = None
    data_spec: str = ""
    calibration: ArraySet | None = None
    held_out: ArraySet | None = None
    int8_target: str = "auto"
    # --min-top1-agreement and --max-accuracy-drop: with `tolerance`, the accuracy budget.
    limits: tuple[float | None, float | None] = (None, None)
    # int8 precision ladder (trtconv.quantize.ladder): None with --no-fallback.
    fallback_time_limit_s: float | None = DEFAULT_FALLBACK_TIME_LIMIT_S
    search: ArraySet | None = None
    search_drawn_from: str = ""
    progress: Progress | None = None
    judging: Judging = field(default_factory=Judging)
    preprocessing: PreprocessingOptions | None = None  # as given; resolved in `contract`
    contract: dict[str, Any] = field(default_factory=dict)  # the manifest's data contract
    passed_over: tuple[str, ...] = ()  # backends `auto` passed over, with their reasons
    steps: Steps = field(default_factory=lambda: Steps(None, 1))
    roles: dict[str, Any] = field(default_factory=dict)  # each output's role, once known

    @property
    def budget(self) -> Tolerance:
        """The precision's tolerance with --tolerance (and per-output ones) and the limits."""
        return budget_for(self.precision, self.tolerance, *self.limits, self.judging.tolerances)


def convert(
    saved_model: Path,
    precision: str | None,
    backend: str = "auto",
    output: Path | None = None,
    calib_data: str | None = None,
    calib_samples: int = DEFAULT_CALIB_SAMPLES,
    calib_method: str = DEFAULT_CALIB_METHOD,
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    validate_samples: int = DEFAULT_VALIDATE_SAMPLES,
    tolerance: float | None = None,
    force: bool = False,
    preprocessing: PreprocessingOptions | None = None,
    int8_target: str = "auto",
    fallback: bool = True,
    fallback_time_limit: float = DEFAULT_FALLBACK_TIME_LIMIT_S,
    min_top1_agreement: float | None = None,
    max_accuracy_drop: float | None = None,
    progress: Progress | None = None,
    judging: Judging | None = None,
    contest: Contest | None = None,
) -> dict[str, Any]:
    """Convert a SavedModel (or a `trtconv train` output) into a validated artifact directory;
    return the result dict.

    `int8_target` (int8 only): where the artifact will run, which sets the weight range of CPU
    int8 models: "auto" (this CPU's class), "vnni" (VNNI/AMX x86 CPUs) or "portable" (any x86).
    `min_top1_agreement`/`max_accuracy_drop` replace the precision's limits (with `tolerance`
    for max abs error, the accuracy budget). When int8 misses that budget on the search data,
    `fallback` climbs the precision ladder (trtconv.quantize.ladder) for at most
    `fallback_time_limit` seconds. `preprocessing` says how raw pixels (image folders, uint8
    arrays) become inputs (default: the model card, else 1/255); `judging` sets output roles and
    per-output tolerances; the manifest records both (`data_contract`, `judging`) for validate,
    bench and release. `progress(done, total, label)` hears about each step (and the ladder's).
    `backend="best"` converts with every backend and precision (only `precision` when given)
    that can run here and keeps the fastest that passes validation, timed as `contest` says
    (trtconv.best); its result adds the `tournament` table.

    Keys: schema_version, artifact, backend, precision, backend_reason (one line),
    backend_passed_over, conversion_seconds, artifact_size_bytes, manifest, validation. Raises
    UsageError (2), InputError (1), MissingDependencyError (3), ConversionError (1), each before
    anything is written except ConversionError; and AccuracyError (4) when validation fails or
    leaves an output not judged, after writing the artifact with its manifest status: the error
    carries the whole result.
    """
    batch_sizes = tuple(batch_sizes)
    _check_arguments(precision, backend, calib_method, batch_sizes, calib_samples, validate_samples)
    _check_choice("--int8-target", int8_target, INT8_TARGETS)
    judging = judging or Judging()
    limits = (min_top1_agreement, max_accuracy_drop)
    budget_for(precision or "fp32", tolerance, *limits, judging.tolerances)  # checks the limits
    if fallback_time_limit <= 0:
        raise UsageError(f"--fallback-time-limit must be positive, found {fallback_time_limit}.")
    saved_model = check_saved_model_dir(Path(saved_model))
    plan = Plan(
        saved_model, Path(output or "."), registry.native(), "--backend best",
        precision or "", batch_sizes, calib_method,
        tolerance=tolerance, int8_target=int8_target, limits=limits, progress=progress,
        fallback_time_limit_s=fallback_time_limit if fallback else None, judging=judging,
        preprocessing=preprocessing,
    )  # fmt: skip
    data = (calib_data, (calib_samples, validate_samples), fallback)
    if backend == registry.BEST:
        plan.output = Path(output) if output else default_output(saved_model, backend, precision)
        return _convert_best(plan, data, contest or Contest(), force)
    return _convert_one(plan, backend, not output, data, force)


def _convert_one(
    plan: Plan,
    backend: str,
    default_output_dir: bool,
    data: tuple[str | None, tuple[int, int], bool],
    force: bool,
) -> dict[str, Any]:
    """convert with one backend (`auto` chooses it), into `plan.output` or, with
    `default_output_dir`, the default for the backend chosen; `data` as for _convert_best."""
    chosen, choice = _choose_backend(backend, plan.precision)
    if default_output_dir:
        plan.output = default_output(plan.saved_model, chosen.name, plan.precision)
    check_output_free(plan.output, force)
    plan.backend, plan.backend_reason, plan.passed_over = chosen, choice.reason, choice.passed_over
    plan.steps = Steps(plan.progress, _step_count(chosen, plan.precision))
    calib_data, samples, fallback = data
    # Loading is the first heavy step: a corrupt or signature-less model fails here, exit 1.
    plan.steps.start(f"loading {plan.saved_model}")
    with registry.native().runner(plan.saved_model, None, RunOptions()) as native:
        plan.judging.check_names(native.signature.output_names)
        plan.steps.start("reading data")
        _read_data(plan, native, calib_data, samples, fallback)
        log.info(
            "converting %s to %s %s (%s)",
            plan.saved_model,
            chosen.name,
            plan.precision,
            choice.reason,
        )
        manifest, report = _convert_staged(plan, native, force)
    plan.steps.finish()
    result = _result(plan, manifest)
    raise_if_failed(report, f"{plan.output} ({chosen.name} {plan.precision})", result)
    return result


def _step_count(backend: Backend, precision: str) -> int:
    """Load, read data, (export ONNX, quantise int8), convert, validate."""
    quantizes = precision == "int8" and backend.qdq_scheme is not None
    return 4 + (1 + quantizes if backend.needs_onnx else 0)


def _result(plan: Plan, manifest: Manifest) -> dict[str, Any]:
    """convert's result document (see `convert`)."""
    size = dir_size_bytes(plan.output)
    seconds = manifest.conversion_seconds
    log.info(
        "wrote %s (%.2f MB) in %.1f s: validation %s",
        plan.output, size / 1e6, seconds, manifest.status,
    )  # fmt: skip
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "artifact": str(plan.output),
        "backend": plan.backend.name,
        "precision": plan.precision,
        "backend_reason": plan.backend_reason,
        "backend_passed_over": list(plan.passed_over),
        "conversion_seconds": seconds,
        "artifact_size_bytes": size,
        "manifest": manifest.to_dict(),
        "validation": manifest.validation,
    }


@dataclass
class Workspace:
    """What every conversion of one SavedModel shares: the native runner, its outputs on the
    held-out data (they check the ONNX export and then each converted model), and a scratch
    directory where the ONNX export and Q/DQ models are made once, however many conversions
    use them (`made`: key -> (path, summary))."""

    native: Runner
    reference: dict[str, Any]
    work: Path
    made: dict[tuple[Any, ...], tuple[Path, dict[str, Any]]] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)  # backends' own (ConversionRequest)


def _convert_best(
    plan: Plan, data: tuple[str | None, tuple[int, int], bool], contest: Contest, force: bool
) -> dict[str, Any]:
    """`convert --backend best` (trtconv.best): `data` is (calib_data, (calibration, validation)
    samples, int8 fallback). Nothing is loaded when no candidate can run here."""
    from trtconv import best
    from trtconv.calib.evaluation import data_spec
    from trtconv.calib.readers import RANDOM

    calib_data, samples, fallback = data
    check_output_free(plan.output, force)
    has_data = calib_data is not None or data_spec(None, plan.saved_model)[0] != RANDOM
    entrants = best.candidates(plan.precision or None, has_data)
    if all(candidate.verdict for candidate in entrants):
        raise best.no_winner(entrants, {})
    int8 = any(c.precision == "int8" and not c.verdict for c in entrants)
    with registry.native().runner(plan.saved_model, None, RunOptions()) as native:
        plan.judging.check_names(native.signature.output_names)
        _read_data(plan, native, calib_data, samples, fallback, int8=int8)
        table = best.run(plan, entrants, native, contest, force)
    manifest = read_manifest(plan.output)
    # The result is the winner's, as if converted with its backend alone, plus the table.
    plan.backend, plan.precision = registry.get(manifest.backend), manifest.precision
    plan.backend_reason = manifest.backend_reason
    return {**_result(plan, manifest), "tournament": table}


def _convert_staged(plan: Plan, native: Runner, force: bool) -> tuple[Manifest, ValidationReport]:
    """Convert and validate inside a staging directory renamed to `plan.output` at the end."""
    assert plan.held_out is not None  # _read_data always reads the held-out part
    with atomic_directory(plan.output, force) as staging, tempfile.TemporaryDirectory() as work:
        space = Workspace(native, reference_outputs(native, plan.held_out), Path(work))
        plan.roles = output_roles(plan.saved_model, space.reference, plan.judging)
        return convert_into(plan, space, staging)


def convert_into(
    plan: Plan, space: Workspace, directory: Path
) -> tuple[Manifest, ValidationReport]:
    """Convert `plan.saved_model` for the plan's backend and precision into `directory` (manifest
    and payload), then validate it as users will open it. Returns the manifest and the report.

    Raises ConversionError when a step fails; validation failing is in the report, not raised.
    """
    started = time.perf_counter()
    request = ConversionRequest(
        saved_model=plan.saved_model,
        signature=space.native.signature,
        precision=plan.precision,
        output_dir=directory,
        batch_sizes=plan.batch_sizes,
        calibration=_feed(plan.calibration),
        calib_method=plan.calib_method,
        shared=space.shared,
    )
    export_summary = _prepare_onnx(request, plan, space)
    decision = _prepare_own_int8(request, plan, space.native)
    assert plan.backend.convert is not None  # _choose_backend accepts converters only
    plan.steps.start(f"converting with {plan.backend.name}")
    outcome = plan.backend.convert(request)
    seconds = time.perf_counter() - started
    summary = {**outcome.summary, **export_summary}
    if decision and "quantization" in summary:
        summary["quantization"].update(decision)
    manifest = _manifest(plan, request, outcome, summary, seconds)
    write_manifest(directory, manifest)
    plan.steps.start("validating")
    report = _validate_staged(directory, space.native, plan, space.reference)
    manifest.validation = report.to_json()
    manifest.status = report.verdict
    manifest.judging = plan.judging.record(roles_of(report))
    write_manifest(directory, manifest)
    return manifest, report


def _check_arguments(
    precision: str | None,
    backend: str,
    calib_method: str,
    batch_sizes: tuple[int, ...],
    calib_samples: int,
    validate_samples: int,
) -> None:
    if precision is None and backend != registry.BEST:
        raise UsageError(f"--precision is required unless --backend is {registry.BEST}.")
    for name, value, choices in (
        ("--precision", precision or PRECISIONS[0], PRECISIONS),
        ("--backend", backend, registry.backend_choices()),
        ("--calib-method", calib_method, CALIB_METHODS),
    ):
        _check_choice(name, value, choices)
    if not batch_sizes or any(size < 1 for size in batch_sizes):
        raise UsageError(f"--batch-sizes must be positive integers, found {list(batch_sizes)}.")
    if calib_samples < 1 or validate_samples < 1:
        raise UsageError("--calib-samples and --validate-samples must be at least 1.")


def _check_choice(name: str, value: str, choices: Sequence[str]) -> None:
    if value not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)}, found '{value}'.")


def _choose_backend(backend: str, precision: str) -> tuple[Backend, registry.Choice]:
    """(backend, why); exit 3 here, before any work, when it cannot run this precision."""
    if backend == registry.AUTO:
        choice = registry.auto_choice(precision)
    else:
        choice = registry.Choice(backend, "requested with --backend")
    registry.support(choice.backend, precision).require()
    return registry.get(choice.backend), choice


def default_output(saved_model: Path, backend: str, precision: str | None) -> Path:
    """models/<name>-<backend>-<precision> (models/<name>-best without a precision); <name> is
    the folder holding `saved_model/`."""
    resolved = saved_model.resolve()
    name = resolved.parent.name if resolved.name == "saved_model" else resolved.name
    return Path("models") / "-".join(part for part in (name, backend, precision) if part)


def _read_data(
    plan: Plan,
    native: Runner,
    calib_data: str | None,
    samples: tuple[int, int],
    fallback: bool = False,
    int8: bool | None = None,
) -> None:
    """Fill the plan's data: its spec, the calibration part (int8) and the held-out part, both
    checked against the signature and read by the model's data contract (recorded in
    `plan.contract`). `samples` is (calibration, validation) sample counts; `int8` (default: the
    plan's precision is int8) reads the calibration part. For int8 with
    `fallback` both parts are read whole (random data: SEARCH_SAMPLES more), for the ladder's
    search slice (_split_data)."""
    from trtconv.calib.contract import HELD_OUT
    from trtconv.calib.evaluation import data_spec, model_preprocessing, record_contract
    from trtconv.calib.readers import CALIBRATION, RANDOM, VALIDATION, read_model_data
    from trtconv.quantize.search import SEARCH_SAMPLES

    spec, spec_from = data_spec(calib_data, plan.saved_model)
    int8 = plan.precision == "int8" if int8 is None else int8
    if int8 and calib_data is None:
        if spec == RANDOM:  # random calibration only when asked for by name
            raise UsageError(
                f"INT8 needs calibration data and {plan.saved_model} has no model card naming "
                "its data; pass --calib-data digits|PATH.npz|IMAGE_DIR (or 'random', for timing "
                "only)."
            )
        log.info("no --calib-data: calibrating on '%s' (the model card's data)", spec)
    prep = model_preprocessing(native.signature, plan.saved_model, plan.preprocessing)
    options: dict[str, Any] = {"saved_model": plan.saved_model, "preprocessing": prep}
    plan.data_spec = spec
    plan.contract = {"data_from": spec_from}  # the rest once the data is read
    whole = int8 and fallback
    wanted = [
        (count + SEARCH_SAMPLES if spec == RANDOM else None) if whole else count
        for count in samples
    ]
    part = None
    if int8:
        part = read_model_data(
            spec, native.signature, role=CALIBRATION, samples=wanted[0], **options
        )
    plan.held_out = read_model_data(
        spec, native.signature, role=VALIDATION, samples=wanted[1], **options
    )
    plan.contract.update(record_contract(spec, HELD_OUT, prep, plan.held_out.raw_pixels))
    _split_data(plan, part, samples, fallback)


def _split_data(
    plan: Plan, calibration_part: ArraySet | None, counts: tuple[int, int], fallback: bool
) -> None:
    """The plan's calibration (whole batches) and held-out samples, and with `fallback` the int8
    ladder's search slice: spare samples of either part (trtconv.quantize.search)."""
    from trtconv.calib.readers import whole_batches
    from trtconv.quantize.search import HELD_OUT_SPARE, split_for_search

    assert plan.held_out is not None
    held_out_part, plan.held_out = plan.held_out, plan.held_out.head(counts[1])
    if calibration_part is None:
        return
    calibration = calibration_part.head(counts[0])
    if fallback:
        split = split_for_search(calibration_part, counts[0], held_out_part, counts[1])
        calibration, plan.search = split.calibration, split.search
        plan.search_drawn_from = split.drawn_from
        if split.drawn_from != HELD_OUT_SPARE:
            log.info(
                "int8 ladder: no held-out samples to spare beyond the %d validated on; it would "
                "score on %s (--validate-samples below %d leaves held-out samples to it)",
                len(plan.held_out),
                split.drawn_from,
                len(plan.held_out),
            )
    plan.calibration = whole_batches(calibration, CALIB_BATCH)


def _feed(data: ArraySet | None) -> Any:
    from trtconv.calib.readers import calibration_feed

    return None if data is None else calibration_feed(data, CALIB_BATCH)


def reference_outputs(native: Runner, held_out: ArraySet) -> dict[str, Any]:
    from trtconv.outputs.compare import run_batched

    return run_batched(native, held_out)


def _prepare_onnx(request: ConversionRequest, plan: Plan, space: Workspace) -> dict[str, Any]:
    """For backends that build from ONNX: export, check against TensorFlow, and quantise int8 in
    the Q/DQ scheme the backend asks for, each made once in the workspace."""
    if not plan.backend.needs_onnx:
        return {}
    request.onnx_path, export = _made(space, ("onnx",), lambda: _export_checked(plan, space))
    summary: dict[str, Any] = {"onnx_export": export}
    scheme = plan.backend.qdq_scheme
    if plan.precision == "int8" and scheme is not None:
        options, decision = _qdq_options(plan, scheme, request.calib_method)
        request.qdq_onnx_path, quantization = _made(
            space, ("qdq", options), lambda: _quantized(request, plan, space, options)
        )
        summary["quantization"] = {**quantization, **decision}
    return summary


def _quantized(
    request: ConversionRequest, plan: Plan, space: Workspace, options: Any
) -> tuple[Path, dict[str, Any]]:
    """The Q/DQ model for `options` in the workspace, climbing the int8 ladder when it has
    settings (trtconv.quantize.ladder)."""
    from trtconv.quantize.ladder import quantize_int8

    assert request.onnx_path is not None and request.calibration is not None  # read for int8
    plan.steps.start("quantizing to int8")
    path = space.work / f"model.qdq.{len(space.made)}.onnx"
    work = space.work / f"ladder.{len(space.made)}"
    work.mkdir()
    summary = quantize_int8(
        request.onnx_path,
        path,
        request.calibration,
        options,
        work,
        _ladder_settings(plan, request),
        str(plan.saved_model),
    )
    return path, summary


def _made(
    space: Workspace, key: tuple[Any, ...], make: Callable[[], tuple[Path, dict[str, Any]]]
) -> tuple[Path, dict[str, Any]]:
    """What `make()` returns, made once per workspace and key."""
    if key not in space.made:
        space.made[key] = make()
    path, summary = space.made[key]
    return path, dict(summary)


def _export_checked(plan: Plan, space: Workspace) -> tuple[Path, dict[str, Any]]:
    """The ONNX export in the workspace, checked against TensorFlow's outputs."""
    from trtconv.backends.onnx_export import export_onnx, verify_export

    assert plan.held_out is not None
    plan.steps.start("exporting to ONNX")
    onnx_path = space.work / "model.fp32.onnx"
    export = export_onnx(plan.saved_model, onnx_path, space.native.signature)
    reference = _head(space.reference)
    held_out = plan.held_out.head(EXPORT_CHECK_SAMPLES)
    check = verify_export(onnx_path, held_out, reference, plan.roles)
    export["check"] = {
        "samples": check.samples,
        "max_abs_error": {name: o.max_abs_error for name, o in check.outputs.items()},
        "top1_agreement": check.top1_agreement,
    }
    return onnx_path, export


def _prepare_own_int8(request: ConversionRequest, plan: Plan, native: Runner) -> dict[str, Any]:
    """For backends that quantise the SavedModel themselves in the CPU scheme: the weight range
    for the int8 target and the int8 ladder's search slice (`native` gives its reference
    outputs), set on the request; returns the record of the choice ({} otherwise)."""
    from trtconv.backends.request import SearchSlice
    from trtconv.quantize.isa import CPU_SCHEME

    own = not plan.backend.needs_onnx and plan.backend.qdq_scheme == CPU_SCHEME
    if plan.precision != "int8" or not own:
        return {}
    request.reduce_range, decision = _cpu_weight_range(plan)
    if plan.search is not None and plan.fallback_time_limit_s is not None:
        request.search = SearchSlice(
            data=plan.search,
            reference=reference_outputs(native, plan.search),
            tolerance=plan.budget,
            roles=plan.roles,
            time_limit_s=plan.fallback_time_limit_s,
            drawn_from=plan.search_drawn_from,
        )
    return decision


def _qdq_options(plan: Plan, scheme: str, method: str) -> tuple[Any, dict[str, Any]]:
    """The Q/DQ options for the backend's scheme and the int8 target, and the record of the
    choice.

    The CPU scheme (U8S8) gets the weight range the CPU's kernels need; other schemes (S8S8 for
    TensorRT, which has no int16 saturation) keep the full range.
    """
    from trtconv.quantize.isa import CPU_SCHEME
    from trtconv.quantize.qdq import QdqOptions

    if scheme != CPU_SCHEME:
        return QdqOptions(scheme, method), {"int8_target": None}
    reduce_range, decision = _cpu_weight_range(plan)
    return QdqOptions(scheme, method, reduce_range), decision


def _cpu_weight_range(plan: Plan) -> tuple[bool, dict[str, Any]]:
    """(7-bit weights?, the record of the choice) for a CPU-scheme int8 model and its target."""
    from trtconv.quantize.isa import this_cpu_int8_class, weight_range

    here = this_cpu_int8_class()
    choice = weight_range(plan.int8_target, here)
    log.info("int8 weights: %s (%s)", choice.description, choice.reason)
    decision = {
        "int8_target": choice.target,
        "weight_range_reason": choice.reason,
        "converted_on_cpu_class": here,
    }
    return choice.reduce_range, decision


def _ladder_settings(plan: Plan, request: ConversionRequest) -> Any:
    """The int8 ladder's settings for the plan, or None with --no-fallback."""
    from trtconv.quantize.isa import CPU_SCHEME
    from trtconv.quantize.ladder import LadderSettings

    if plan.search is None or plan.fallback_time_limit_s is None:
        return None
    return LadderSettings(
        search=plan.search,
        search_drawn_from=plan.search_drawn_from,
        tolerance=plan.budget,
        time_limit_s=plan.fallback_time_limit_s,
        batch_sizes=request.batch_sizes,
        # ONNX Runtime on this CPU runs the CPU scheme itself: a short timing says what int8
        # buys. Other schemes' speed is their runtime's (a TensorRT engine, timed by bench).
        timed=plan.backend.qdq_scheme == CPU_SCHEME,
        progress=plan.steps.within(),
        roles=plan.roles,
    )


def _head(outputs: dict[str, Any]) -> dict[str, Any]:
    return {name: array[:EXPORT_CHECK_SAMPLES] for name, array in outputs.items()}


def _manifest(
    plan: Plan,
    request: ConversionRequest,
    outcome: ConversionOutcome,
    summary: dict[str, Any],
    seconds: float,
) -> Manifest:
    from trtconv.calib.readers import describe
    from trtconv.facts import library_versions, probe_cpu

    calibration = None
    if plan.calibration is not None:
        calibration = describe(plan.calibration, plan.data_spec, plan.calib_method)
    summary["batch_sizes"] = list(request.batch_sizes)
    return Manifest(
        backend=plan.backend.name,
        precision=plan.precision,
        payload=outcome.payload,
        source_model={
            "path": str(plan.saved_model.resolve()),
            "sha256": sha256_path(plan.saved_model),
        },
        signature=request.signature.to_dict(),
        device=outcome.device or {"cpu": probe_cpu().model},
        tools=library_versions(registry.declared_packages()),
        conversion_seconds=round(seconds, 3),
        conversion_summary=summary,
        calibration=calibration,
        backend_reason=plan.backend_reason,
        data_contract=plan.contract,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def _validate_staged(
    staging: Path, native: Runner, plan: Plan, reference: dict[str, Any]
) -> ValidationReport:
    """Validate the staged artifact the way users will open it (manifest -> runner)."""
    from trtconv.validation import validate_runners

    assert plan.held_out is not None
    staged = read_manifest(staging)  # the manifest we wrote must read back
    with registry.open_runner(staging) as candidate:
        return validate_runners(
            native,
            candidate,
            plan.held_out,
            plan.precision,
            plan.tolerance,
            reference,
            staged.batch_range,
            tolerance=plan.budget,
            judging=plan.judging,
        )
