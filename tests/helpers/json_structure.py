"""The key structure of a JSON document, and the rule that says whether two structures agree.

A structure keeps a document's keys and nesting and forgets its values:

- a dict maps each key to the structure of its value;
- a list becomes `[S]`, S the MERGED structure of its elements (dicts: the union of their keys;
  scalars: the union of their types), or `[]` when the list is empty;
- a scalar becomes its JSON type name: "str", "number", "bool" or "null" ("bool|number" when a
  list holds both, e.g. the release gates' `threshold`);
- a dict whose keys are data, not schema (output names, library names, ONNX op types, ...) at
  a path in DATA_KEYED becomes `{"*": S}`, S the merged structure of its values (`{}` if empty);
- a dict at a path in KEYS_ONLY (a description of the machine) keeps its keys, each value "any".

Paths name a place in a document: dict keys joined by ".", "[]" for "every element of this
list", "*" for "every value of this data-keyed dict", e.g. `validation.outputs.*.role`.

`compare(golden, actual)` lists what differs, under these rules:

- "null" agrees with every scalar type: an optional figure is null on one run and a number on
  another (`accuracy`, `threshold`, a library's version), so a null never makes the test flaky;
  other scalar types agree when one's set of types holds the other's ("number" vs
  "bool|number"); "number" vs "str" is a change. A null never stands in for a dict or a list.
- an empty list `[]` agrees with any list, and an empty data-keyed dict with any data-keyed dict:
  nothing in them shows what their elements would hold (`warnings`, `unjudged`, `tolerances`).
- "any" agrees with anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

Structure = Any  # dict[str, Structure] | list[Structure] | str (recursive JSON)

ANY = "any"
MAP = "*"
NULL = "null"

# Dicts whose keys are data: comparing their keys would compare the model or the machine.
# Glob patterns over whole paths; "*" matches any run of characters, dots included.
DATA_KEYED: tuple[str, ...] = (
    "outputs",  # validate: output name -> that output's report
    "*validation.outputs",  # convert, release: the same, inside each validation
    "targets[].eval.outputs",  # release: the same, for the evaluation on labelled data
    "*.roles",  # output name -> role (manifest judging, release config)
    "*.tolerances",  # output name -> tolerance (same places)
    "*.input_stats",  # calibration: input name -> mean/std/min/max
    "*.onnx_export.check.max_abs_error",  # output name -> error of the ONNX export
    "*.op_counts",  # ONNX op type -> count: depends on the model and the ORT version
    "*.tools",  # library name -> version (which libraries is the build's business)
    "*.signature.extra",  # free-form extras of a signature
    "*.provider_options[]",  # ONNX Runtime option name -> value, per execution provider
    "timings",  # release: step name (convert-<target id>, ...) -> seconds
)

# Dicts that describe this machine: only their keys are compared (CPU feature flags, GPUs and
# library names differ between machines; a GPU provider adds `gpu` to a manifest's device).
KEYS_ONLY: tuple[str, ...] = (
    "environment",  # bench, release: python, platform, cpu, gpus, libraries, commit
    "bench.environment",  # release: the bench document inside it
    "*manifest.device",  # where the artifact was built: provider, cpu
)


def _matches(path: str, patterns: tuple[str, ...]) -> bool:
    """True when `path` matches one of the glob `patterns` (only "*" is special)."""
    return any(
        re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), path) for pattern in patterns
    )


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def key_structure(doc: Any, path: str = "") -> Structure:
    """The key structure of the JSON value `doc` found at `path` (module docstring).

    Returns a dict, a list or a type name. Raises ValueError when a list mixes elements that
    cannot merge (a dict with a list or with a non-null scalar).
    """
    if isinstance(doc, dict):
        if _matches(path, KEYS_ONLY):
            return {key: ANY for key in doc}
        if _matches(path, DATA_KEYED):
            values = [key_structure(v, _child(path, MAP)) for v in doc.values()]
            return {MAP: _merge_all(values, _child(path, MAP))} if values else {}
        return {key: key_structure(value, _child(path, key)) for key, value in doc.items()}
    if isinstance(doc, list):
        elements = [key_structure(e, f"{path}[]") for e in doc]
        return [_merge_all(elements, f"{path}[]")] if elements else []
    return _scalar_type(doc)


def _scalar_type(value: Any) -> str:
    """The JSON type name of a scalar ("bool" first: Python's bool is an int)."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "str"
    raise ValueError(f"not a JSON value: {value!r}")


def _merge_all(structures: list[Structure], path: str) -> Structure:
    merged = structures[0]
    for other in structures[1:]:
        merged = merge(merged, other, path)
    return merged


def merge(a: Structure, b: Structure, path: str = "") -> Structure:
    """One structure for two elements of the same list (union of keys and of scalar types).

    Returns the merged structure. Raises ValueError when the two cannot merge.
    """
    if a == b:
        return a
    if ANY in (a, b):
        return ANY
    if isinstance(a, dict) and isinstance(b, dict):
        keys = list(a) + [k for k in b if k not in a]
        return {
            k: merge(a[k], b[k], _child(path, k)) if k in a and k in b else a.get(k, b.get(k))
            for k in keys
        }
    if isinstance(a, list) and isinstance(b, list):
        if not (a and b):  # one list was empty: the other's elements are all there is
            return a or b
        return [merge(a[0], b[0], f"{path}[]")]
    if isinstance(a, str) and isinstance(b, str):
        types = (set(a.split("|")) | set(b.split("|"))) - {NULL}
        return "|".join(sorted(types)) or NULL
    if NULL in (a, b):  # an optional block: null in one element, filled in another
        return b if a == NULL else a
    raise ValueError(f"{path or '<root>'}: cannot merge {_kind(a)} with {_kind(b)}")


def _kind(structure: Structure) -> str:
    if isinstance(structure, dict):
        return "object"
    if isinstance(structure, list):
        return "list"
    return str(structure)


@dataclass
class Difference:
    """What an actual structure lacks, adds or changes against its golden structure."""

    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.missing or self.extra or self.changed)

    def describe(self) -> str:
        """One line per differing path: `missing: a.b`, `extra: a.c`, `changed: a.d: x -> y`."""
        lines = [f"missing: {p}" for p in self.missing]
        lines += [f"extra:   {p}" for p in self.extra]
        lines += [f"changed: {p}" for p in self.changed]
        return "\n".join(lines)


