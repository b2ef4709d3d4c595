"""`validate`: a converted artifact against its native model on the same held-out inputs.

The comparison itself (tolerances, each output judged by its role) is trtconv.outputs.compare;
this module runs both models, says which precision, device and CPU a report is for, and reads
the artifact's manifest for the data and checks it was converted with.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtconv.artifact.manifest import Manifest, read_manifest
from trtconv.backends import registry
from trtconv.calib.judged_data import JudgedData, judged_data, scale_warning
from trtconv.calib.sources import ArraySet
from trtconv.core.data_contract import DataContract
from trtconv.core.judging_options import Judging
from trtconv.core.model_io import Outputs
from trtconv.facts import environment
from trtconv.model.keras_files import CUSTOM_OBJECTS
from trtconv.model.paths import is_artifact_dir, require_exists, saved_model_in
from trtconv.model.savedmodel import saved_model_for
from trtconv.options.shared import DEFAULT_VALIDATE_SAMPLES
from trtconv.options.validate import ValidateOptions
from trtconv.outputs.compare import (
    compare,
    output_roles,
    raise_if_failed,
    rate_words,
    run_batched,
    undecidable_warning,
    validation_batches,
)
from trtconv.outputs.contract import Stated
from trtconv.outputs.roles import over_recorded
from trtconv.outputs.tolerance import Tolerance
from trtconv.outputs.validation_result import ValidatingMachine, ValidationReport
from trtconv.protocol.runner import Runner, RunOptions
from trtconv.quantize.isa import cpu_int8_class, portability_warning

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1


@dataclass(kw_only=True)
class ValidateResult(ValidationReport):
    """`trtconv validate`'s result: the validation report (every check, the verdict) of
    `artifact` against `reference`, with the artifact's backend, the verdict its manifest
    recorded at conversion (`manifest_status`), the data contract it was judged by (data,
    split, preprocessing, each with where it came from) and what the caller must not miss
    (`warnings`). Its document: these keys and `precision` first, the report's keys, then
    `warnings`."""

    schema_version: int = SCHEMA_VERSION
    artifact: Path
    reference: Path
    backend: str
    manifest_status: str
    data_contract: DataContract
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The `trtconv validate --json` document."""
        header = {
            "schema_version": self.schema_version,
            "artifact": str(self.artifact),
            "reference": str(self.reference),
            "backend": self.backend,
            "precision": self.precision,
            "manifest_status": self.manifest_status,
            "data_contract": self.data_contract.to_json(),
        }
        return {**header, **super().to_json(), "warnings": list(self.warnings)}


def validating_machine() -> ValidatingMachine:
    """The CPU (and its int8 class) a validation ran on: int8 verdicts hold per CPU class."""
    cpu = environment.cpu_info()  # by module: a test describes another CPU by replacing it
    return ValidatingMachine(cpu.model or "", cpu_int8_class(cpu))


def validate_runners(
    reference: Runner,
    candidate: Runner,
    data: ArraySet,
    precision: str,
    *,
    tolerance: Tolerance,
    reference_outputs: Outputs | None = None,
    batch_range: tuple[int, int] | None = None,
    judging: Judging | None = None,
) -> ValidationReport:
    """Run both runners on `data` (the reference only if its outputs are not given), judge each
    output by its role, and say which precision, device and CPU the report is for.

    Roles come from `judging` where it sets them, else are inferred from the reference's graph
    (when it is a SavedModel) and values. The candidate runs in batches inside `batch_range`
    (its engines' profile): outside it a TensorRT engine refuses the input, and TF-TRT silently
    runs TensorFlow instead. `tolerance` (a judging contract's) is what the outputs must meet.
    """
    judging = judging or Judging()
    if reference_outputs is None:
        reference_outputs = run_batched(reference, data)
    batch_size, min_batch = validation_batches(batch_range)
    candidate_outputs = run_batched(candidate, data, batch_size, min_batch)
    key = reference.signature.name
    roles = output_roles(reference.path, reference_outputs, judging, key, data.inputs)
    report = compare(
        reference_outputs,
        candidate_outputs,
        tolerance,
        data.labels,
        data.source,
        roles,
        judging.allow_unjudged,
        data.inputs,
    )
    report.precision, report.machine = precision, validating_machine()
    report.batch_size, report.device = candidate.signature.batch_for(batch_size), candidate.device
    log.info("validation on %d samples of %s: %s", report.samples, data.source, report.verdict)
    return report


