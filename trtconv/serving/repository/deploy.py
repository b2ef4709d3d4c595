"""`trtconv deploy`: a Triton model repository, one model per artifact or SavedModel.

Each model is `NAME/config.pbtxt`, `NAME/1/<payload>` and `NAME/trtconv.json` (the manifest and
how the config was decided). The Triton backend that serves a payload natively comes from the
trtconv backend's record (`Backend.triton`); batching from a bench run when one is given.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtconv import __version__
from trtconv.artifact.manifest import Manifest, read_manifest
from trtconv.backends.registry import Backend, artifact_backend, native
from trtconv.core.errors import InputError, UsageError
from trtconv.core.fsutil import atomic_directory, check_output_free, sha256_path
from trtconv.core.model_io import ModelSignature
from trtconv.measure.bench_result import BenchResult, BenchRow
from trtconv.measure.server_bench_result import ServerBenchResult, ServerRow
from trtconv.model.paths import ARTIFACT, model_kind, saved_model_in
from trtconv.model.savedmodel import load_saved_model
from trtconv.options.deploy import DeployOptions
from trtconv.options.serving import (
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_PREFERRED_BATCH_SIZES,
    DEFAULT_QUEUE_DELAY_US,
)
from trtconv.protocol.serving import TritonServing
from trtconv.serving.repository.admission import Admission, admission
from trtconv.serving.repository.deploy_result import DeployedModel, DeployResult
from trtconv.serving.repository.fixed_inputs import recorded_input_values
from trtconv.serving.repository.triton_config import Batching, ModelConfigSpec, render_config

VERSION = "1"  # the one model version each repository entry holds
SIDE_FILE = "trtconv.json"
# Batch sizes whose bench throughput is within this share of the best are all preferred.
PREFERRED_SHARE = 0.9
# Batch sizes a serving run's batcher formed for at least this share of its executions are
# preferred.
PREFERRED_FORMED = 0.1
UNVERIFIED = (
    "Triton's native backends (onnxruntime, openvino, tensorrt_plan, tensorflow_savedmodel) are "
    "not run by trtconv: the configs parse as Triton's ModelConfig, but loading them needs a "
    "Triton server build with those backends."
)


@dataclass(frozen=True)
class ModelSource:
    """One model to deploy: its path, backend record, manifest (None for a SavedModel),
    signature and payload (file or folder)."""

    path: Path
    name: str
    backend: Backend
    serving: TritonServing
    manifest: Manifest | None
    signature: ModelSignature
    payload: Path


def deploy(options: DeployOptions) -> DeployResult:
    """Write the Triton repository `options.output` (atomically; --force replaces it).

    Raises UsageError for an existing output, clashing names or a missing bench file, and
    InputError for a model Triton has no backend for.
    """
    check_output_free(options.output, options.force)
    sources = [describe(path) for path in options.models]
    _check_names(sources)
    rows, served = _bench_rows(options.bench), _serving_rows(options.serving)
    with atomic_directory(options.output, options.force) as staging:
        models = [write_model(staging, source, options, rows, served) for source in sources]
    return DeployResult(str(options.output), models, [UNVERIFIED, *_fixed_input_warnings(sources)])


def _fixed_input_warnings(sources: list[ModelSource]) -> list[str]:
    """A Triton backend takes every model input from the request: an artifact converted with
    --input-value (a TF1 flag) needs its clients to send that value; `trtconv serve` sets it."""
    found = []
    for source in sources:
        values = recorded_input_values(source.path)
        if values:
            given = ", ".join(f"{name}={value}" for name, value in values.items())
            triton = source.serving.backend or source.serving.platform
            found.append(
                f"{source.name} was converted with {given} (--input-value): Triton's {triton} "
                "takes every input from the request, so its clients must send that value too "
                "(`trtconv serve` sets it itself)"
            )
    return found


def describe(path: Path) -> ModelSource:
    """What to deploy from `path`: an artifact directory or a SavedModel (loaded for its
    signature). Raises InputError when Triton cannot serve its backend."""
    if model_kind(path) == ARTIFACT:
        manifest = read_manifest(path)
        backend = artifact_backend(manifest.backend, path)
        signature = manifest.model_signature
        payload = path / manifest.payload
    else:
        manifest, backend = None, native()
        payload = saved_model_in(path)
        signature = load_saved_model(payload).signature
    if backend.triton is None:
        raise InputError(f"{path}: Triton has no backend that serves {backend.name} models.")
    name = model_name(path)
    return ModelSource(
        path=path,
        name=name,
        backend=backend,
        serving=backend.triton,
        manifest=manifest,
        signature=signature,
        payload=payload,
    )


def model_name(path: Path) -> str:
    """The Triton model name for `path`: its folder name (the parent's for a `saved_model`
    folder), with characters outside [A-Za-z0-9_.-] replaced by '_'."""
    path = Path(path).absolute()
    base = path.parent.name if path.name == "saved_model" else path.name
    return re.sub(r"[^A-Za-z0-9_.-]", "_", base) or "model"


def _check_names(sources: list[ModelSource]) -> None:
    seen: dict[str, Path] = {}
    for source in sources:
        if source.name in seen:
            raise UsageError(
                f"{seen[source.name]} and {source.path} would both be model '{source.name}' in "
                "the repository; give models whose folders have different names."
            )
        seen[source.name] = source.path


def _bench_rows(bench: Path | None) -> dict[Path, list[BenchRow]]:
    """The bench run's rows by model path (resolved); empty without a bench file."""
    if bench is None:
        return {}
    if not Path(bench).is_file():
        raise UsageError(f"Bench result {bench} does not exist.")
    try:
        result = BenchResult.load(bench)
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{bench} is not a `trtconv bench --json` result ({exc}).") from exc
    rows: dict[Path, list[BenchRow]] = {}
    for row in result.results:
        rows.setdefault(Path(row.model).resolve(), []).append(row)
    return rows