def compare(golden: Structure, actual: Structure) -> Difference:
    """The paths where `actual` breaks `golden` under the rules of the module docstring.

    Returns an empty (falsy) Difference when the two agree.
    """
    difference = Difference()
    _compare(golden, actual, "", difference)
    return difference


def _compare(golden: Structure, actual: Structure, path: str, out: Difference) -> None:
    if ANY in (golden, actual):
        return
    if isinstance(golden, dict) and isinstance(actual, dict):
        # A data-keyed dict's "*" is absent when it was empty: nothing to compare then.
        out.missing += [_child(path, k) for k in golden if k not in actual and k != MAP]
        out.extra += [_child(path, k) for k in actual if k not in golden and k != MAP]
        for key in golden:
            if key in actual:
                _compare(golden[key], actual[key], _child(path, key), out)
    elif isinstance(golden, list) and isinstance(actual, list):
        if golden and actual:
            _compare(golden[0], actual[0], f"{path}[]", out)
    elif isinstance(golden, str) and isinstance(actual, str):
        if not _scalars_agree(golden, actual):
            out.changed.append(f"{path or '<root>'}: {golden} -> {actual}")
    else:
        out.changed.append(f"{path or '<root>'}: {_kind(golden)} -> {_kind(actual)}")


def _scalars_agree(golden: str, actual: str) -> bool:
    """True when two scalar type names agree: null fits any; otherwise one set holds the other."""
    a, b = set(golden.split("|")) - {NULL}, set(actual.split("|")) - {NULL}
    return not a or not b or a <= b or b <= a
