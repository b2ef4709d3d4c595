"""Converted versus native on the same held-out inputs, judged by one per-precision table.

Like Optimum's `_run_validation`: every check is computed and recorded (a ✓/✗ line each), then
the caller decides; `raise_if_failed` turns a failed result into one AccuracyError (exit 4).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trtconv.backends.runner import Runner
from trtconv.calib.sources import ArraySet
from trtconv.errors import AccuracyError, UsageError
from trtconv.report.validation import Check, OutputComparison, ValidationReport

log = logging.getLogger(__name__)

Outputs = dict[str, np.ndarray]
VALIDATION_BATCH = 32
DEFAULT_VALIDATE_SAMPLES = 1000
# Relative error divides by max(|reference|, REL_FLOOR): a probability of 1e-9 that becomes 2e-9
# is not a 100% error worth reporting.
REL_FLOOR = 1e-3


@dataclass(frozen=True)
class Tolerance:
    """What a precision must meet. `atol=None`: max abs error is reported, not judged."""

    atol: float | None
    min_top1_agreement: float
    max_accuracy_drop: float


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


def tolerance_for(precision: str, atol_override: float | None = None) -> Tolerance:
    """The table's tolerance for `precision`; `atol_override` (--tolerance) replaces its atol."""
    try:
        tolerance = TOLERANCES[precision]
    except KeyError:
        known = ", ".join(TOLERANCES)
        raise UsageError(f"Unknown precision '{precision}'; expected one of {known}.") from None
    if atol_override is None:
        return tolerance
    if atol_override <= 0:
        raise UsageError(f"--tolerance must be positive, found {atol_override}.")
    return Tolerance(atol_override, tolerance.min_top1_agreement, tolerance.max_accuracy_drop)


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


def classification_output(outputs: Outputs) -> str | None:
    """The output that holds class scores ([batch, classes>1], float), or None."""
    for name in sorted(outputs):
        array = outputs[name]
        if array.ndim == 2 and array.shape[1] > 1 and np.issubdtype(array.dtype, np.floating):
            return name
    return None


def compare(
    reference: Outputs,
    candidate: Outputs,
    tolerance: Tolerance,
    labels: np.ndarray | None = None,
    data_source: str = "",
) -> ValidationReport:
    """Every check of `candidate` against `reference`, collected into one report: outputs
    present, each output's values (atol), and for classifiers top-1 agreement and, with
    `labels`, the accuracy drop."""
    samples = len(next(iter(reference.values()))) if reference else 0
    report = ValidationReport(
        samples, data_source, tolerance.min_top1_agreement, tolerance.max_accuracy_drop
    )
    missing = sorted(set(reference) - set(candidate))
    if missing:
        report.checks.append(Check("outputs present", False, f"missing {', '.join(missing)}"))
    for name in sorted(set(reference) & set(candidate)):
        report.outputs[name] = _compare_output(
            name, reference[name], candidate[name], tolerance, report
        )
    scores = classification_output(reference)
    if scores is not None and scores in candidate and report.outputs[scores].shape_matches:
        _classification_checks(report, reference[scores], candidate[scores], labels)
    return report


def _compare_output(
    name: str, want: np.ndarray, got: np.ndarray, tolerance: Tolerance, report: ValidationReport
) -> OutputComparison:
    if want.shape != got.shape:
        detail = f"expected {want.shape}, found {got.shape}"
        report.checks.append(Check(f"{name} shape", False, detail))
        return OutputComparison(None, None, tolerance.atol, False, False)
    want64, got64 = want.astype(np.float64), got.astype(np.float64)
    finite = bool(np.isfinite(got64).all())
    diff = np.abs(want64 - got64)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float((diff / np.maximum(np.abs(want64), REL_FLOOR)).max()) if diff.size else 0.0
    passed = finite and (tolerance.atol is None or max_abs <= tolerance.atol)
    bound = "reported only" if tolerance.atol is None else f"atol {tolerance.atol:g}"
    detail = f"max abs error {max_abs:.3g} ({bound}), max rel error {max_rel:.3g}"
    if not finite:
        detail += ", NaN/Inf in the converted output"
    report.checks.append(Check(f"{name} values", passed, detail))
    return OutputComparison(max_abs, max_rel, tolerance.atol, passed, True)


def _classification_checks(
    report: ValidationReport, want: np.ndarray, got: np.ndarray, labels: np.ndarray | None
) -> None:
    want_top1, got_top1 = want.argmax(axis=1), got.argmax(axis=1)
    agreement = float((want_top1 == got_top1).mean())
    minimum = report.min_top1_agreement
    report.top1_agreement = agreement
    detail = f"{agreement:.4f} (minimum {minimum:g})"
    report.checks.append(Check("top-1 agreement", agreement >= minimum, detail))
    if labels is None or len(labels) != len(want):
        return
    report.accuracy_reference = float((want_top1 == labels).mean())
    report.accuracy_candidate = float((got_top1 == labels).mean())
    drop, limit = report.accuracy_drop or 0.0, report.max_accuracy_drop
    detail = (
        f"{report.accuracy_reference:.4f} -> {report.accuracy_candidate:.4f} "
        f"(drop {drop:+.4f}, maximum {limit:g})"
    )
    report.checks.append(Check("accuracy drop", drop <= limit, detail))


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
        message = f"{what} is outside tolerance: {report.failures()}."
        raise AccuracyError(message, result if result is not None else report.to_dict())


