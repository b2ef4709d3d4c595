"""`inspect`: what a SavedModel, a trtconv artifact or an ONNX file holds.

For a SavedModel: every signature with its inputs and outputs, the op histogram of the serving
graph (nested functions included, so the ops behind StatefulPartitionedCall are counted), the
dtypes the graph computes in, size on disk and the model card. For an artifact: the manifest
summary plus the payload's own description. Each is an InspectResult of its own kind.
"""

from __future__ import annotations

import logging
import typing
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from trtconv.artifact.manifest import CalibrationRecord, read_manifest
from trtconv.core.errors import InputError
from trtconv.core.fsutil import dir_size_bytes
from trtconv.core.lazy import require
from trtconv.core.model_io import ModelSignature, TensorSpec, missing_signature
from trtconv.core.results import JsonResult, optional_key
from trtconv.model.paths import (
    is_artifact_dir,
    is_saved_model_dir,
    require_exists,
    saved_model_in,
)
from trtconv.model.savedmodel import (
    SERVING_KEY,
    check_saved_model_dir,
    is_keras_file,
    read_model_card,
    saved_model_for,
    signature_of,
)
from trtconv.model.signature_graph import revive

log = logging.getLogger(__name__)

INSPECT_SCHEMA_VERSION = 1
SAVED_MODEL, ONNX, ARTIFACT = "saved_model", "onnx", "artifact"
Inspection = TypeVar("Inspection", bound="InspectResult")


@dataclass(kw_only=True)
class InspectResult(JsonResult):
    """What `trtconv inspect` found at `path`: its `kind` and size on disk. Each kind is a
    subclass (SavedModelInspection, OnnxInspection, ArtifactInspection) adding what it holds."""

    schema_version: int = INSPECT_SCHEMA_VERSION
    kind: str = field(default="", init=False)
    path: Path
    size_bytes: int

    @classmethod
    def from_json(cls: type[Inspection], document: Mapping[str, Any]) -> Inspection:
        """The inspection a `to_json` document describes, as the subclass its `kind` names.
        Raises KeyError for an unknown kind."""
        target = KINDS[document["kind"]]
        if target is not cls:
            return typing.cast(Inspection, target.from_json(document))
        return super().from_json(document)


@dataclass(kw_only=True)
class SavedModelInspection(InspectResult):
    """A SavedModel: every signature's inputs and outputs, the model card (None without one);
    and, when it has a serving signature, that graph's op histogram and dtypes."""

    kind: str = field(default=SAVED_MODEL, init=False)
    signatures: dict[str, ModelSignature]
    model_card: dict[str, Any] | None
    serving_signature: str | None = optional_key()
    op_histogram: dict[str, int] | None = optional_key()
    op_count: int | None = optional_key()
    graph_dtypes: list[str] | None = optional_key()


@dataclass(kw_only=True)
class OnnxInspection(InspectResult):
    """An ONNX model: opsets, producer, graph inputs and outputs, op histogram, and whether it
    holds QuantizeLinear/DequantizeLinear nodes."""

    kind: str = field(default=ONNX, init=False)
    opsets: dict[str, int]
    producer: str
    inputs: list[TensorSpec]
    outputs: list[TensorSpec]
    op_histogram: dict[str, int]
    op_count: int
    quantized: bool


@dataclass(kw_only=True)
class ArtifactInspection(InspectResult):
    """A trtconv artifact: its manifest's summary, and its payload's own inspection when the
    payload is an ONNX file or a SavedModel (None otherwise: an engine, an OpenVINO IR)."""

    kind: str = field(default=ARTIFACT, init=False)
    backend: str
    precision: str
    payload: str
    status: str
    source_model: dict[str, Any]
    signature: dict[str, Any]
    calibration: CalibrationRecord | None
    conversion_seconds: float
    conversion_summary: dict[str, Any]
    created_at: str
    payload_details: InspectResult | None = optional_key()

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> ArtifactInspection:
        """The artifact inspection a `to_json` document describes, its payload's included."""
        details = document.get("payload_details")
        result = super().from_json({k: v for k, v in document.items() if k != "payload_details"})
        result.payload_details = InspectResult.from_json(details) if details else None
        return result


KINDS: dict[str, type[InspectResult]] = {
    SAVED_MODEL: SavedModelInspection,
    ONNX: OnnxInspection,
    ARTIFACT: ArtifactInspection,
}


def graph_def_of(function: Any) -> Any:
    """The GraphDef of a concrete function, its function library (nested functions) included."""
    return function.graph.as_graph_def()


def _all_nodes(graph_def: Any) -> list[Any]:
    nodes = list(graph_def.node)
    for function in graph_def.library.function:
        nodes.extend(function.node_def)
    return nodes


def op_histogram(graph_def: Any) -> dict[str, int]:
    """Op type -> count over the graph and every function in its library, most common first."""
    counts = Counter(node.op for node in _all_nodes(graph_def))
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def graph_dtypes(graph_def: Any) -> list[str]:
    """Every dtype named by a node attribute (T, dtype, SrcT, DstT, Tout...), nested functions too.

    A float32 export must not list `bfloat16` or `float16` here.
    """
    tf = require("tensorflow")
    found: set[str] = set()
    for node in _all_nodes(graph_def):
        for value in node.attr.values():
            if value.HasField("type"):
                found.add(tf.dtypes.as_dtype(value.type).name)
            elif value.HasField("list"):
                found.update(tf.dtypes.as_dtype(t).name for t in value.list.type)
    return sorted(found)