def batching_for(source: ModelSource, rows: list[BenchRow] | None, bench: Path | None) -> Batching:
    """Dynamic batching for one model: none for a fixed batch; from its bench rows when there
    are some; else the defaults. Engines built for a batch range cap the batch size."""
    fixed = source.signature.fixed_batch
    if fixed is not None:
        return Batching(0, source=f"none: the model takes a fixed batch of {fixed}")
    cap = (
        source.manifest.batch_range[1] if source.manifest and source.manifest.batch_range else None
    )
    if rows:
        return _measured(rows, cap, bench)
    largest = min(DEFAULT_MAX_BATCH_SIZE, cap or DEFAULT_MAX_BATCH_SIZE)
    preferred = tuple(size for size in DEFAULT_PREFERRED_BATCH_SIZES if size <= largest)
    why = "defaults" if bench is None else f"defaults ({bench} has no rows for {source.path})"
    return Batching(largest, preferred or (largest,), DEFAULT_QUEUE_DELAY_US, why)


def _measured(rows: list[BenchRow], cap: int | None, bench: Path | None) -> Batching:
    """Batching from bench rows: batches up to the largest size measured, preferring those
    whose throughput is within PREFERRED_SHARE of the best; a request waits at most half the
    smallest batch's median latency (waiting longer costs more than batching gains)."""
    by_size = {row.batch_size: row for row in rows if cap is None or row.batch_size <= cap}
    if not by_size:
        by_size = {min(row.batch_size for row in rows): min(rows, key=lambda r: r.batch_size)}
    best = max(row.throughput_per_s for row in by_size.values())
    preferred = tuple(
        size
        for size, row in sorted(by_size.items())
        if size > 1 and row.throughput_per_s >= PREFERRED_SHARE * best
    )
    fastest = max(by_size.values(), key=lambda row: row.throughput_per_s)
    smallest = by_size[min(by_size)]
    delay = max(1, round(smallest.latency_ms_p50 * 1000 / 2))
    why = (
        f"bench {bench}: batch sizes {sorted(by_size)}, preferred within "
        f"{PREFERRED_SHARE:.0%} of the best throughput, queue delay half the batch-"
        f"{smallest.batch_size} p50 latency"
    )
    return Batching(max(by_size), preferred or (fastest.batch_size,), delay, why)


