"""Extract the Python names a TensorRT release binds, from its pybind11 sources.

    python tests/standins/extract_names.py GIT_DIR REF > tests/standins/names/tensorrt-X.Y.json

GIT_DIR is a clone of NVIDIA/TensorRT, REF a branch or commit (`release/10.16`, `main`). The
result lists, per class and per enum, the attribute names and the keyword names of each method's
parameters (`"name"_a`), plus the module-level names (`m.def`, `m.attr`, and those the wheel's
`tensorrt/__init__.py` adds). The strict stand-ins in this folder are checked against it.

Reads the sources with `git show`; a small scanner that knows C++ strings, comments and brackets
is enough for the regular shape of these bindings (`py::class_<T>(m, "Name").def("x", ..., "a"_a)`).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

SOURCES = (
    "python/src/infer/pyFoundationalTypes.cpp",
    "python/src/infer/pyGraph.cpp",
    "python/src/infer/pyCore.cpp",
    "python/src/infer/pyPlugin.cpp",
    "python/src/parsers/pyOnnx.cpp",
)
INIT = "python/packaging/bindings_wheel/tensorrt/__init__.py"
MEMBER = re.compile(
    r"\.\s*(def|def_static|def_property|def_property_readonly|def_readwrite|def_readonly|"
    r"def_property_readonly_static|value)\s*\(\s*\"([A-Za-z_][A-Za-z0-9_]*)\""
)
DECLARATION = re.compile(r"py::(class_|enum_)\s*<")
ARGUMENT = re.compile(r"\"([A-Za-z_][A-Za-z0-9_]*)\"_a")
MODULE_MEMBER = re.compile(r"\bm\s*\.\s*(def|attr)\s*\(\s*\"([A-Za-z_][A-Za-z0-9_]*)\"")
ENUMERATOR = re.compile(r"((?:\w+::)+k\w+)")
ENUM_BODY = re.compile(r"enum\s+class\s+(\w+)\s*(?::\s*[\w:]+)?\s*\{(.*?)\};", re.S)
HEADERS = (
    "include/NvOnnxParser.h",
    "include/NvInfer.h",
    "include/NvInferRuntime.h",
    "include/NvInferRuntimeBase.h",
    "include/NvInferRuntimeCommon.h",
    "include/NvInferRuntimePlugin.h",
    "include/NvInferPluginBase.h",
    "include/NvInferLegacyDims.h",
)
OPEN, CLOSE = "([{", ")]}"


def git_show(git_dir: str, ref: str, path: str) -> str:
    done = subprocess.run(
        ["git", "-C", git_dir, "show", f"{ref}:{path}"], capture_output=True, text=True
    )
    return done.stdout if done.returncode == 0 else ""


def blank_comments(text: str) -> str:
    """Comments replaced by spaces (same length); string literals kept."""
    out, i = list(text), 0
    while i < len(text):
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            out[i:end] = " " * (end - i)
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i) + 2
            out[i:end] = " " * (end - i)
            i = end
        elif text[i] == '"':
            i = skip_string(text, i)
        elif text[i] == "'":
            i = text.find("'", i + 2 if text[i + 1] == "\\" else i + 1) + 1
        else:
            i += 1
    return "".join(out)


def skip_string(text: str, i: int) -> int:
    """Index after the string literal starting at text[i] == '"'."""
    i += 1
    while text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def bracket_walk(text: str, start: int) -> Iterator[tuple[int, str, int]]:
    """(index, character, bracket depth after it) of each character from `start` that is not
    inside a string literal."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = skip_string(text, i)
            continue
        depth += (ch in OPEN) - (ch in CLOSE)
        yield i, ch, depth
        i += 1


def statement_end(text: str, start: int) -> int:
    """Index of the ';' that ends the statement starting at `start` (brackets balanced)."""
    for i, ch, depth in bracket_walk(text, start):
        if ch == ";" and depth == 0:
            return i
    return len(text)


def depths(text: str, start: int, end: int) -> list[int]:
    """The bracket depth of each character of text[start:end] (strings count as one level)."""
    levels, depth, i = [0] * (end - start), 0, start
    while i < end:
        ch = text[i]
        if ch == '"':
            stop = min(skip_string(text, i), end)
            levels[i - start : stop - start] = [depth + 1] * (stop - i)
            i = stop
            continue
        if ch in CLOSE:
            depth -= 1
        levels[i - start] = depth
        if ch in OPEN:
            depth += 1
        i += 1
    return levels


def call_arguments(text: str, open_paren: int) -> str:
    """The text between the parenthesis at `open_paren` and its match."""
    for i, ch, depth in bracket_walk(text, open_paren):
        if ch in CLOSE and depth == 0:
            return text[open_paren + 1 : i]
    return text[open_paren + 1 :]


def members(text: str, start: int, end: int) -> dict[str, list[str]]:
    """The chained `.def("x", ..., "a"_a)` members of one statement: name -> parameter names.

    Only chain links at the statement's own bracket level count (not calls inside lambdas).
    """
    found: dict[str, list[str]] = {}
    level = depths(text, start, end)
    for match in MEMBER.finditer(text, start, end):
        if level[match.start() - start] != 0:
            continue
        paren = text.index("(", match.start())
        arguments = call_arguments(text, paren)
        if match.group(1) == "value":  # .value("FP16", BuilderFlag::kFP16, doc)
            names = ENUMERATOR.findall(arguments)[:1]
        else:
            names = ARGUMENT.findall(arguments)
        # Overloads: keep every parameter name any overload takes.
        known = found.setdefault(match.group(2), [])
        known.extend(name for name in names if name not in known)
    return found


