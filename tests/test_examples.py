"""`make bench` and the example scripts import trtconv by name: those names must exist.

Their Python runs only in `make bench` (minutes, not in CI), so a renamed function breaks them
unseen: `holdout_split` was renamed `split_holdout` and the MobileNetV2 step of `make bench`
failed with an ImportError. These tests read every `from trtconv... import ...` in them (the
Python heredocs of examples/*.sh and the examples/*.py files) and import each name.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
HEREDOC = re.compile(r"<<'EOF'\n(.*?)\nEOF\n", re.S)


def python_sources() -> list[tuple[str, str]]:
    """(where, Python source) for each heredoc of the shell scripts and each .py file."""
    sources = []
    for script in sorted(EXAMPLES.glob("*.sh")):
        for number, block in enumerate(HEREDOC.findall(script.read_text()), start=1):
            sources.append((f"{script.name} heredoc {number}", block))
    sources += [(path.name, path.read_text()) for path in sorted(EXAMPLES.glob("*.py"))]
    return sources


def trtconv_imports(source: str) -> list[tuple[str, str]]:
    """(module, name) for every `from trtconv... import name`, at any depth."""
    return [
        (node.module, alias.name)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("trtconv")
        for alias in node.names
    ]


def test_the_examples_have_python_to_check() -> None:
    found = [imports for _, source in python_sources() if (imports := trtconv_imports(source))]
    assert len(found) >= 3  # bench.sh's MobileNetV2 and ResNet-50 builders, plain_loop.py, ...


@pytest.mark.parametrize("where,source", python_sources(), ids=lambda value: str(value)[:40])
def test_every_trtconv_name_they_import_exists(where: str, source: str) -> None:
    for module, name in trtconv_imports(source):
        assert importable(module, name), f"{where}: {module}.{name}"


def importable(module: str, name: str) -> bool:
    """`from module import name` would work: an attribute, or a submodule."""
    if hasattr(importlib.import_module(module), name):
        return True
    try:
        importlib.import_module(f"{module}.{name}")
    except ModuleNotFoundError:
        return False
    return True