def _serving_rows(serving: Path | None) -> dict[Path, ServerRow]:
    """A `bench --scenario server --json` result's dynamic-batching rows that met the budget,
    by model path (resolved); empty without one."""
    if serving is None:
        return {}
    if not Path(serving).is_file():
        raise UsageError(f"Serving result {serving} does not exist.")
    try:
        result = ServerBenchResult.load(Path(serving))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(
            f"{serving} is not a `bench --scenario server --json` result ({exc})."
        ) from exc
    return {
        Path(row.model).resolve(): row
        for row in result.rows
        if row.dynamic_batching and row.qps_at_budget > 0
    }


def served_batching(row: ServerRow, cap: int | None, serving: Path) -> Batching:
    """Batching from a serving run that met its budget: its batch limit and queue delay, and
    preferred the sizes above 1 its batcher formed for at least PREFERRED_FORMED of the
    executions (what that load produced)."""
    largest = min(row.max_batch_size, cap or row.max_batch_size)
    formed = {int(size): int(count) for size, count in row.batches.items()}
    total = sum(formed.values()) or 1
    preferred = tuple(
        size
        for size, count in sorted(formed.items())
        if 1 < size <= largest and count >= PREFERRED_FORMED * total
    )
    why = (
        f"serving run {serving}: p99 within the budget at {row.qps_at_budget:g} queries/s with "
        f"batches up to {row.max_batch_size} and a {row.max_queue_delay_us} µs queue delay"
    )
    return Batching(largest, preferred or (largest,), row.max_queue_delay_us, why)


def write_model(
    repository: Path,
    source: ModelSource,
    options: DeployOptions,
    rows: dict[Path, list[BenchRow]],
    served: dict[Path, ServerRow] | None = None,
) -> DeployedModel:
    """Write one model's folder (payload, config.pbtxt, trtconv.json) under `repository`; a
    serving run's row (`served`) tunes the batching over a bench's."""
    batching = batching_for(source, rows.get(source.path.resolve()), options.bench)
    row = (served or {}).get(source.path.resolve())
    if row is not None and batching.dynamic and options.serving is not None:
        cap = (
            source.manifest.batch_range[1]
            if source.manifest and source.manifest.batch_range
            else None
        )
        batching = served_batching(row, cap, options.serving)
    policy = admission_for(batching, options, rows.get(source.path.resolve()), row)
    spec = config_spec(source, batching, options, policy)
    folder = repository / source.name
    version = folder / VERSION
    version.mkdir(parents=True)
    copy_payload(source.payload, version / source.serving.model_filename)
    (folder / "config.pbtxt").write_text(render_config(spec))
    side = {
        "deployed_by": f"trtconv {__version__}",
        "source": str(source.path),
        "source_sha256": sha256_path(source.payload),
        "batching": {"source": batching.source},
        "manifest": source.manifest.to_json() if source.manifest else None,
    }
    (folder / SIDE_FILE).write_text(json.dumps(side, indent=2, default=str) + "\n")
    return DeployedModel(
        name=source.name,
        source=str(source.path),
        backend=source.backend.name,
        precision=source.manifest.precision if source.manifest else "fp32",
        status=source.manifest.status if source.manifest else "unvalidated",
        triton_backend=source.serving.backend,
        triton_platform=source.serving.platform,
        payload=f"{source.name}/{VERSION}/{source.serving.model_filename}",
        config=f"{source.name}/config.pbtxt",
        max_batch_size=batching.max_batch_size,
        preferred_batch_sizes=list(batching.preferred_batch_sizes),
        max_queue_delay_us=batching.max_queue_delay_us,
        batching_source=batching.source,
        instance_kind=spec.instance_kind,
        instance_count=spec.instance_count,
        parameters={**spec.backend_parameters, **spec.metadata},
        max_queue_size=policy.max_queue_size if policy else None,
        queue_timeout_us=policy.timeout_us if policy else None,
        admission_source=policy.source if policy else "",
    )


