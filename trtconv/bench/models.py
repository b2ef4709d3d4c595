"""Which models `trtconv bench` measures, in which order, against which baseline.

Resolving reads only manifests and saved_model.pb (no TensorFlow), so every path and signature is
checked before the first worker starts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from trtconv.artifact.manifest import QuantizationBlock, read_manifest
from trtconv.backends import registry
from trtconv.calib.calibration_result import CalibrationRecord
from trtconv.core.data_contract import DataContract
from trtconv.core.errors import UsageError
from trtconv.core.model_io import ModelSignature
from trtconv.model.keras_files import CUSTOM_OBJECTS
from trtconv.model.paths import (
    ARTIFACT,
    SAVED_MODEL,
    is_artifact_dir,
    is_saved_model_dir,
    model_kind,
    saved_model_in,
)
from trtconv.model.savedmodel import SERVING_KEY, is_keras_file
from trtconv.model.savedmodel_pb.signature import read_signature
from trtconv.options.bench import BASELINE_FIRST, BASELINE_SOURCE
from trtconv.options.shared import DEFAULT_BATCH_SIZES
from trtconv.outputs.roles import JudgingRecord
from trtconv.outputs.tolerance import Tolerance
from trtconv.quantize.isa import portability_warning, this_cpu_int8_class

log = logging.getLogger(__name__)


@dataclass
class ModelEntry:
    """One model to measure, resolved before any worker starts."""

    label: str
    path: Path
    kind: str  # SAVED_MODEL or ARTIFACT
    backend: str
    precision: str
    signature: ModelSignature
    xla: bool = False
    throughput: bool = False  # run in its backend's throughput mode (RunOptions.throughput)
    source_model: Path | None = None
    # int8 artifacts: their quantization block and the CPU class their validation ran on.
    quantization: QuantizationBlock | None = None
    validated_on: str | None = None
    # Artifacts: the verdict of their conversion's validation (manifest status), the data
    # contract and the judging they were converted with.
    validation: str | None = None
    data_contract: DataContract | None = None
    judging: JudgingRecord | None = None
    rules: Tolerance | None = None  # the judging contract its manifest records (its rules)
    calibration: CalibrationRecord | None = None  # int8: the calibration block (input spread)
    # The batch sizes its engines were built for (TensorRT, TF-TRT), None when any batch runs.
    batch_range: tuple[int, int] | None = None
    # The user's Keras file when `path` is the SavedModel exported from it (what results name).
    shown: Path | None = None


@dataclass
class BenchPlan:
    """Models in measuring order, the baseline and why, and warnings found while planning."""

    models: list[ModelEntry]
    baseline: ModelEntry
    baseline_reason: str
    warnings: list[str] = field(default_factory=list)
    batch_sizes: tuple[int, ...] = ()  # what is measured (`check_batch_sizes`)


def _short_name(path: Path) -> str:
    path = Path(os.path.abspath(path))
    return path.parent.name if path.name == "saved_model" else path.name


def saved_model_entry(
    path: Path, xla: bool = False, signature_key: str | None = None
) -> ModelEntry:
    """A native SavedModel's signature `signature_key` (default serving_default), optionally run
    under XLA, labelled after its directory. Raises UsageError when it has no such signature."""
    label = _short_name(path) + ("+xla" if xla else "")
    signature = read_signature(path, signature_key or SERVING_KEY)
    native = registry.native().name
    return ModelEntry(
        label=label,
        path=path,
        kind=SAVED_MODEL,
        backend=native,
        precision="fp32",
        signature=signature,
        xla=xla,
    )


def artifact_entry(path: Path) -> ModelEntry:
    """A trtconv artifact: backend, precision and source model from its manifest."""
    manifest = read_manifest(path)
    registry.artifact_backend(manifest.backend, path)  # its worker must be able to run it
    source = manifest.source_model.get("path")
    return ModelEntry(
        label=_short_name(path),
        path=path,
        kind=ARTIFACT,
        backend=manifest.backend,
        precision=manifest.precision,
        signature=manifest.model_signature,
        source_model=Path(source) if source else None,
        quantization=manifest.quantization,
        validated_on=manifest.validated_on,
        batch_range=manifest.batch_range,
        validation=manifest.status,
        data_contract=manifest.data_contract,
        judging=manifest.judging,
        rules=manifest.judging_contract().tolerance,
        calibration=manifest.calibration,
    )


def throughput_entry(entry: ModelEntry) -> ModelEntry:
    """`entry` again, run in its backend's throughput mode, labelled LABEL+throughput."""
    return replace(entry, label=entry.label + "+throughput", throughput=True)


