"""One conversion into a directory, and what every conversion of one SavedModel shares.

The workspace holds the native runner, its outputs on the held-out data (they check the ONNX
export and then each converted model), each output's role, and a scratch directory where the ONNX
export is made once and where backends keep what they make from it (the Q/DQ models), however many
conversions use them (`convert --backend best`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trtconv.artifact.manifest import Manifest, read_manifest, write_manifest
from trtconv.backends import registry
from trtconv.calib.readers import describe
from trtconv.convert.data import ConversionData
from trtconv.convert.plan import ConversionPlan, stated_rules
from trtconv.core.errors import ConversionError
from trtconv.core.fsutil import sha256_path
from trtconv.core.judging_options import Roles
from trtconv.core.model_io import Outputs
from trtconv.core.precision import PRECISIONS, Precision
from trtconv.core.progress import Steps
from trtconv.facts import library_versions, probe_cpu
from trtconv.model.keras_files import CUSTOM_OBJECTS
from trtconv.onnxlib.export import ExportCheck, OnnxExport, export_onnx, verify_export
from trtconv.options.convert import ConvertOptions
from trtconv.outputs.compare import (
    TOP1,
    output_roles,
    rate_words,
    run_batched,
    undecidable_warning,
)
from trtconv.outputs.contract import export_rules, resolve
from trtconv.outputs.roles import judging_record
from trtconv.outputs.validation_result import ValidationReport, roles_of
from trtconv.protocol.request import ConversionOutcome, ConversionRequest, SearchSlice
from trtconv.protocol.runner import Runner
from trtconv.validate.pipeline import validate_runners

log = logging.getLogger(__name__)

# The ONNX export is checked on this many held-out samples before anything runs on it.
EXPORT_CHECK_SAMPLES = 256


@dataclass
class Workspace:
    """What every conversion of one SavedModel shares (see the module docstring). `export` is
    the checked ONNX export once made: (path, its summary)."""

    native: Runner
    data: ConversionData
    reference: Outputs
    roles: Roles
    work: Path
    shared: dict[str, Any] = field(default_factory=dict)
    export: tuple[Path, OnnxExport] | None = None


def open_workspace(
    plan: ConversionPlan, native: Runner, data: ConversionData, work: Path
) -> Workspace:
    """The workspace for `plan`'s SavedModel: the native outputs on the held-out data and each
    output's role (set by the options, else inferred from the graph and the values). Warns
    first when the held-out data is too small to ever show the budget."""
    precisions = [plan.precision] if plan.precision else list(PRECISIONS)  # best: every one
    reference = run_batched(native, data.held_out)
    key, feeds = native.signature.name, data.held_out.inputs
    roles = output_roles(plan.saved_model, reference, plan.options.judging, key, feeds)
    budget = plan.contract.tolerance if plan.precision else None  # best: each precision's own
    checked = rate_words({name: role.role for name, role in roles.items()}, budget)
    for warning in too_few_warnings(plan.options, precisions, len(data.held_out), data, checked):
        log.warning("%s", warning)
    return Workspace(native, data, reference, roles, work)


def too_few_warnings(
    options: ConvertOptions,
    precisions: list[str],
    samples: int,
    data: ConversionData,
    checked: str | None = TOP1,
) -> list[str]:
    """One warning per distinct budget of `precisions` that `samples` held-out samples can never
    show at the options' confidence (trtconv.outputs.compare.undecidable_warning); none when no
    output has a rate check (`checked` None: see rate_words)."""
    found: dict[str, list[str]] = {}
    for precision in precisions:
        budget = resolve(precision, stated_rules(options)).tolerance
        warning = undecidable_warning(samples, budget, data.held_out.source, checked)
        if warning:
            found.setdefault(warning, []).append(precision)
    if len(precisions) == 1:
        return list(found)
    return [f"{', '.join(names)}: {warning}" for warning, names in found.items()]


def convert_into(
    plan: ConversionPlan, space: Workspace, directory: Path, steps: Steps
) -> tuple[Manifest, ValidationReport]:
    """Convert the plan's SavedModel with its backend and precision into `directory` (manifest
    and payload), then validate it as users will open it. Returns the manifest and the report.

    Raises ConversionError when a step fails; validation failing is in the report, not raised.
    """
    started = time.perf_counter()
    request = conversion_request(plan, space, directory, steps, started)
    summary: dict[str, Any] = {}
    if plan.backend.needs_onnx:
        request.onnx_path, export = checked_export(plan, space, steps)
        summary["onnx_export"] = export.to_json()
    assert plan.backend.convert is not None  # plan_single and best accept converters only
    int8 = plan.precision == Precision.INT8 and plan.backend.qdq_scheme is not None
    what = f"converting with {plan.backend.name}"
    steps.start(f"quantizing to int8 and {what}" if int8 else what)
    request.progress = steps.within()  # the int8 ladder's steps show within this one
    outcome = plan.backend.convert(request)
    seconds = round(time.perf_counter() - started, 3)
    summary = {**outcome.summary, **summary}
    manifest = _manifest(plan, space.data, request, outcome, summary, seconds)
    write_manifest(directory, manifest)
    steps.start("validating")
    report = _validate_staged(directory, plan, space)
    manifest.validation = report
    manifest.status = report.verdict
    roles = roles_of(report, space.roles)
    manifest.judging = judging_record(plan.options.judging, roles)
    manifest.contract = plan.contract.record(roles)
    write_manifest(directory, manifest)
    return manifest, report


def conversion_request(
    plan: ConversionPlan,
    space: Workspace,
    directory: Path,
    steps: Steps,
    started: float | None = None,
) -> ConversionRequest:
    """What the backend gets: int8 and ONNX fp16 requests carry the calibration feed, int8 with
    the ladder on the search slice too (its time limit counted from `started`, the conversion's
    start: the export and calibration before the ladder count)."""
    options, int8 = plan.options, plan.precision == Precision.INT8
    return ConversionRequest(
        saved_model=plan.saved_model,
        signature=space.native.signature,
        precision=plan.precision,
        output_dir=directory,
        work_dir=space.work,
        batch_sizes=options.batch_sizes,
        calibration=space.data.calibration_feed() if plan.calibrated else None,
        sample=space.data.sample(),
        calib_method=options.calib_method,
        int8_target=options.int8_target,
        search=_search_slice(plan, space, started) if int8 else None,
        shared=space.shared,
    )


def _search_slice(
    plan: ConversionPlan, space: Workspace, started: float | None
) -> SearchSlice | None:
    """The int8 ladder's search slice with the native outputs on it; None with --no-fallback."""
    data = space.data
    if data.search is None or not plan.options.fallback:
        return None
    key = "native outputs on the search slice"
    if key not in space.shared:
        space.shared[key] = run_batched(space.native, data.search)
    return SearchSlice(
        data=data.search,
        reference=space.shared[key],
        tolerance=plan.contract.tolerance,
        roles=space.roles,
        time_limit_s=plan.options.fallback_time_limit_s,
        drawn_from=data.search_drawn_from,
        started=started,
    )


