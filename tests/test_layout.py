"""The code stays small and the tree shows the architecture: modules under MAX_MODULE_LINES (the
package's and the tests'), functions that fit on a screen, one folder per backend
(docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

from trtconv.backends import registry

PACKAGE = Path(registry.__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# Counted over the whole definition: decorators, signature, docstring and body. A command with
# many options declares them once (typer `Annotated` aliases), one line per parameter.
MAX_LINES = 60
# A module longer than this holds more than one idea: split it by idea, not by line count.
MAX_MODULE_LINES = 450


def long_functions() -> list[str]:
    """Functions under trtconv/ longer than MAX_LINES, decorators to last line."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = (node.end_lineno or node.lineno) - first + 1
            if lines > MAX_LINES:
                found.append(f"{relative}:{node.lineno} {node.name} ({lines} lines)")
    return found


def long_modules(root: Path) -> dict[str, int]:
    """Modules under `root` of MAX_MODULE_LINES lines or more, by path from the repository."""
    return {
        path.relative_to(root.parent).as_posix(): lines
        for path in sorted(root.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) >= MAX_MODULE_LINES
    }


def test_no_module_is_longer_than_the_limit() -> None:
    assert long_modules(PACKAGE) == {}


def test_no_test_module_is_longer_than_the_limit() -> None:
    """Tests, their helpers and the stand-ins are code to read too: the same limit holds."""
    assert long_modules(TESTS) == {}


def test_no_function_is_longer_than_a_screen() -> None:
    assert long_functions() == []


def test_each_builtin_backend_is_a_package_of_its_own() -> None:
    for module in registry.BUILTIN:
        folder = PACKAGE.parent.joinpath(*module.split("."))
        assert (folder / "__init__.py").is_file(), module
    assert {b.module for b in registry.backends()} >= set(registry.BUILTIN)