def inspect_saved_model(path: Path, signature: str | None = None) -> SavedModelInspection:
    """Signatures, serving I/O, op histogram, graph dtypes, size and model card of a SavedModel;
    the op histogram and dtypes are those of `signature` (default serving_default).

    Raises InputError when the directory is not a loadable SavedModel and UsageError when
    `signature` names a signature it does not have.
    """
    path = check_saved_model_dir(path)
    loaded = revive(path)  # through tf_keras or its signature graphs where objects fail
    signatures = {
        key: signature_of(function, key, path)
        for key, function in sorted(dict(loaded.signatures).items())
    }
    card = read_model_card(path)
    result = SavedModelInspection(
        path=path,
        size_bytes=dir_size_bytes(path),
        signatures=signatures,
        model_card=card.document if card is not None else None,  # shown whole, as written
    )
    key = signature or SERVING_KEY
    if signature is not None and signature not in signatures:
        raise missing_signature(path, signature, list(signatures))
    if key in signatures:
        graph_def = graph_def_of(loaded.signatures[key])
        result.serving_signature = key
        result.op_histogram = op_histogram(graph_def)
        result.op_count = sum(result.op_histogram.values())
        result.graph_dtypes = graph_dtypes(graph_def)
    else:
        log.warning(
            "%s has no '%s' signature: no op histogram (choose one with --signature).", path, key
        )
    return result


def _onnx_nodes(graph: Any) -> list[Any]:
    """Nodes of an ONNX graph and of the subgraphs inside If/Loop/Scan attributes."""
    nodes = []
    for node in graph.node:
        nodes.append(node)
        for attribute in node.attribute:
            if attribute.HasField("g"):
                nodes.extend(_onnx_nodes(attribute.g))
            for subgraph in attribute.graphs:
                nodes.extend(_onnx_nodes(subgraph))
    return nodes


def _onnx_tensor(value: Any, onnx: Any) -> TensorSpec:
    tensor = value.type.tensor_type
    shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
    return TensorSpec(value.name, shape, dtype)


def inspect_onnx(path: Path) -> OnnxInspection:
    """Opsets, inputs/outputs, op histogram and size of an ONNX model.

    Raises InputError when the file is not a readable ONNX model.
    """
    onnx = require("onnx")
    path = Path(path)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # DecodeError and friends: all mean "not an ONNX model"
        raise InputError(f"{path} is not a readable ONNX model ({type(exc).__name__}).") from exc
    initializers = {init.name for init in model.graph.initializer}
    counts = Counter(node.op_type for node in _onnx_nodes(model.graph))
    histogram = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return OnnxInspection(
        path=path,
        size_bytes=dir_size_bytes(path),
        opsets={op.domain or "ai.onnx": op.version for op in model.opset_import},
        producer=f"{model.producer_name} {model.producer_version}".strip(),
        inputs=[_onnx_tensor(v, onnx) for v in model.graph.input if v.name not in initializers],
        outputs=[_onnx_tensor(v, onnx) for v in model.graph.output],
        op_histogram=histogram,
        op_count=sum(histogram.values()),
        quantized=any(op in histogram for op in ("QuantizeLinear", "DequantizeLinear")),
    )


def inspect_artifact(path: Path) -> ArtifactInspection:
    """The manifest summary of a trtconv artifact, and its payload's description when readable."""
    manifest = read_manifest(path)
    payload = Path(path) / manifest.payload
    details: InspectResult | None = None
    if payload.suffix == ".onnx":
        details = inspect_onnx(payload)
    elif is_saved_model_dir(payload):
        details = inspect_saved_model(payload, manifest.model_signature.name)
    return ArtifactInspection(
        path=Path(path),
        size_bytes=dir_size_bytes(path),
        backend=manifest.backend,
        precision=manifest.precision,
        payload=manifest.payload,
        status=manifest.status,
        source_model=manifest.source_model,
        signature=manifest.signature,
        calibration=manifest.calibration,
        conversion_seconds=manifest.conversion_seconds,
        conversion_summary=manifest.conversion_summary,
        created_at=manifest.created_at,
        payload_details=details,
    )


def inspect_keras_file(
    path: Path, signature: str | None = None, custom_objects: Sequence[str] = ()
) -> SavedModelInspection:
    """A Keras file described as the SavedModel exported from it (its serving signature and
    graph; `custom_objects`: MODULE:NAME classes it needs), with the file's own path and size."""
    with saved_model_for(path, custom_objects) as saved_model:
        inspection = inspect_saved_model(saved_model, signature)
    inspection.path = path
    inspection.size_bytes = path.stat().st_size
    return inspection


def inspect_path(
    path: Path, signature: str | None = None, custom_objects: Sequence[str] = ()
) -> InspectResult:
    """Describe a trtconv artifact directory, a SavedModel directory (the op histogram of
    `signature`, default serving_default), a Keras file (as the SavedModel Keras exports from
    it, which is what convert converts) or an `.onnx` file.

    Raises UsageError when `path` does not exist or lacks `signature`, and InputError when it is
    none of those.
    """
    path = require_exists(Path(path))
    if is_artifact_dir(path):
        return inspect_artifact(path)
    if path.is_file() and path.suffix == ".onnx":
        return inspect_onnx(path)
    if is_keras_file(path):
        return inspect_keras_file(path, signature, custom_objects)
    path = saved_model_in(path)  # a `trtconv train` output names the SavedModel inside it
    if is_saved_model_dir(path):
        return inspect_saved_model(path, signature)
    raise InputError(
        f"{path} is not a SavedModel (saved_model.pb), a trtconv artifact (manifest.json), a "
        "Keras file (.keras, .h5, .hdf5) or an .onnx file."
    )