def declaration(text: str, at: int) -> tuple[str, str, str | None, int] | None:
    """(kind, python name, binding variable or "scope|name", end of head) of a py::class_/enum_."""
    match = DECLARATION.match(text, at)
    if match is None:
        return None
    depth, i = 1, match.end()
    while depth:
        depth += {"<": 1, ">": -1}.get(text[i], 0)
        i += 1
    head = re.compile(r"\s*(?:([A-Za-z_]\w*)\s*)?[({]\s*([A-Za-z_]\w*)\s*,\s*\"(\w+)\"")
    found = head.match(text, i)
    if found is None:
        return None
    variable, scope, name = found.groups()
    kind = match.group(1)
    return kind, name, variable or f"{scope}|{name}", found.end()


def header_enums(headers: list[str]) -> dict[str, dict[str, int]]:
    """`enum class` values from C++ headers: {"BuilderFlag": {"kFP16": 0, ...}}; the first header
    that defines a name wins (the parser's ErrorCode before nvinfer1's)."""
    values: dict[str, dict[str, int]] = {}
    for header in headers:
        for name, body in ENUM_BODY.findall(blank_comments(header)):
            table, last = {}, -1
            for item in body.split(","):
                found = re.match(r"\s*(k\w+)(?:\s+TRT_DEPRECATED_ENUM)?\s*(?:=\s*(.+))?", item)
                if not found:
                    continue
                expression = (found.group(2) or "").strip()
                try:
                    last = int(expression.rstrip("Uu"), 0) if expression else last + 1
                except ValueError:  # another enumerator or an expression: order is all we know
                    last += 1
                table[found.group(1)] = last
            values.setdefault(name, table)
    return values


def enum_value(values: dict[str, dict[str, int]], enumerator: str) -> int | None:
    """The value of `ILogger::Severity::kERROR`-style enumerator text, None when unknown."""
    parts = enumerator.split("::")
    return values.get(parts[-2], {}).get(parts[-1]) if len(parts) >= 2 else None


def extract(sources: list[str], init_text: str, headers: list[str]) -> dict[str, Any]:
    """The name table of one release (see the module docstring)."""
    classes: dict[str, dict[str, list[str]]] = {}
    enums: dict[str, dict[str, int | None]] = {}
    module: set[str] = set()
    values = header_enums(headers)
    for raw in sources:
        text = blank_comments(raw)
        variables: dict[str, str] = {}  # C++ variable holding a class binding -> python name
        for match in DECLARATION.finditer(text):
            parsed = declaration(text, match.start())
            if parsed is None:
                continue
            kind, name, variable, _ = parsed
            scope = variable.split("|")[0] if "|" in variable else None
            end = statement_end(text, match.start())
            found = members(text, match.start(), end)
            owner = variables.get(scope or "")
            qualified = f"{owner}.{name}" if owner else name
            if owner:
                classes.setdefault(owner, {})[name] = []
            else:
                module.add(name)
            if kind == "enum_":
                table = enums.setdefault(qualified, {})
                for member, enumerator in found.items():
                    if enumerator and "::" in enumerator[0]:
                        table[member] = enum_value(values, enumerator[0])
                    else:  # a method bound on the enum type (__str__)
                        classes.setdefault(qualified, {})[member] = enumerator
            else:
                table = classes.setdefault(qualified, {})
                for member, parameters in found.items():
                    table.setdefault(member, parameters)
                if "|" not in variable:
                    variables[variable] = qualified
        for variable, qualified in variables.items():
            pattern = re.compile(rf"\b{re.escape(variable)}\s*\.\s*(?:def|value)")
            for use in pattern.finditer(text):
                end = statement_end(text, use.start())
                for member, parameters in members(text, use.start(), end).items():
                    classes[qualified].setdefault(member, parameters)
        module.update(match.group(2) for match in MODULE_MEMBER.finditer(text))
    result: dict[str, Any] = {"module": sorted(module), "classes": classes, "enums": enums}
    python_names(init_text, result)
    result["classes"] = {name: dict(sorted(t.items())) for name, t in sorted(classes.items())}
    result["enums"] = dict(sorted(enums.items()))
    return result


def python_names(init_text: str, table: dict[str, Any]) -> None:
    """Add what the wheel's __init__.py defines: module functions and assignments, class
    attributes (`DataType.itemsize = ...`) and enum members copied onto a class by `setattr`."""
    module = set(re.findall(r"^def ([A-Za-z_]\w*)", init_text, re.M))
    module.update(re.findall(r"^([A-Za-z_]\w*) = ", init_text, re.M))
    table["module"] = sorted(
        set(table["module"]) | {n for n in module if not n.startswith("_") or n == "__version__"}
    )
    for owner, name in re.findall(r"^([A-Z]\w*)\.(\w+) = ", init_text, re.M):
        # Attributes added to a class or an enum type (DataType.itemsize) are class attributes.
        if not name.startswith("__") and owner in table["module"]:
            table["classes"].setdefault(owner, {}).setdefault(name, [])
    copied = re.findall(
        r"^for attr, value in ([\w.]+)\.__members__\.items\(\):\s*\n\s+setattr\((\w+), attr",
        init_text,
        re.M,
    )
    for enum, owner in copied:
        for member in table["enums"].get(enum, []):
            table["classes"][owner].setdefault(member, [])


def main(git_dir: str, ref: str) -> None:
    commit = subprocess.run(
        ["git", "-C", git_dir, "rev-parse", ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    table = extract(
        [git_show(git_dir, commit, path) for path in SOURCES],
        git_show(git_dir, commit, INIT),
        [git_show(git_dir, commit, path) for path in HEADERS],
    )
    table = {
        "source": {
            "repository": "NVIDIA/TensorRT",
            "ref": ref,
            "commit": commit,
            "files": [*SOURCES, INIT, *HEADERS],
        },
        **table,
    }
    json.dump(table, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
