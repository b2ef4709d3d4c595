"""`convert`: SavedModel -> validated artifact (manifest.json + payload), written atomically.

Order: everything cheap and certain first (arguments, SavedModel on disk, output free, backend and
precision supported here, SavedModel loads, data readable and fitting the signature), then the
work inside a staging directory that only becomes the output when every step has finished.
"""

from __future__ import annotations

import importlib
import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from trtconv.backends.base import PRECISIONS, ConversionOutcome, ConversionRequest, open_runner
from trtconv.calib.sources import ArraySet
from trtconv.errors import UsageError
from trtconv.fsutil import atomic_directory, check_output_free, dir_size_bytes, sha256_path
from trtconv.manifest import Manifest, read_manifest, write_manifest
from trtconv.quantize import CALIB_METHODS
from trtconv.quantize.isa import INT8_TARGETS
from trtconv.savedmodel import check_saved_model_dir

log = logging.getLogger(__name__)

RESULT_SCHEMA_VERSION = 1
BACKENDS = ("auto", "tftrt", "ort", "trt")
BACKEND_MODULES = {
    "tftrt": "trtconv.backends.tftrt",
    "ort": "trtconv.backends.ort",
    "trt": "trtconv.backends.trt",
}
ONNX_BACKENDS = ("ort", "trt")
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
    backend: str
    backend_reason: str
    precision: str
    data_spec: str
    calibration: ArraySet | None
    held_out: ArraySet
    int8_target: str = "auto"


def convert(
    saved_model: Path,
    precision: str,
    backend: str = "auto",
    output: Path | None = None,
    calib_data: str | None = None,
    calib_samples: int = DEFAULT_CALIB_SAMPLES,
    calib_method: str = "entropy",
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    validate_samples: int = DEFAULT_VALIDATE_SAMPLES,
    tolerance: float | None = None,
    force: bool = False,
    image_scale: float | None = None,
    image_offset: float | None = None,
    int8_target: str = "auto",
) -> dict[str, Any]:
    """Convert a SavedModel into a validated artifact directory; return the result dict.

    `int8_target` (int8 only): where the artifact will run, which sets the weight range of CPU
    int8 models: "auto" (this CPU's class), "vnni" (VNNI/AMX x86 CPUs) or "portable" (any x86).

    Keys: schema_version, artifact, backend, precision, backend_reason, conversion_seconds,
    artifact_size_bytes, manifest, validation. Outside tolerance the artifact is still written,
    with manifest status "failed" and `validation.passed` false (the CLI exits 4).
    Raises UsageError (2), InputError (1), MissingDependencyError (3), ConversionError (1), each
    before anything is written except ConversionError.
    """
    from trtconv.backends.tf_native import SavedModelRunner

    batch_sizes = tuple(batch_sizes)
    _check_arguments(precision, backend, calib_method, batch_sizes, calib_samples, validate_samples)
    _check_choice("--int8-target", int8_target, INT8_TARGETS)
    saved_model = check_saved_model_dir(Path(saved_model))
    chosen, reason = _choose_backend(backend, precision)
    output = Path(output) if output else default_output(saved_model, chosen, precision)
    check_output_free(output, force)
    native = SavedModelRunner(saved_model)
    native.activate()  # loads: a corrupt or signature-less model fails here, exit 1
    counts = (calib_samples, validate_samples)
    spec, calibration, held_out = _read_data(
        native, saved_model, precision, calib_data, counts, image_scale, image_offset
    )
    plan = Plan(
        saved_model, output, chosen, reason, precision, spec, calibration, held_out, int8_target
    )
    log.info("converting %s to %s %s (%s)", saved_model, chosen, precision, reason)
    with atomic_directory(output, force) as staging, tempfile.TemporaryDirectory() as work:
        # Native outputs once: they check the ONNX export and then the converted model.
        reference = _reference_outputs(native, plan.held_out)
        started = time.perf_counter()
        request = ConversionRequest(
            saved_model=saved_model,
            signature=native.signature,
            precision=precision,
            output_dir=staging,
            batch_sizes=batch_sizes,
            calibration=_feed(plan.calibration),
            calib_method=calib_method,
        )
        export_summary = _prepare_onnx(request, plan, Path(work), reference)
        outcome: ConversionOutcome = _backend_module(chosen).convert(request)
        seconds = time.perf_counter() - started
        summary = {**outcome.summary, **export_summary}
        manifest = _manifest(plan, request, outcome, summary, seconds, calib_method)
        write_manifest(staging, manifest)
        validation = _validate_staged(staging, native, plan, reference, tolerance)
        manifest.validation = validation
        manifest.status = "passed" if validation["passed"] else "failed"
        write_manifest(staging, manifest)
    size = dir_size_bytes(output)
    status = manifest.status
    log.info("wrote %s (%.2f MB) in %.1f s: validation %s", output, size / 1e6, seconds, status)
    return {
        "schema_version": RESULT_SCHEMA_VERSION,
        "artifact": str(output),
        "backend": chosen,
        "precision": precision,
        "backend_reason": reason,
        "conversion_seconds": round(seconds, 3),
        "artifact_size_bytes": size,
        "manifest": manifest.to_dict(),
        "validation": validation,
    }


