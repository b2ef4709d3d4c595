"""`inspect`: what a SavedModel, a trtconv artifact or an ONNX file holds.

For a SavedModel: every signature with its inputs and outputs, the op histogram of the serving
graph (nested functions included, so the ops behind StatefulPartitionedCall are counted), the
dtypes the graph computes in, size on disk and the model card. For an artifact: the manifest
summary plus the payload's own description.
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from trtconv.core.errors import InputError
from trtconv.core.fsutil import dir_size_bytes
from trtconv.core.lazy import require
from trtconv.manifest import read_manifest
from trtconv.model_paths import (
    is_artifact_dir,
    is_saved_model_dir,
    require_exists,
    saved_model_in,
)
from trtconv.savedmodel import SERVING_KEY, check_saved_model_dir, read_model_card, signature_of

log = logging.getLogger(__name__)

INSPECT_SCHEMA_VERSION = 1


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


def inspect_saved_model(path: Path) -> dict[str, Any]:
    """Signatures, serving I/O, op histogram, graph dtypes, size and model card of a SavedModel.

    Raises InputError when the directory is not a loadable SavedModel.
    """
    path = check_saved_model_dir(path)
    tf = require("tensorflow")
    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as exc:  # corrupt protobufs and missing variables surface as many types
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputError(f"SavedModel {path} could not be loaded: {first[:200]}") from exc
    signatures = {
        key: signature_of(function, key, path).to_dict()
        for key, function in sorted(dict(loaded.signatures).items())
    }
    result: dict[str, Any] = {
        "schema_version": INSPECT_SCHEMA_VERSION,
        "kind": "saved_model",
        "path": str(path),
        "size_bytes": dir_size_bytes(path),
        "signatures": signatures,
        "model_card": read_model_card(path),
    }
    if SERVING_KEY in signatures:
        graph_def = graph_def_of(loaded.signatures[SERVING_KEY])
        histogram = op_histogram(graph_def)
        result.update(
            serving_signature=SERVING_KEY,
            op_histogram=histogram,
            op_count=sum(histogram.values()),
            graph_dtypes=graph_dtypes(graph_def),
        )
    else:
        log.warning("%s has no '%s' signature: no op histogram.", path, SERVING_KEY)
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


def _onnx_tensor(value: Any, onnx: Any) -> dict[str, Any]:
    tensor = value.type.tensor_type
    shape = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
    return {"name": value.name, "shape": shape, "dtype": dtype}


def inspect_onnx(path: Path) -> dict[str, Any]:
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
    return {
        "schema_version": INSPECT_SCHEMA_VERSION,
        "kind": "onnx",
        "path": str(path),
        "size_bytes": dir_size_bytes(path),
        "opsets": {op.domain or "ai.onnx": op.version for op in model.opset_import},
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "inputs": [_onnx_tensor(v, onnx) for v in model.graph.input if v.name not in initializers],
        "outputs": [_onnx_tensor(v, onnx) for v in model.graph.output],
        "op_histogram": histogram,
        "op_count": sum(histogram.values()),
        "quantized": any(op in histogram for op in ("QuantizeLinear", "DequantizeLinear")),
    }


def inspect_artifact(path: Path) -> dict[str, Any]:
    """The manifest summary of a trtconv artifact, and its payload's description when readable."""
    manifest = read_manifest(path)
    payload = Path(path) / manifest.payload
    result: dict[str, Any] = {
        "schema_version": INSPECT_SCHEMA_VERSION,
        "kind": "artifact",
        "path": str(path),
        "size_bytes": dir_size_bytes(path),
        "backend": manifest.backend,
        "precision": manifest.precision,
        "payload": manifest.payload,
        "status": manifest.status,
        "source_model": manifest.source_model,
        "signature": manifest.signature,
        "calibration": manifest.calibration,
        "conversion_seconds": manifest.conversion_seconds,
        "conversion_summary": manifest.conversion_summary,
        "created_at": manifest.created_at,
    }
    if payload.suffix == ".onnx":
        result["payload_details"] = inspect_onnx(payload)
    elif is_saved_model_dir(payload):
        result["payload_details"] = inspect_saved_model(payload)
    return result


def inspect_path(path: Path) -> dict[str, Any]:
    """Describe a trtconv artifact directory, a SavedModel directory or an `.onnx` file.

    Raises UsageError when `path` does not exist and InputError when it is none of those.
    """
    path = require_exists(Path(path))
    if is_artifact_dir(path):
        return inspect_artifact(path)
    if path.is_file() and path.suffix == ".onnx":
        return inspect_onnx(path)
    path = saved_model_in(path)  # a `trtconv train` output names the SavedModel inside it
    if is_saved_model_dir(path):
        return inspect_saved_model(path)
    raise InputError(
        f"{path} is not a SavedModel (saved_model.pb), a trtconv artifact (manifest.json) or "
        "an .onnx file."
    )
