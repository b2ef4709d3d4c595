"""Converted versus native on the same held-out inputs, each output judged by its role
(trtconv.outputs) against one per-precision table.

Like Optimum's `_run_validation`: every check is computed and recorded (a ✓/✗ line each), then
the caller decides; `raise_if_failed` turns a failed or unjudged result into one AccuracyError
(exit 4).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from trtconv.backends.runner import Outputs, Runner
from trtconv.calib.contract import PreprocessingOptions
from trtconv.calib.sources import ArraySet
from trtconv.errors import AccuracyError, UsageError
from trtconv.outputs.roles import BINARY, CLASSES, Judging, Roles, resolve_roles
from trtconv.report.validation import Check, ValidationReport, failures_of

if TYPE_CHECKING:
    from trtconv.calib.evaluation import Evaluation

log = logging.getLogger(__name__)
VALIDATION_BATCH = 32
DEFAULT_VALIDATE_SAMPLES = 1000


@dataclass(frozen=True)
class Tolerance:
    """What a precision must meet. `atol=None`: max abs error is reported, not judged.
    `output_atol` gives some outputs their own atol (--tolerance NAME=X)."""

    atol: float | None
    min_top1_agreement: float
    max_accuracy_drop: float
    output_atol: Mapping[str, float] = field(default_factory=dict)

    def atol_for(self, output: str) -> float | None:
        """The absolute tolerance of `output`: its own, else the precision's."""
        return self.output_atol.get(output, self.atol)


# The one table (Optimum's ATOL_FOR_VALIDATION, per precision). fp32 is near-exact (only operator
# order differs); tf32 keeps a 10-bit mantissa; fp16 too, with a smaller range; int8 changes the
# numbers on purpose and is judged by what the model decides, not by the digits it prints.
TOLERANCES: dict[str, Tolerance] = {
    "fp32": Tolerance(atol=1e-4, min_top1_agreement=0.99, max_accuracy_drop=0.005),
    "tf32": Tolerance(atol=5e-3, min_top1_agreement=0.99, max_accuracy_drop=0.01),
    "fp16": Tolerance(atol=1e-2, min_top1_agreement=0.98, max_accuracy_drop=0.01),
    # bfloat16 keeps 8 bits of mantissa to float16's 11: 4x fp16's atol (a small ResNet's
    # probabilities moved by 0.013 on OpenVINO's CPU plugin, fp16 0.0016).
    "bf16": Tolerance(atol=5e-2, min_top1_agreement=0.98, max_accuracy_drop=0.01),
    "int8": Tolerance(atol=None, min_top1_agreement=0.97, max_accuracy_drop=0.02),
}


def tolerance_for(
    precision: str,
    atol_override: float | None = None,
    output_atol: Mapping[str, float] | None = None,
) -> Tolerance:
    """The table's tolerance for `precision`; `atol_override` (--tolerance X) replaces its atol
    and `output_atol` (--tolerance NAME=X) sets some outputs' own."""
    try:
        tolerance = TOLERANCES[precision]
    except KeyError:
        known = ", ".join(TOLERANCES)
        raise UsageError(f"Unknown precision '{precision}'; expected one of {known}.") from None
    for name, value in [("", atol_override), *(output_atol or {}).items()]:
        if value is not None and value <= 0:
            raise UsageError(f"--tolerance {name + '=' if name else ''}{value}: must be positive.")
    return Tolerance(
        tolerance.atol if atol_override is None else atol_override,
        tolerance.min_top1_agreement,
        tolerance.max_accuracy_drop,
        dict(output_atol or {}),
    )


def budget_for(
    precision: str,
    atol_override: float | None = None,
    min_top1_agreement: float | None = None,
    max_accuracy_drop: float | None = None,
    output_atol: Mapping[str, float] | None = None,
) -> Tolerance:
    """`tolerance_for(precision, atol_override, output_atol)` with its top-1 agreement and
    accuracy-drop limits replaced where given (convert's --min-top1-agreement and
    --max-accuracy-drop, a release's gates). Raises UsageError for a limit outside [0, 1]."""
    tolerance = tolerance_for(precision, atol_override, output_atol)
    for name, value in (
        ("--min-top1-agreement", min_top1_agreement),
        ("--max-accuracy-drop", max_accuracy_drop),
    ):
        if value is not None and not 0.0 <= value <= 1.0:
            raise UsageError(f"{name} must be between 0 and 1, found {value}.")
    return Tolerance(
        tolerance.atol,
        tolerance.min_top1_agreement if min_top1_agreement is None else min_top1_agreement,
        tolerance.max_accuracy_drop if max_accuracy_drop is None else max_accuracy_drop,
        tolerance.output_atol,
    )