def checked_export(plan: ConversionPlan, space: Workspace, steps: Steps) -> tuple[Path, OnnxExport]:
    """The ONNX export in the workspace, checked against TensorFlow's outputs (made once)."""
    if space.export is None:
        steps.start("exporting to ONNX")
        path = space.work / "model.fp32.onnx"
        try:
            fixed = space.data.fixed_inputs()
            export = export_onnx(plan.saved_model, path, space.native.signature, fixed=fixed)
        except ConversionError as exc:
            raise ConversionError(f"{exc}{_without_onnx(plan.precision)}") from exc
        held_out = space.data.held_out.head(EXPORT_CHECK_SAMPLES)
        reference = {name: a[:EXPORT_CHECK_SAMPLES] for name, a in space.reference.items()}
        tolerance = export_rules(stated_rules(plan.options))
        check = verify_export(path, held_out, reference, space.roles, tolerance, plan.saved_model)
        space.export = (path, replace(export, check=ExportCheck.of(check)))
    return space.export


def _without_onnx(precision: str) -> str:
    """What a failed ONNX export adds: the backends that convert without it here."""
    names = registry.converting_without_onnx(precision)
    if not names:
        return ""
    choices = " or ".join(f"--backend {name}" for name in names)
    return f" ({choices} converts the SavedModel itself, without the ONNX export)"


def _manifest(
    plan: ConversionPlan,
    data: ConversionData,
    request: ConversionRequest,
    outcome: ConversionOutcome,
    summary: dict[str, Any],
    seconds: float,
) -> Manifest:
    calibration = None
    if request.calibration is not None and data.calibration is not None:
        method = plan.options.calib_method if plan.precision == Precision.INT8 else None
        calibration = describe(data.calibration, data.spec, method)
    summary["batch_sizes"] = list(request.batch_sizes)
    source: dict[str, Any] = {
        "path": str(plan.source_model.resolve()),
        "sha256": sha256_path(plan.source_model),
    }
    if plan.options.custom_objects:  # the classes a Keras source needs, only when given
        source[CUSTOM_OBJECTS] = list(plan.options.custom_objects)
    return Manifest(
        backend=plan.backend.name,
        precision=plan.precision,
        payload=outcome.payload,
        source_model=source,
        signature=request.signature.to_dict(),
        device=outcome.device or {"cpu": probe_cpu().model},
        tools=library_versions(registry.declared_packages()),
        conversion_seconds=seconds,
        conversion_summary=summary,
        calibration=calibration,
        backend_reason=plan.reason,
        data_contract=data.contract_for(fitted=request.calibration is not None),
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def _validate_staged(staging: Path, plan: ConversionPlan, space: Workspace) -> ValidationReport:
    """Validate the staged artifact the way users will open it (manifest -> runner)."""
    staged = read_manifest(staging)  # the manifest we wrote must read back
    with registry.open_runner(staging) as candidate:
        return validate_runners(
            space.native,
            candidate,
            space.data.held_out,
            plan.precision,
            tolerance=plan.contract.tolerance,
            reference_outputs=space.reference,
            batch_range=staged.batch_range,
            judging=plan.options.judging,
        )