def has_throughput_mode(entry: ModelEntry) -> bool:
    """True for an artifact whose backend's runner has a throughput mode."""
    return entry.kind == ARTIFACT and registry.get(entry.backend).throughput_mode


def keras_sources(paths: Sequence[Path | str], baseline_from: str = BASELINE_SOURCE) -> list[Path]:
    """The Keras files bench must export to SavedModels: those given, and the first artifact's
    source model when it is one and no native model is given (it becomes the baseline, unless
    `baseline_from` is BASELINE_FIRST)."""
    given = [Path(p) for p in paths]
    files = [p for p in given if is_keras_file(p)]
    native = files or [p for p in given if is_saved_model_dir(saved_model_in(p))]
    if baseline_from == BASELINE_SOURCE and not native and given and is_artifact_dir(given[0]):
        source = read_manifest(given[0]).source_model.get("path")
        if source and is_keras_file(Path(source)):
            files.append(Path(source))
    return files


def recorded_custom_objects(paths: Sequence[Path | str]) -> tuple[str, ...]:
    """The --custom-objects the first artifact among `paths` was converted with (its Keras
    source needs them), else none."""
    artifacts = [Path(p) for p in paths if is_artifact_dir(Path(p))]
    if not artifacts:
        return ()
    return tuple(read_manifest(artifacts[0]).source_model.get(CUSTOM_OBJECTS, ()))


def _keras_entry(
    path: Path, exported: Mapping[Path, Path], signature_key: str | None
) -> ModelEntry:
    """The SavedModel exported from the Keras file `path`, named after the file."""
    entry = saved_model_entry(exported[path], signature_key=signature_key)
    entry.shown = path
    return entry


def resolve_entry(
    path: Path, signature_key: str | None = None, exported: Mapping[Path, Path] | None = None
) -> ModelEntry:
    """A SavedModel (its signature `signature_key`), Keras file (its SavedModel in `exported`)
    or artifact entry. Missing path or signature: UsageError; neither kind: InputError."""
    path = Path(path)
    if exported and path in exported:
        return _keras_entry(path, exported, signature_key)
    if model_kind(path) == ARTIFACT:
        return artifact_entry(path)
    return saved_model_entry(saved_model_in(path), signature_key=signature_key)


def _unique_labels(models: list[ModelEntry]) -> None:
    seen: dict[str, int] = {}
    for entry in models:
        count = seen.get(entry.label, 0) + 1
        seen[entry.label] = count
        if count > 1:
            entry.label = f"{entry.label}#{count}"


