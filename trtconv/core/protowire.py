"""Just enough of the protobuf wire format to read a few fields of saved_model.pb without
TensorFlow (its protobuf classes import all of it: ~4 s and a few hundred MB).

A message is a sequence of (field number, wire type, value); length-delimited values (wire type
2) are sub-messages, strings or packed arrays, and everything not asked for is skipped by length.
"""

from __future__ import annotations

from collections.abc import Iterator

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


def messages(data: bytes, number: int) -> list[bytes]:
    """Every length-delimited value of field `number` (sub-messages, strings)."""
    return [v for n, w, v in fields(data) if n == number and w == 2 and isinstance(v, bytes)]


def string(data: bytes, number: int) -> str:
    """The string field `number` ("" when absent)."""
    return b"".join(messages(data, number)).decode()


def map_entries(data: bytes, number: int) -> dict[str, bytes]:
    """A map<string, Message|string> field: entries are messages with key = 1, value = 2."""
    entries = {}
    for entry in messages(data, number):
        key = b"".join(messages(entry, 1)).decode()
        value = b"".join(messages(entry, 2))
        entries[key] = value
    return entries


def int64(value: int) -> int:
    """A varint read as a signed int64 (two's complement)."""
    return value - (1 << 64) if value >= 1 << 63 else value