def validate(options: ValidateOptions) -> ValidateResult:
    """Validate a trtconv artifact against its source SavedModel (or `options.reference`).

    The data, its preprocessing and the split come from the options, else the artifact's
    manifest (its data contract), else the model card, else defaults (`random` data, 1/255,
    the held-out split); the result's `data_contract` says where each came from. Outputs are
    judged by the roles `options.judging` sets, else those the manifest recorded, else
    inferred. Rates are decided at `options.confidence`, else the confidence the manifest's
    verdict was decided at, else DEFAULT_CONFIDENCE. `options.device` is where the artifact
    runs (RunOptions.device); the reference is TensorFlow with TF32 off, or another artifact
    (`options.reference` an artifact directory: e.g. the fp32 one, where the artifact runs on a
    GPU machine without TensorFlow) run where it was converted for. Raises UsageError for
    a missing artifact or reference, a device the artifact cannot run on, or an output name the
    model lacks; InputError for a bad one; and AccuracyError (exit 4, carrying the same result)
    when the artifact fails, is inconclusive or is not judged.
    """
    artifact = require_exists(options.artifact, "Artifact")
    manifest = read_manifest(artifact)
    named = Path(options.reference or manifest.source_model["path"])
    judging = over_recorded(options.judging, manifest.judging)
    judging.check_names(manifest.model_signature.output_names)
    options.tolerance.check_names(manifest.model_signature.output_names)
    # A Keras source (convert m.keras) is exported again, and a SavedModel TensorFlow cannot
    # revive loaded as its signature graphs, for this validation only: the result names the user's.
    if is_artifact_dir(named):
        reference = named
        report, evaluation, warnings = _run_both(options, artifact, named, manifest, judging)
        warnings.insert(0, _artifact_reference_warning(named))
        log.warning("%s", warnings[0])
    else:
        # the classes a Keras source needed at conversion (--custom-objects), when recorded
        needed = () if options.reference else manifest.source_model.get(CUSTOM_OBJECTS, ())
        with saved_model_for(named, needed) as saved_model:
            reference = saved_model if saved_model == saved_model_in(named) else named
            run = _run_both(options, artifact, saved_model, manifest, judging)
        report, evaluation, warnings = run
    for warning in _manifest_warnings(manifest, artifact, report, evaluation):
        log.warning("%s", warning)
        warnings.append(warning)
    result = ValidateResult(
        **vars(report),
        artifact=artifact,
        reference=reference,
        backend=manifest.backend,
        manifest_status=manifest.status,
        data_contract=evaluation.contract,
        warnings=warnings,
    )
    raise_if_failed(result, f"{artifact} ({manifest.backend} {manifest.precision})")
    return result


def _run_both(
    options: ValidateOptions,
    artifact: Path,
    reference: Path,
    manifest: Manifest,
    judging: Judging,
) -> tuple[ValidationReport, JudgedData, list[str]]:
    """(the report, the evaluation data it was judged on, the warnings so far: the data too
    small to ever show the budget of the outputs' rate checks, then the runner's): the
    native `reference` and `artifact` run on the evaluation data the options and the manifest
    name, the artifact on `options.device` in batches inside its engines' profile."""
    contract = manifest.judging_contract(stated_rules(options), current=options.current_rules)
    tolerance = contract.tolerance
    warnings: list[str] = []
    if contract.note:
        warnings.append(f"{artifact}: {contract.note}.")
        log.warning("%s", warnings[-1])
    key = options.signature or manifest.model_signature.name  # the one converted, by default
    # An artifact as the reference runs where it was converted for (RunOptions' device auto).
    saved_model = None if is_artifact_dir(reference) else reference
    with registry.open_runner(reference, RunOptions(signature=key)) as native:
        evaluation = judged_data(
            native.signature,
            saved_model,
            options.data,
            options.preprocessing,
            options.split,
            options.samples or DEFAULT_VALIDATE_SAMPLES,
            manifest.data_contract,
            manifest.calibration,
        )
        data = evaluation.data
        with registry.open_runner(artifact, RunOptions(device=options.device)) as candidate:
            report = validate_runners(
                native,
                candidate,
                data,
                manifest.precision,
                batch_range=manifest.batch_range,
                tolerance=tolerance,
                judging=judging,
            )
            # Said once the roles are known: only outputs with a rate check can be undecidable.
            roles = {name: out.role for name, out in report.outputs.items()}
            checked = rate_words(roles, tolerance)
            too_few = undecidable_warning(len(data), tolerance, data.source, checked)
            if too_few:
                log.warning("%s", too_few)
                warnings.append(too_few)
            for warning in candidate.warnings:
                log.warning("%s", warning)
            return report, evaluation, [*warnings, *candidate.warnings]


def stated_rules(options: ValidateOptions) -> Stated:
    """What validate's options state about the judging rules (--tolerance, --confidence)."""
    return Stated(options.tolerance, confidence=options.confidence)


def _artifact_reference_warning(reference: Path) -> str:
    """What a verdict against another artifact means: agreement with it, not with the model."""
    recorded = read_manifest(reference)
    return (
        f"the reference is the artifact {reference} ({recorded.backend} {recorded.precision}, "
        f"{recorded.status} against its source model), not the native model: this verdict is "
        "agreement with it, and its own error against the native model adds to this one"
    )


def _manifest_warnings(
    manifest: Manifest, artifact: Path, report: ValidationReport, evaluation: JudgedData
) -> list[str]:
    """What this validation must not hide: the conversion's own verdict when it differs, an
    int8 artifact measured on another CPU class, and data on another scale than calibration."""
    warnings = []
    if manifest.status not in (report.verdict, "unvalidated"):
        recorded = manifest.validation
        # A passed conversion has no failures to name: saying "no output was compared" there
        # would be false.
        failed = recorded is not None and manifest.status != "passed"
        why = f" ({recorded.failures()})" if failed and recorded else ""
        warnings.append(
            f"{artifact}: its manifest says the conversion's validation {manifest.status.upper()}"
            f"{why} on {recorded.data_source if recorded else 'its data'}; this validation on "
            f"{report.data_source} is {report.verdict}."
        )
    portability = _portability_warning(manifest, artifact, report)
    scale = scale_warning(manifest.calibration, evaluation.data, str(artifact))
    return warnings + [w for w in (portability, scale) if w]


def _portability_warning(
    manifest: Manifest, artifact: Path, report: ValidationReport
) -> str | None:
    """Say so when this validation runs on another int8 CPU class than the conversion's."""
    recorded = manifest.validated_on
    quantization = manifest.quantization
    here = report.machine.cpu_int8_class if report.machine else ""
    return portability_warning(quantization, recorded, here, str(artifact), measured_here=True)