def plan_models(
    paths: Sequence[Path | str],
    xla: bool = False,
    throughput: bool = False,
    signature: str | None = None,
    exported: Mapping[Path, Path] | None = None,
    baseline_from: str = BASELINE_SOURCE,
) -> BenchPlan:
    """Resolve every model path, choose the baseline and fix the measuring order.

    The baseline is the first SavedModel given; without one, the first artifact's source model
    (put first and measured too, with the signature the artifact was converted from). With
    `baseline_from` BASELINE_FIRST it is the first model given, and nothing is added. SavedModels
    run `signature` (default serving_default). With --xla each SavedModel is followed by an XLA
    variant; with `throughput` each artifact whose backend has a throughput mode by a run in it.
    Keras files (given, or an artifact's source) run as the SavedModels `exported` from them.
    """
    if not paths:
        raise UsageError("Give at least one model (a SavedModel or a trtconv artifact directory).")
    exported = exported or {}
    given = [resolve_entry(Path(p), signature, exported) for p in paths]
    warnings: list[str] = []
    models: list[ModelEntry] = []
    for entry in given:
        models.append(entry)
        if xla and entry.kind == SAVED_MODEL:
            xla_entry = saved_model_entry(entry.path, True, entry.signature.name)
            models.append(replace(xla_entry, shown=entry.shown))
        if throughput and has_throughput_mode(entry):
            models.append(throughput_entry(entry))
    native = [m for m in models if m.kind == SAVED_MODEL and not m.xla]
    if baseline_from == BASELINE_FIRST:
        baseline, reason = models[0], "the first model given (--baseline first)"
    elif native:
        baseline, reason = native[0], "the first SavedModel given"
    else:
        first = models[0]
        source = first.source_model
        runs = exported.get(source, source) if source is not None else None
        if runs is not None and is_saved_model_dir(runs):
            key = signature or first.signature.name
            baseline = saved_model_entry(runs, signature_key=key)
            baseline.shown = source if runs != source else None
            reason = f"the source model of artifact {first.path}"
            models.insert(0, baseline)
            if xla:
                models.insert(1, replace(saved_model_entry(runs, True, key), shown=baseline.shown))
        else:
            baseline, reason = first, "the first model given (its source model was not found)"
            warnings.append(
                f"The source model of {first.path} ({source}) is not a SavedModel here; "
                f"speedups are relative to {first.path}."
            )
    _unique_labels(models)
    return BenchPlan(models, baseline, reason, warnings)


def portability_warnings(models: list[ModelEntry], measured_here: bool = False) -> list[str]:
    """One line per int8 artifact validated on another CPU class than this one."""
    here = this_cpu_int8_class()
    found = (
        portability_warning(m.quantization, m.validated_on, here, m.label, measured_here)
        for m in models
    )
    return [warning for warning in found if warning]


def check_batch_sizes(models: list[ModelEntry], batch_sizes: Sequence[int]) -> tuple[int, ...]:
    """The batch sizes to measure: `batch_sizes`, or a model's fixed batch when they are the
    default (said once, in the log). Raises UsageError when a model's fixed batch dimension, or
    the batch range its engines were built for, excludes a requested batch size."""
    batch_sizes = tuple(batch_sizes)
    pinned = next((m for m in models if m.signature.fixed_batch is not None), None)
    if pinned is not None:
        signature = pinned.signature
        batch_sizes = signature.accepted_batch_sizes(
            batch_sizes, DEFAULT_BATCH_SIZES, pinned.path, "--batch-sizes"
        )
        log.info(
            "%s takes batch size %d only (input %s): measuring at batch %d",
            pinned.path,
            batch_sizes[0],
            signature.fixed_input().describe(),
            batch_sizes[0],
        )
    for entry in models:
        if entry.batch_range is not None:
            low, high = entry.batch_range
            outside = [b for b in batch_sizes if not low <= b <= high]
            if outside:
                raise UsageError(
                    f"{entry.path} was built for batch sizes {low} to {high} (its engines' "
                    f"profile), asked for {', '.join(map(str, outside))}: bench inside that "
                    "range or convert again with --batch-sizes."
                )
        for spec in entry.signature.inputs:
            fixed = spec.shape[0] if spec.shape else None
            bad = [b for b in batch_sizes if fixed is not None and b != fixed]
            if bad:
                raise UsageError(
                    f"{entry.path} takes batch size {fixed} only (input {spec.describe()}), "
                    f"asked for {', '.join(map(str, bad))}."
                )
    return batch_sizes