def admission_for(
    batching: Batching,
    options: DeployOptions,
    rows: list[BenchRow] | None,
    served: ServerRow | None,
) -> Admission | None:
    """The queue policy of a dynamically batched model: from the budget and the rate a serving
    run met it at (--serving), else one execution of the largest batch a bench measured
    (--bench), else the budget alone; None for a model that takes a fixed batch."""
    if not batching.dynamic:
        return None
    largest = batching.max_batch_size
    budget, size, timeout = (
        options.latency_budget_ms,
        options.max_queue_size,
        options.queue_timeout_ms,
    )
    if served is not None and options.serving is not None and served.qps_at_budget > 0:
        return admission(
            budget,
            largest,
            rate_per_s=served.qps_at_budget,
            measured=f" served in {options.serving}",
            queue_size=size,
            timeout_ms=timeout,
        )
    fitting = [row for row in rows or [] if row.batch_size <= largest]
    if fitting:
        row = max(fitting, key=lambda r: r.batch_size)
        return admission(
            budget,
            row.batch_size,
            row.latency_ms_p50,
            measured=f" in bench {options.bench}",
            queue_size=size,
            timeout_ms=timeout,
        )
    return admission(budget, largest, queue_size=size, timeout_ms=timeout)


def config_spec(
    source: ModelSource,
    batching: Batching,
    options: DeployOptions,
    policy: Admission | None = None,
) -> ModelConfigSpec:
    """Everything config.pbtxt says: tensors, batching, where it runs, threads, trtconv's
    record; ONNX Runtime's TensorRT accelerator takes the precision of an artifact built for it."""
    manifest = source.manifest
    provider = str((manifest.device if manifest else {}).get("provider") or "")
    on_gpu = source.backend.on_gpu or provider not in ("", "CPUExecutionProvider")
    threads_key = source.serving.threads_parameter
    parameters = {threads_key: str(options.threads)} if threads_key and options.threads else {}
    accelerators: tuple[tuple[str, dict[str, str]], ...] = ()
    if manifest and source.serving.gpu_accelerator and provider.startswith("Tensorrt"):
        mode = {"fp16": "FP16", "int8": "INT8"}.get(manifest.precision, "FP32")
        accelerators = ((source.serving.gpu_accelerator, {"precision_mode": mode}),)
    return ModelConfigSpec(
        name=source.name,
        serving=source.serving,
        inputs=source.signature.inputs,
        outputs=source.signature.outputs,
        batching=batching,
        instance_kind="KIND_GPU" if on_gpu else "KIND_CPU",
        instance_count=options.instances,
        backend_parameters=parameters,
        metadata=metadata(source),
        accelerators=accelerators,
        admission=policy,
    )


def metadata(source: ModelSource) -> dict[str, str]:
    """trtconv's record as model parameters: the verdict, backend, precision and versions."""
    manifest = source.manifest
    record: dict[str, Any] = {
        "trtconv_version": __version__,
        "trtconv_backend": source.backend.name,
        "trtconv_precision": manifest.precision if manifest else "fp32",
        "trtconv_status": manifest.status if manifest else "unvalidated",
    }
    if manifest:
        versions = {k: v for k, v in manifest.tools.items() if isinstance(v, str)}
        record["trtconv_tools"] = json.dumps(versions, sort_keys=True)
        record["trtconv_created_at"] = manifest.created_at
    return {key: str(value) for key, value in record.items()}


def copy_payload(payload: Path, target: Path) -> None:
    """Copy a payload folder, or a payload file with the files it refers to under their own
    names: OpenVINO's weights (model.bin beside model.xml) and ONNX external data (files named
    after the model, model.onnx.data). Other files of the artifact (a timing cache) stay."""
    if payload.is_dir():
        shutil.copytree(payload, target)
        return
    shutil.copy2(payload, target)
    for sibling in sorted(payload.parent.iterdir()):
        weights = sibling == payload.with_suffix(".bin")
        external = sibling.name.startswith(payload.name) and sibling != payload
        if sibling.is_file() and (weights or external):
            shutil.copy2(sibling, target.parent / sibling.name)