def run_batched(
    runner: Runner, data: ArraySet, batch_size: int = VALIDATION_BATCH, min_batch: int = 1
) -> Outputs:
    """Run `runner` over every sample of `data` in batches; outputs concatenated by name.

    A last batch smaller than `min_batch` (the smallest batch an engine was built for) is padded
    by repeating its rows, and the padding's outputs are dropped.
    """
    from trtconv.calib.readers import batches

    collected: dict[str, list[np.ndarray]] = {}
    for feeds in batches(data, batch_size):
        rows = len(next(iter(feeds.values())))
        if rows < min_batch:
            feeds = {name: np.resize(a, (min_batch, *a.shape[1:])) for name, a in feeds.items()}
        for name, array in runner.infer(feeds).items():
            collected.setdefault(name, []).append(np.asarray(array)[:rows])
    return {name: np.concatenate(parts) for name, parts in collected.items()}


def validation_batches(batch_range: tuple[int, int] | None) -> tuple[int, int]:
    """(batch size, smallest batch) for validating an artifact built for `batch_range`: 32 when
    that lies inside the range (or there is none), else the nearest end of the range."""
    if batch_range is None:
        return VALIDATION_BATCH, 1
    low, high = batch_range
    return max(low, min(VALIDATION_BATCH, high)), low


def compare(
    reference: Outputs,
    candidate: Outputs,
    tolerance: Tolerance,
    labels: np.ndarray | None = None,
    data_source: str = "",
    roles: Roles | None = None,
    allow_unjudged: bool = False,
) -> ValidationReport:
    """Every check of `candidate` against `reference`, collected into one report: outputs
    present, and each output judged by its role (trtconv.outputs.judge); `labels` score the one
    decision output they fit. `roles` default to those inferred from the reference's values
    (`resolve_roles`; pass the graph's final ops there for a better guess)."""
    from trtconv.outputs.judge import judge_output

    samples = len(next(iter(reference.values()))) if reference else 0
    report = ValidationReport(
        samples, data_source, tolerance.min_top1_agreement, tolerance.max_accuracy_drop
    )
    report.allow_unjudged = allow_unjudged
    roles = roles or resolve_roles(reference)
    missing = sorted(set(reference) - set(candidate))
    if missing:
        report.checks.append(Check("outputs present", False, f"missing {', '.join(missing)}"))
    report.labels_output = labels_output(roles, reference, labels)
    for name in sorted(set(reference) & set(candidate)):
        scored = labels if name == report.labels_output else None
        judgement = judge_output(
            name, roles[name], reference[name], candidate[name], tolerance, scored
        )
        report.outputs[name] = judgement.comparison
        report.checks += judgement.checks
    return report


def labels_output(roles: Roles, reference: Outputs, labels: np.ndarray | None) -> str | None:
    """The one decision output `labels` can score (class ids below its class count, or 0/1 for
    one binary score per sample); None without labels or when several outputs fit."""
    if labels is None:
        return None
    fitting = [
        name
        for name, role in sorted(roles.items())
        if name in reference and _labels_fit(role.role, np.asarray(reference[name]), labels)
    ]
    if len(fitting) > 1:
        log.warning(
            "labels fit several outputs (%s): accuracy is not computed (set the others' roles "
            "with --output-role)",
            ", ".join(fitting),
        )
    return fitting[0] if len(fitting) == 1 else None


def _labels_fit(role: str, scores: np.ndarray, labels: np.ndarray) -> bool:
    if len(labels) != len(scores) or labels.size != len(scores) or not len(labels):
        return False
    per_sample = scores.reshape(len(scores), -1).shape[1]
    low, high = int(labels.min()), int(labels.max())
    if role == CLASSES:
        integer_ids = not np.issubdtype(scores.dtype, np.floating) and per_sample == 1
        return low >= 0 and (integer_ids or (scores.ndim == 2 and high < scores.shape[1] > 1))
    return role == BINARY and per_sample == 1 and low >= 0 and high <= 1


def validating_machine() -> dict[str, Any]:
    """The CPU (and its int8 class) a validation ran on: int8 verdicts hold per CPU class."""
    from trtconv.environment import cpu_info
    from trtconv.quantize.isa import cpu_int8_class

    cpu = cpu_info()
    return {"cpu": cpu["model"], "cpu_int8_class": cpu_int8_class(cpu)}


def raise_if_failed(
    report: ValidationReport, what: str, result: dict[str, Any] | None = None
) -> None:
    """Raise one AccuracyError (exit 4) listing every failed check of `report`, carrying the
    command's full `result` (the report itself by default)."""
    if not report.passed:
        why = "is outside tolerance" if report.verdict == "failed" else "has outputs not judged"
        message = f"{what} {why}: {report.failures()}."
        raise AccuracyError(message, result if result is not None else report.to_dict())


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


def output_roles(model: Path | None, reference_outputs: Outputs, judging: Judging) -> Roles:
    """Every output's role: set in `judging`, else inferred from the op ending its graph in the
    SavedModel `model` (if it is one) and from the reference's values."""
    from trtconv.model_paths import is_saved_model_dir
    from trtconv.outputs.graph_ends import final_ops

    ops = final_ops(model) if model is not None and is_saved_model_dir(model) else {}
    return resolve_roles(reference_outputs, ops, judging.roles)


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
