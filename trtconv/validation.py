"""`validate`: a converted artifact against its native model on the same held-out inputs.

The comparison itself (tolerances, each output judged by its role) is trtconv.outputs.compare;
this module runs both models, says which precision, device and CPU a report is for, and reads
the artifact's manifest for the data and checks it was converted with.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtconv.backends.runner import Runner
from trtconv.calib.contract import PreprocessingOptions
from trtconv.calib.sources import ArraySet
from trtconv.core.model_io import Outputs
from trtconv.options import DEFAULT_VALIDATE_SAMPLES
from trtconv.outputs.compare import (
    compare,
    output_roles,
    raise_if_failed,
    run_batched,
    validation_batches,
)
from trtconv.outputs.roles import Judging
from trtconv.outputs.tolerance import Tolerance, tolerance_for
from trtconv.report.validation import ValidationReport, failures_of

if TYPE_CHECKING:
    from trtconv.calib.evaluation import Evaluation

log = logging.getLogger(__name__)


def validating_machine() -> dict[str, Any]:
    """The CPU (and its int8 class) a validation ran on: int8 verdicts hold per CPU class."""
    from trtconv.environment import cpu_info
    from trtconv.quantize.isa import cpu_int8_class

    cpu = cpu_info()
    return {"cpu": cpu["model"], "cpu_int8_class": cpu_int8_class(cpu)}


def validate_runners(
    reference: Runner,
    candidate: Runner,
    data: ArraySet,
    precision: str,
    atol_override: float | None = None,
    reference_outputs: Outputs | None = None,
    batch_range: tuple[int, int] | None = None,
    tolerance: Tolerance | None = None,
    judging: Judging | None = None,
) -> ValidationReport:
    """Run both runners on `data` (the reference only if its outputs are not given), judge each
    output by its role, and say which precision, device and CPU the report is for.

    Roles come from `judging` where it sets them, else are inferred from the reference's graph
    (when it is a SavedModel) and values. The candidate runs in batches inside `batch_range`
    (its engines' profile): outside it a TensorRT engine refuses the input, and TF-TRT silently
    runs TensorFlow instead. `tolerance` (default: the precision's, with `atol_override` and
    `judging`'s per-output tolerances) is what the outputs must meet.
    """
    judging = judging or Judging()
    tolerance = tolerance or tolerance_for(precision, atol_override, judging.tolerances)
    if reference_outputs is None:
        reference_outputs = run_batched(reference, data)
    batch_size, min_batch = validation_batches(batch_range)
    candidate_outputs = run_batched(candidate, data, batch_size, min_batch)
    roles = output_roles(reference.path, reference_outputs, judging)
    report = compare(
        reference_outputs, candidate_outputs, tolerance, data.labels, data.source, roles,
        judging.allow_unjudged,
    )  # fmt: skip
    report.precision, report.machine = precision, validating_machine()
    report.batch_size, report.device = batch_size, candidate.device
    log.info("validation on %d samples of %s: %s", report.samples, data.source, report.verdict)
    return report


def validate(
    artifact: Path,
    reference: Path | None = None,
    data: str | None = None,
    samples: int | None = None,
    tolerance: float | None = None,
    device: str = "auto",
    judging: Judging | None = None,
    preprocessing: PreprocessingOptions | None = None,
    split: str | None = None,
) -> dict[str, Any]:
    """Validate a trtconv artifact against its source SavedModel (or `reference`).

    The data, its preprocessing and the split come from the arguments, else the artifact's
    manifest (its data contract), else the model card, else defaults (`random` data, 1/255,
    the held-out split); the result's `data_contract` says where each came from. Outputs are
    judged by the roles `judging` sets, else those the manifest recorded, else inferred.
    `device` is where the artifact runs (RunOptions.device); the reference is TensorFlow with
    TF32 off. Returns the validation dict plus `artifact`, `reference`, `backend`, `precision`,
    `manifest_status`, `data_contract`, `warnings`. Raises UsageError for a missing artifact or
    reference, a device the artifact cannot run on, or an output name the model lacks;
    InputError for a bad one; and AccuracyError (exit 4, carrying that same result) when the
    artifact fails or is not judged.
    """
    from trtconv.backends import registry
    from trtconv.backends.runner import RunOptions
    from trtconv.calib.evaluation import evaluation_data
    from trtconv.manifest import read_manifest
    from trtconv.model_paths import require_exists
    from trtconv.savedmodel import check_saved_model_dir

    artifact = require_exists(Path(artifact), "Artifact")
    manifest = read_manifest(artifact)
    reference_path = check_saved_model_dir(Path(reference or manifest.source_model["path"]))
    judging = (judging or Judging()).over(manifest.judging)
    judging.check_names(manifest.model_signature.output_names)
    with registry.native().runner(reference_path, None, RunOptions()) as native:
        evaluation = evaluation_data(
            native.signature, reference_path, manifest, data, preprocessing, split,
            samples or DEFAULT_VALIDATE_SAMPLES,
        )  # fmt: skip
        with registry.open_runner(artifact, RunOptions(device=device)) as candidate:
            report = validate_runners(
                native, candidate, evaluation.data, manifest.precision, tolerance,
                batch_range=manifest.batch_range, judging=judging,
            )  # fmt: skip
            warnings = list(candidate.warnings)
    warnings += _manifest_warnings(manifest, artifact, report, evaluation)
    for warning in warnings:
        log.warning("%s", warning)
    document = {
        "schema_version": 1,
        "artifact": str(artifact),
        "reference": str(reference_path),
        "backend": manifest.backend,
        "precision": manifest.precision,
        "manifest_status": manifest.status,
        "data_contract": evaluation.contract,
        **report.to_dict(),
        "warnings": warnings,
    }
    raise_if_failed(report, f"{artifact} ({manifest.backend} {manifest.precision})", document)
    return document


def _manifest_warnings(
    manifest: Any, artifact: Path, report: ValidationReport, evaluation: Evaluation
) -> list[str]:
    """What this validation must not hide: the conversion's own verdict when it differs, an
    int8 artifact measured on another CPU class, and data on another scale than calibration."""
    from trtconv.calib.evaluation import scale_warning

    warnings = []
    if manifest.status not in (report.verdict, "unvalidated"):
        recorded = manifest.validation or {}
        # A passed conversion has no failures to name: saying "no output was compared" there
        # would be false.
        why = "" if manifest.status == "passed" else f" ({failures_of(recorded)})"
        warnings.append(
            f"{artifact}: its manifest says the conversion's validation {manifest.status.upper()}"
            f"{why} on {recorded.get('data_source', 'its data')}; this validation on "
            f"{report.data_source} is {report.verdict}."
        )
    portability = _portability_warning(manifest, artifact, report)
    scale = scale_warning(manifest.calibration, evaluation.data, str(artifact))
    return warnings + [w for w in (portability, scale) if w]


def _portability_warning(manifest: Any, artifact: Path, report: ValidationReport) -> str | None:
    """Say so when this validation runs on another int8 CPU class than the conversion's."""
    from trtconv.quantize.isa import portability_warning

    recorded = (manifest.validation or {}).get("machine", {}).get("cpu_int8_class")
    quantization = manifest.conversion_summary.get("quantization")
    here = (report.machine or {}).get("cpu_int8_class", "")
    return portability_warning(quantization, recorded, here, str(artifact), measured_here=True)
