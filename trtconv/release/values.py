"""The release config's value checks: each takes (key path, raw TOML value) and returns the
clean value, or raises a UsageError that starts with the key path, e.g.
`bench.batch_sizes[1]: expected a positive integer, found "8"`."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from trtconv.backends.registry import backend_choices
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import parse_role

Validator = Callable[[str, Any], Any]
T = TypeVar("T")


def _found(value: Any) -> str:
    """How a wrong value is quoted back: TOML-like (strings in double quotes, true/false)."""
    return json.dumps(value, default=str)


def fail(path: str, expected: str, value: Any) -> UsageError:
    """The error for `value` at `path`, which should have been `expected`."""
    return UsageError(f"{path}: expected {expected}, found {_found(value)}.")


def _is_number(value: Any) -> bool:
    # bool is an int subclass in Python; in TOML `true` is never a number.
    return isinstance(value, int | float) and not isinstance(value, bool)


def positive_int(path: str, value: Any) -> int:
    """`value` if it is an integer above 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise fail(path, "a positive integer", value)
    return value


def non_negative_int(path: str, value: Any) -> int:
    """`value` if it is an integer of at least 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(path, "a non-negative integer", value)
    return value


def number(path: str, value: Any) -> float:
    """`value` as a float if it is an integer or a float."""
    if not _is_number(value):
        raise fail(path, "a number", value)
    return float(value)


def positive_number(path: str, value: Any) -> float:
    """`value` as a float if it is a number above 0."""
    if not _is_number(value) or value <= 0:
        raise fail(path, "a positive number", value)
    return float(value)


def non_negative_number(path: str, value: Any) -> float:
    """`value` as a float if it is a number of at least 0."""
    if not _is_number(value) or value < 0:
        raise fail(path, "a non-negative number", value)
    return float(value)


def fraction(path: str, value: Any) -> float:
    """`value` as a float if it is a number from 0 to 1."""
    if not _is_number(value) or not 0 <= value <= 1:
        raise fail(path, "a number between 0 and 1", value)
    return float(value)


def share(path: str, value: Any) -> float:
    """`value` as a float if it is a share of samples: above 0, at most 1."""
    if not _is_number(value) or not 0 < value <= 1:
        raise fail(path, "a number above 0 and at most 1", value)
    return float(value)


def level(path: str, value: Any) -> float:
    """`value` as a float if it is a confidence level: 0 (point decisions) up to, not
    including, 1."""
    if not _is_number(value) or not 0 <= value < 1:
        raise fail(path, "0 (point decisions) or a level below 1, e.g. 0.95", value)
    return float(value)


def boolean(path: str, value: Any) -> bool:
    """`value` if it is true or false."""
    if not isinstance(value, bool):
        raise fail(path, "true or false", value)
    return value


def flag_or_number(path: str, value: Any) -> bool | int | float:
    """`value` if it is true, false or a number (an input's fixed value, as --input-value)."""
    if not isinstance(value, bool) and not _is_number(value):
        raise fail(path, "true, false or a number", value)
    return value


def string(path: str, value: Any) -> str:
    """`value` if it is a string with something besides blanks."""
    if not isinstance(value, str) or not value.strip():
        raise fail(path, "a non-empty string", value)
    return value


def choice(*options: str) -> Validator:
    """A check that the value is one of `options`."""

    def check(path: str, value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise fail(path, "one of " + ", ".join(f'"{o}"' for o in options), value)
        return value

    return check


def list_of(item: Validator) -> Validator:
    """A check that the value is a non-empty array whose items pass `item` (gives a tuple)."""

    def check(path: str, value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list) or not value:
            raise fail(path, "a non-empty array", value)
        return tuple(item(f"{path}[{index}]", element) for index, element in enumerate(value))

    return check


def table_of(value: Validator) -> Validator:
    """An inline table keyed by the user's names (output names), each value checked."""

    def check(path: str, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise fail(path, "a table of output names", raw)
        return {str(key): value(f"{path}.{key}", item) for key, item in raw.items()}

    return check


def role(path: str, value: Any) -> str:
    """An output role: classes, binary (or binary:THRESHOLD), class_map (or
    class_map:mask=INPUT), embedding (or embedding:COSINE, embedding:mask=INPUT), regression (or
    regression:where=SCORE) or tensor."""
    text = string(path, value)
    parse_role(text, path, "release config")
    return text


def numbers(path: str, value: Any) -> tuple[float, ...]:
    """One number, or an array of numbers (one per channel)."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(_is_number(item) for item in items):
        raise fail(path, "a number or an array of numbers", value)
    return tuple(float(item) for item in items)


def backend_choice(path: str, value: Any) -> str:
    """A registered converter's name, or "auto" (the registry decides what is known)."""
    return str(choice(*backend_choices())(path, value))


def unknown_key(path: str, key: str, known: Mapping[str, Any] | tuple[str, ...]) -> UsageError:
    """The error for a key that is not one of `known`, suggesting the closest one."""
    close = difflib.get_close_matches(key, known, n=1)
    hint = f'did you mean "{close[0]}"? ' if close else ""
    where = f"{path}.{key}" if path else key
    return UsageError(f"{where}: unknown key ({hint}known keys: {', '.join(known)}).")


def table(path: str, raw: Any, fields: Mapping[str, Validator], kind: Callable[..., T]) -> T:
    """A TOML table as the settings `kind` builds from its checked values: it is a table, has
    no unknown keys, and each value passes its check."""
    if not isinstance(raw, dict):
        raise fail(path, "a table", raw)
    for key in raw:
        if key not in fields:
            raise unknown_key(path, key, fields)
    return kind(**{key: fields[key](f"{path}.{key}", value) for key, value in raw.items()})
