"""The code stays small and the tree shows the architecture (STYLE.md: functions that fit on a
screen; one folder per backend)."""

from __future__ import annotations

import ast
from pathlib import Path

from trtconv.backends import registry

PACKAGE = Path(registry.__file__).resolve().parents[1]
# Counted from the first line of the body (docstring included) to the last: a CLI command's
# signature is a list of option declarations, the body is what has to fit on a screen.
MAX_BODY_LINES = 60


def long_functions() -> list[str]:
    """Functions under trtconv/ whose body is longer than MAX_BODY_LINES."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            lines = (node.end_lineno or node.lineno) - node.body[0].lineno + 1
            if lines > MAX_BODY_LINES:
                found.append(f"{relative}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_is_longer_than_a_screen() -> None:
    assert long_functions() == []


def test_each_builtin_backend_is_a_package_of_its_own() -> None:
    for module in registry.BUILTIN:
        folder = PACKAGE.parent.joinpath(*module.split("."))
        assert (folder / "__init__.py").is_file(), module
    assert {b.module for b in registry.backends()} >= set(registry.BUILTIN)