def validate_runners(
    reference: Runner,
    candidate: Runner,
    data: ArraySet,
    precision: str,
    atol_override: float | None = None,
    reference_outputs: Outputs | None = None,
    batch_range: tuple[int, int] | None = None,
) -> ValidationReport:
    """Run both runners on `data` (the reference only if its outputs are not given), compare,
    and say which precision, device and CPU the report is for.

    The candidate runs in batches inside `batch_range` (its engines' profile): outside it a
    TensorRT engine refuses the input, and TF-TRT silently runs TensorFlow instead.
    """
    tolerance = tolerance_for(precision, atol_override)
    if reference_outputs is None:
        reference_outputs = run_batched(reference, data)
    batch_size, min_batch = validation_batches(batch_range)
    candidate_outputs = run_batched(candidate, data, batch_size, min_batch)
    report = compare(reference_outputs, candidate_outputs, tolerance, data.labels, data.source)
    report.precision, report.machine = precision, validating_machine()
    report.batch_size, report.device = batch_size, candidate.device
    verdict = "passed" if report.passed else "FAILED"
    log.info("validation on %d samples of %s: %s", report.samples, data.source, verdict)
    return report


def validate(
    artifact: Path,
    reference: Path | None = None,
    data: str | None = None,
    samples: int | None = None,
    tolerance: float | None = None,
    device: str = "auto",
) -> dict[str, Any]:
    """Validate a trtconv artifact against its source SavedModel (or `reference`).

    `data` defaults to the calibration source recorded in the manifest, then the model card's
    training data, then `random`; the held-out part is used. `device` is where the artifact runs
    (RunOptions.device); the reference is TensorFlow with TF32 off. Returns the validation dict
    plus `artifact`, `reference`, `backend`, `precision`, `warnings`. Raises UsageError for a
    missing artifact or reference or a device the artifact cannot run on, InputError for a bad
    one, and AccuracyError (exit 4, carrying that same result) when the artifact is outside
    tolerance.
    """
    from trtconv.backends import registry
    from trtconv.backends.runner import RunOptions
    from trtconv.calib.readers import VALIDATION, read_model_data
    from trtconv.manifest import read_manifest
    from trtconv.model_paths import require_exists
    from trtconv.savedmodel import check_saved_model_dir

    artifact = require_exists(Path(artifact), "Artifact")
    manifest = read_manifest(artifact)
    reference_path = check_saved_model_dir(Path(reference or manifest.source_model["path"]))
    spec = data or default_data_spec(reference_path, manifest.calibration)
    with registry.native().runner(reference_path, None, RunOptions()) as native:
        held_out = read_model_data(
            spec,
            native.signature,
            role=VALIDATION,
            samples=samples or DEFAULT_VALIDATE_SAMPLES,
            saved_model=reference_path,
        )
        with registry.open_runner(artifact, RunOptions(device=device)) as candidate:
            report = validate_runners(
                native,
                candidate,
                held_out,
                manifest.precision,
                tolerance,
                batch_range=manifest.batch_range,
            )
            warnings = list(candidate.warnings)
    warnings += [w for w in [_portability_warning(manifest, artifact, report)] if w]
    for warning in warnings:
        log.warning("%s", warning)
    document = {
        "schema_version": 1,
        "artifact": str(artifact),
        "reference": str(reference_path),
        "backend": manifest.backend,
        "precision": manifest.precision,
        **report.to_dict(),
        "warnings": warnings,
    }
    raise_if_failed(report, f"{artifact} ({manifest.backend} {manifest.precision})", document)
    return document


def _portability_warning(manifest: Any, artifact: Path, report: ValidationReport) -> str | None:
    """Say so when this validation runs on another int8 CPU class than the conversion's."""
    from trtconv.quantize.isa import portability_warning

    recorded = (manifest.validation or {}).get("machine", {}).get("cpu_int8_class")
    quantization = manifest.conversion_summary.get("quantization")
    here = (report.machine or {}).get("cpu_int8_class", "")
    return portability_warning(quantization, recorded, here, str(artifact), measured_here=True)


def default_data_spec(saved_model: Path, calibration: dict[str, Any] | None = None) -> str:
    """Validation data when none is named: calibration source, model-card data, else random."""
    from trtconv.savedmodel import read_model_card

    if calibration and calibration.get("source") and calibration["source"] != "random":
        return str(calibration["source"])
    card = read_model_card(saved_model)
    source = (card or {}).get("data", {}).get("source")
    if source:
        return str(source)
    log.warning("no data named and no model card: validating on random inputs")
    return "random"
