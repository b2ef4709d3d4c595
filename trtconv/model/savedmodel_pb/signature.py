"""Read a SavedModel's serving signature from saved_model.pb without importing TensorFlow.

The bench parent process only needs input and output names, shapes and dtypes to check options
and data before it spawns workers; importing TensorFlow for that costs ~4 s and a few hundred MB
in a process that then only waits. The signature is a few nested protobuf messages, so this
module walks the protobuf wire format (trtconv.core.protowire) for exactly the fields below (field
numbers from tensorflow/core/protobuf/{saved_model,meta_graph}.proto and
framework/tensor_shape.proto) and skips everything else (the graph, most of the file) by length.

    SavedModel.meta_graphs = 2 -> MetaGraphDef.signature_def = 5 (map<string, SignatureDef>)
    SignatureDef.inputs = 1, .outputs = 2 (map<string, TensorInfo>)
    TensorInfo.dtype = 2 (DataType enum), .tensor_shape = 3
    TensorShapeProto.dim = 2, .unknown_rank = 3; Dim.size = 1 (int64, -1 = unknown)
"""

from __future__ import annotations

from pathlib import Path

from trtconv.core.errors import InputError
from trtconv.core.model_io import ModelSignature, TensorSpec, missing_signature, unknown_rank
from trtconv.core.protowire import fields, int64, map_entries, messages
from trtconv.model.savedmodel import SERVING_KEY

# tensorflow/core/framework/types.proto DataType -> numpy dtype name.
DTYPES = {
    1: "float32",
    2: "float64",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    9: "int64",
    10: "bool",
    14: "bfloat16",
    17: "uint16",
    19: "float16",
    22: "uint32",
    23: "uint64",
}


def _tensor_spec(name: str, info: bytes, kind: str, model: Path) -> TensorSpec:
    dtype_code = next((v for n, w, v in fields(info) if n == 2 and w == 0), 0)
    assert isinstance(dtype_code, int)
    dims: list[int | None] = []
    for shape in messages(info, 3):
        if any(n == 3 and w == 0 and v for n, w, v in fields(shape)):  # unknown_rank = true
            raise unknown_rank(model, kind, name)
        for dim in messages(shape, 2):
            size = next((v for n, w, v in fields(dim) if n == 1 and w == 0), 0)
            assert isinstance(size, int)
            dims.append(None if int64(size) < 0 else int64(size))
    return TensorSpec(name, tuple(dims), DTYPES.get(dtype_code, f"dtype{dtype_code}"))


def read_signature(path: Path, key: str = SERVING_KEY) -> ModelSignature:
    """The `key` signature of the SavedModel directory `path` (inputs and outputs sorted by name).

    Raises InputError when saved_model.pb cannot be parsed or declares a tensor of unknown rank,
    and UsageError (exit 2) when it has no such signature, naming those it has.
    """
    pb = Path(path) / "saved_model.pb"
    try:
        data = pb.read_bytes()
        meta_graphs = messages(data, 2)
        signatures = map_entries(meta_graphs[0], 5) if meta_graphs else {}
    except (OSError, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise InputError(f"SavedModel {path} could not be read ({pb}: {exc}).") from exc
    if key not in signatures:
        # TF adds an internal `__saved_model_init_op`; users only ever ask for their own names.
        raise missing_signature(path, key, [k for k in signatures if not k.startswith("__")])
    signature = signatures[key]
    inputs = map_entries(signature, 1)
    outputs = map_entries(signature, 2)
    return ModelSignature(
        inputs=tuple(_tensor_spec(name, inputs[name], "input", path) for name in sorted(inputs)),
        outputs=tuple(
            _tensor_spec(name, outputs[name], "output", path) for name in sorted(outputs)
        ),
        name=key,
    )
