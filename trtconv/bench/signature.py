"""Read a SavedModel's serving signature from saved_model.pb without importing TensorFlow.

The bench parent process only needs input and output names, shapes and dtypes to check options
and data before it spawns workers; importing TensorFlow for that costs ~4 s and a few hundred MB
in a process that then only waits. The signature is a few nested protobuf messages, so this
module walks the protobuf wire format for exactly the fields below (field numbers from
tensorflow/core/protobuf/{saved_model,meta_graph}.proto and framework/tensor_shape.proto) and
skips everything else (the graph, which is most of the file) by length.

    SavedModel.meta_graphs = 2 -> MetaGraphDef.signature_def = 5 (map<string, SignatureDef>)
    SignatureDef.inputs = 1, .outputs = 2 (map<string, TensorInfo>)
    TensorInfo.dtype = 2 (DataType enum), .tensor_shape = 3
    TensorShapeProto.dim = 2, .unknown_rank = 3; Dim.size = 1 (int64, -1 = unknown)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from trtconv.errors import InputError
from trtconv.model_io import ModelSignature, TensorSpec, unknown_rank

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

Field = tuple[int, int, "int | bytes"]  # (field number, wire type, value)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> Iterator[Field]:
    """The top-level fields of one serialized message. Raises ValueError on malformed input."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = int.from_bytes(data[pos : pos + 8], "little"), pos + 8
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 5:
            value, pos = int.from_bytes(data[pos : pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if pos > end:
            raise ValueError("truncated message")
        yield number, wire, value


def _messages(data: bytes, number: int) -> list[bytes]:
    return [v for n, w, v in fields(data) if n == number and w == 2 and isinstance(v, bytes)]


def _map_entries(data: bytes, number: int) -> dict[str, bytes]:
    """A map<string, Message> field: entries are messages with key = 1, value = 2."""
    entries = {}
    for entry in _messages(data, number):
        key = b"".join(_messages(entry, 1)).decode()
        value = b"".join(_messages(entry, 2))
        entries[key] = value
    return entries


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _tensor_spec(name: str, info: bytes, kind: str, model: Path) -> TensorSpec:
    dtype_code = next((v for n, w, v in fields(info) if n == 2 and w == 0), 0)
    assert isinstance(dtype_code, int)
    dims: list[int | None] = []
    for shape in _messages(info, 3):
        if any(n == 3 and w == 0 and v for n, w, v in fields(shape)):  # unknown_rank = true
            raise unknown_rank(model, kind, name)
        for dim in _messages(shape, 2):
            size = next((v for n, w, v in fields(dim) if n == 1 and w == 0), 0)
            assert isinstance(size, int)
            dims.append(None if _int64(size) < 0 else _int64(size))
    return TensorSpec(name, tuple(dims), DTYPES.get(dtype_code, f"dtype{dtype_code}"))


def read_signature(path: Path, key: str = "serving_default") -> ModelSignature:
    """The `key` signature of the SavedModel directory `path` (inputs and outputs sorted by name).

    Raises InputError when saved_model.pb cannot be parsed, has no such signature or declares a
    tensor of unknown rank.
    """
    pb = Path(path) / "saved_model.pb"
    try:
        data = pb.read_bytes()
        meta_graphs = _messages(data, 2)
        signatures = _map_entries(meta_graphs[0], 5) if meta_graphs else {}
    except (OSError, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise InputError(f"SavedModel {path} could not be read ({pb}: {exc}).") from exc
    if key not in signatures:
        # TF adds an internal `__saved_model_init_op`; users only ever ask for their own names.
        found = ", ".join(sorted(k for k in signatures if not k.startswith("__"))) or "none"
        raise InputError(f"SavedModel {path} has no '{key}' signature (found: {found}).")
    signature = signatures[key]
    inputs = _map_entries(signature, 1)
    outputs = _map_entries(signature, 2)
    return ModelSignature(
        inputs=tuple(_tensor_spec(name, inputs[name], "input", path) for name in sorted(inputs)),
        outputs=tuple(
            _tensor_spec(name, outputs[name], "output", path) for name in sorted(outputs)
        ),
        name=key,
    )