def _check_arguments(
    precision: str,
    backend: str,
    calib_method: str,
    batch_sizes: tuple[int, ...],
    calib_samples: int,
    validate_samples: int,
) -> None:
    for name, value, choices in (
        ("--precision", precision, PRECISIONS),
        ("--backend", backend, BACKENDS),
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


def _choose_backend(backend: str, precision: str) -> tuple[str, str]:
    """(backend, reason); exit 3 here, before any work, when it cannot run this precision."""
    from trtconv import capabilities

    if backend == "auto":
        chosen, reason = capabilities.choose_backend(precision)
    else:
        chosen, reason = backend, "requested with --backend"
    capabilities.check_supported(chosen, precision)
    return chosen, reason


def default_output(saved_model: Path, backend: str, precision: str) -> Path:
    """models/<name>-<backend>-<precision>; <name> is the folder holding `saved_model/`."""
    resolved = saved_model.resolve()
    name = resolved.parent.name if resolved.name == "saved_model" else resolved.name
    return Path("models") / f"{name}-{backend}-{precision}"


def _read_data(
    native: Any,
    saved_model: Path,
    precision: str,
    calib_data: str | None,
    samples: tuple[int, int],
    scale: float | None,
    offset: float | None,
) -> tuple[str, ArraySet | None, ArraySet]:
    """(spec, calibration part for int8, held-out part), both checked against the signature.

    `samples` is (calibration, validation) sample counts.
    """
    from trtconv.calib.readers import (
        CALIBRATION,
        RANDOM,
        VALIDATION,
        read_model_data,
        whole_batches,
    )
    from trtconv.validation import default_data_spec

    spec = calib_data or default_data_spec(saved_model)
    if precision == "int8" and calib_data is None:
        if spec == RANDOM:  # random calibration only when asked for by name
            raise UsageError(
                f"INT8 needs calibration data and {saved_model} has no model card naming "
                "its data; pass --calib-data digits|PATH.npz|IMAGE_DIR (or 'random', for timing "
                "only)."
            )
        log.info("no --calib-data: calibrating on '%s' (the model card's data)", spec)
    options: dict[str, Any] = {"saved_model": saved_model, "scale": scale, "offset": offset}
    calibration = None
    if precision == "int8":
        calibration = whole_batches(
            read_model_data(
                spec, native.signature, role=CALIBRATION, samples=samples[0], **options
            ),
            CALIB_BATCH,
        )
    held_out = read_model_data(
        spec, native.signature, role=VALIDATION, samples=samples[1], **options
    )
    return spec, calibration, held_out


def _feed(data: ArraySet | None) -> Any:
    from trtconv.calib.readers import calibration_feed

    return None if data is None else calibration_feed(data, CALIB_BATCH)


def _reference_outputs(native: Any, held_out: ArraySet) -> dict[str, Any]:
    from trtconv.validation import run_batched

    return run_batched(native, held_out)


def _prepare_onnx(
    request: ConversionRequest, plan: Plan, work: Path, reference: dict[str, Any]
) -> dict[str, Any]:
    """For ONNX backends: export, check against TensorFlow, and quantise (int8) in `work`."""
    if plan.backend not in ONNX_BACKENDS:
        return {}
    from trtconv.backends.onnx_export import export_onnx, verify_export
    from trtconv.quantize.qdq import quantize_qdq

    onnx_path = work / "model.fp32.onnx"
    export = export_onnx(plan.saved_model, onnx_path, request.signature)
    check = verify_export(onnx_path, plan.held_out.head(EXPORT_CHECK_SAMPLES), _head(reference))
    export["check"] = {
        "samples": check["samples"],
        "max_abs_error": {name: o["max_abs_error"] for name, o in check["outputs"].items()},
        "top1_agreement": check["top1_agreement"],
    }
    request.onnx_path = onnx_path
    summary: dict[str, Any] = {"onnx_export": export}
    if plan.precision == "int8":
        assert request.calibration is not None  # _plan_data reads calibration data for int8
        options, decision = _qdq_options(plan, request.calib_method)
        request.qdq_onnx_path = work / "model.qdq.onnx"
        summary["quantization"] = quantize_qdq(
            onnx_path, request.qdq_onnx_path, request.calibration, options, str(plan.saved_model)
        )
        summary["quantization"].update(decision)
    return summary


def _qdq_options(plan: Plan, method: str) -> tuple[Any, dict[str, Any]]:
    """The Q/DQ options for the plan's backend and int8 target, and the record of the choice.

    ORT CPU runs U8S8 fastest, with the weight range its CPU kernels need; TensorRT reads only
    signed symmetric Q/DQ and has no int16 saturation, so its weights keep the full range.
    """
    from trtconv.quantize.isa import CPU_SCHEME, this_cpu_int8_class, weight_range
    from trtconv.quantize.qdq import QdqOptions

    scheme = "s8s8" if plan.backend == "trt" else CPU_SCHEME
    here = this_cpu_int8_class()
    if scheme != CPU_SCHEME:
        return QdqOptions(scheme, method), {"int8_target": None}
    choice = weight_range(plan.int8_target, here)
    log.info("int8 weights: %s (%s)", choice.description, choice.reason)
    decision = {
        "int8_target": choice.target,
        "weight_range_reason": choice.reason,
        "converted_on_cpu_class": here,
    }
    return QdqOptions(scheme, method, choice.reduce_range), decision


def _head(outputs: dict[str, Any]) -> dict[str, Any]:
    return {name: array[:EXPORT_CHECK_SAMPLES] for name, array in outputs.items()}


def _backend_module(backend: str) -> Any:
    return importlib.import_module(BACKEND_MODULES[backend])


def _manifest(
    plan: Plan,
    request: ConversionRequest,
    outcome: ConversionOutcome,
    summary: dict[str, Any],
    seconds: float,
    calib_method: str,
) -> Manifest:
    from trtconv.calib.readers import describe
    from trtconv.environment import cpu_info, library_versions

    calibration = None
    if plan.calibration is not None:
        calibration = describe(plan.calibration, plan.data_spec, calib_method)
    summary["batch_sizes"] = list(request.batch_sizes)
    return Manifest(
        backend=plan.backend,
        precision=plan.precision,
        payload=outcome.payload,
        source_model={
            "path": str(plan.saved_model.resolve()),
            "sha256": sha256_path(plan.saved_model),
        },
        signature=request.signature.to_dict(),
        device=outcome.device or {"cpu": cpu_info()["model"]},
        tools=library_versions(),
        conversion_seconds=round(seconds, 3),
        conversion_summary=summary,
        calibration=calibration,
        backend_reason=plan.backend_reason,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def _validate_staged(
    staging: Path,
    native: Any,
    plan: Plan,
    reference: dict[str, Any],
    tolerance: float | None,
) -> dict[str, Any]:
    """Validate the staged artifact the way users will open it (manifest -> runner)."""
    from trtconv.validation import validate_runners

    read_manifest(staging)  # the manifest we wrote must read back
    return validate_runners(
        native, open_runner(staging), plan.held_out, plan.precision, tolerance, reference
    )
