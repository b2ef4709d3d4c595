"""`convert` with one backend: load, read data, convert in a staging directory, validate, rename
into place (an interrupted or failed conversion leaves nothing behind)."""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from trtconv.artifact.manifest import Manifest
from trtconv.backends import registry
from trtconv.convert.convert_result import ConvertResult
from trtconv.convert.data import ConversionData, deciding_data, read_data
from trtconv.convert.plan import ConversionPlan, plan_single, step_count
from trtconv.convert.workspace import convert_into, open_workspace
from trtconv.core.errors import AccuracyError, ConversionError
from trtconv.core.fsutil import atomic_directory, check_output_free, dir_size_bytes
from trtconv.core.model_io import ModelSignature
from trtconv.core.precision import Precision
from trtconv.core.progress import Progress, Steps
from trtconv.options.convert import ConvertOptions
from trtconv.outputs.compare import raise_if_failed
from trtconv.outputs.exact import samples_to_decide
from trtconv.outputs.validation_result import ValidationReport
from trtconv.protocol.runner import RunOptions

log = logging.getLogger(__name__)


def convert_single(
    options: ConvertOptions,
    signature: ModelSignature,
    progress: Progress | None = None,
    source: Path | None = None,
) -> ConvertResult:
    """Convert with the one backend `options` name (or `auto` chooses) into the output directory
    (`signature`: the SavedModel's, as `fit_to_model` read it; `source`: the user's model file
    when the SavedModel was exported from it).

    Raises MissingDependencyError (3) and UsageError (2) before any work; InputError (1) when
    the model or data does not load or fit; ConversionError (1) when a step fails (nothing is
    written then); AccuracyError (4) after writing an artifact whose validation failed or left
    an output not judged (the error carries the result).
    """
    cannot: tuple[str, ...] = ()
    while True:
        plan = plan_single(options, signature, source, cannot)
        try:
            return _convert_planned(plan, options, signature, progress)
        except ConversionError as exc:
            following = _next_auto(options, plan, (*cannot, plan.backend.name))
            if following is None:
                raise
            log.warning(
                "auto: %s could not convert %s (%s); trying %s",
                plan.backend.name,
                plan.source_model,
                str(exc).splitlines()[0],
                following,
            )
            cannot = (*cannot, plan.backend.name)


def _next_auto(
    options: ConvertOptions, plan: ConversionPlan, cannot: tuple[str, ...]
) -> str | None:
    """The backend `--backend auto` tries after the ones `cannot` names failed, None when the
    backend was named, or no other runs the precision here."""
    if options.backend != registry.AUTO:
        return None
    return registry.next_auto(plan.precision, cannot)


def _convert_planned(
    plan: ConversionPlan,
    options: ConvertOptions,
    signature: ModelSignature,
    progress: Progress | None,
) -> ConvertResult:
    """convert_single's work for the backend `plan` chose."""
    check_output_free(plan.output, options.force)
    steps = Steps(progress, step_count(plan.backend))
    # Loading is the first heavy step: a corrupt model fails here, exit 1.
    steps.start(f"loading {plan.saved_model}")
    run = RunOptions(signature=signature.name)
    with registry.native().runner(plan.saved_model, None, run) as native:
        options.judging.check_names(native.signature.output_names)
        steps.start("reading data")
        data = read_data(options, native, plan.precision == Precision.INT8, plan.calibrated)
        log.info(
            "converting %s, signature %s, to %s %s (%s)",
            plan.source_model,
            signature.name,
            plan.backend.name,
            plan.precision,
            plan.reason,
        )
        with (
            atomic_directory(plan.output, options.force) as staging,
            tempfile.TemporaryDirectory() as work,
        ):
            space = open_workspace(plan, native, data, Path(work))
            manifest, report = convert_into(plan, space, staging, steps)
    steps.finish()
    result = conversion_result(plan, manifest)
    _raise_if_failed(report, f"{plan.output} ({plan.backend.name} {plan.precision})", result, data)
    return result


def _raise_if_failed(
    report: ValidationReport, what: str, result: ConvertResult, data: ConversionData
) -> None:
    """raise_if_failed, and when the report is inconclusive its error also says which data
    would decide it (the source's unused samples first)."""
    needed = samples_to_decide(report)
    try:
        raise_if_failed(report, what, result)
    except AccuracyError as exc:
        if needed is None:
            raise
        advice = deciding_data(data, needed)
        advice = f"{advice[0].upper()}{advice[1:]}."
        # After an itemised message (one line per check) the advice is a line of its own.
        joined = f"{exc}\n{advice}" if "\n" in str(exc) else f"{exc} {advice}"
        raise AccuracyError(joined, result) from None


def conversion_result(plan: ConversionPlan, manifest: Manifest) -> ConvertResult:
    """convert's result for the artifact written at `plan.output` with `manifest`."""
    size = dir_size_bytes(plan.output)
    seconds = manifest.conversion_seconds
    log.info(
        "wrote %s (%.2f MB) in %.1f s: validation %s",
        plan.output,
        size / 1e6,
        seconds,
        manifest.status,
    )
    return ConvertResult(
        artifact=str(plan.output),
        backend=plan.backend.name,
        precision=plan.precision,
        backend_reason=plan.reason,
        backend_passed_over=list(plan.passed_over),
        conversion_seconds=seconds,
        artifact_size_bytes=size,
        manifest=manifest,
        validation=manifest.validation,
    )
