"""Results as types that serialise themselves (after Polygraphy's `comparator/struct.py`).

A result is a dataclass that subclasses `JsonResult`: `to_json()` gives the JSON document users
and scripts read (the field names are its keys), `from_json()` loads such a document back as the
same type, so a saved result is never read back as a bare dict. Fields holding other dataclasses,
enums, paths, tuples and dicts are converted both ways by their type hints.

A field declared with `optional_key()` is left out of the document while it is None: a key some
documents carry only sometimes (`tournament` after `convert --backend best`) stays that way.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T", bound="JsonResult")
_OMIT_NONE = "trtconv.omit_none"


def optional_key(default: Any = None) -> Any:
    """A dataclass field whose key is absent from the JSON document while its value is None."""
    return dataclasses.field(default=default, metadata={_OMIT_NONE: True})


class JsonResult:
    """Mixin for result dataclasses: `to_json`, `from_json`, `save` and `load`."""

    def to_json(self) -> dict[str, Any]:
        """This result as a JSON-ready dict (keys are the field names)."""
        document: dict[str, Any] = {}
        for spec in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, spec.name)
            if value is None and spec.metadata.get(_OMIT_NONE):
                continue
            document[spec.name] = to_jsonable(value)
        return document

    @classmethod
    def from_json(cls: type[T], document: Mapping[str, Any]) -> T:
        """The result a `to_json` document describes. Keys the type does not declare are
        ignored (documents written by a newer trtconv); missing ones take their defaults."""
        return typing.cast(T, _decode_dataclass(cls, document))

    def save(self, path: Path) -> None:
        """Write `to_json()` to `path` (indented JSON)."""
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def load(cls: type[T], path: Path) -> T:
        """The result saved at `path`."""
        return cls.from_json(json.loads(Path(path).read_text()))


def to_jsonable(value: Any) -> Any:
    """`value` with dataclasses, enums, paths, tuples and numpy scalars turned into JSON types."""
    if isinstance(value, JsonResult):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_jsonable(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if not (getattr(value, f.name) is None and f.metadata.get(_OMIT_NONE))
        }
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    return value


def _decode_dataclass(cls: type, document: Mapping[str, Any]) -> Any:
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    values = {name: _decode(hints[name], document[name]) for name in known if name in document}
    return cls(**values)


def _decode(hint: Any, value: Any) -> Any:
    """`value` (from JSON) as the type `hint` describes."""
    if value is None or hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return _decode(options[0], value) if len(options) == 1 else value
    if isinstance(hint, type) and issubclass(hint, JsonResult):
        return hint.from_json(value)  # a result type may read its document its own way
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _decode_dataclass(hint, value)
    if isinstance(hint, type) and issubclass(hint, (enum.Enum, Path)):
        return hint(value)
    args = typing.get_args(hint)
    if origin in (list, tuple) and args:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return tuple(_decode(arg, item) for arg, item in zip(args, value, strict=True))
        return origin(_decode(args[0], item) for item in value)
    if origin in (dict, Mapping) and len(args) == 2:
        return {key: _decode(args[1], item) for key, item in value.items()}
    return value
