"""Types where data crosses a module: results are dataclasses, and dicts stay inside
a function or at the JSON edge (`to_json`/`from_json`).

Two counts over trtconv/, read with `ast`, may only go down: functions whose return annotation
holds `dict[str, Any]` (alone or in a tuple, list or union), and string-key reads (`x["key"]`
loaded, not assigned, and `x.get("key")`; a TensorFlow graph node's protobuf attribute map,
`node.attr["dtype"]`, is TensorFlow's typed API, not trtconv's data, and is not counted). Lower
a ceiling when a change lowers its count; the goal is at most 30 functions and 250 reads.

Values cross by name: a call of a trtconv dataclass passes at most MAX_POSITIONAL arguments by
position (in trtconv/ and tests/), so a reader sees which field each value fills and a field added
or moved cannot shift them.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from trtconv.backends import registry

PACKAGE = Path(registry.__file__).resolve().parents[1]
# Measured at the ceiling's last change (first counted: 129 and 707, the latter with writes).
MAX_DICT_RETURNS = 25
MAX_KEY_READS = 94
MAX_POSITIONAL = 5
TESTS = PACKAGE.parent / "tests"


@cache
def _trees() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text()))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def dict_returns() -> list[str]:
    """`module:line name` of every function whose return annotation holds dict[str, Any]."""
    found = []
    for module, tree in _trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or not node.returns:
                continue
            if "dict[str, Any]" in ast.unparse(node.returns):
                found.append(f"{module}:{node.lineno} {node.name}")
    return found


def _is_key_read(node: ast.AST) -> bool:
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        proto_map = isinstance(node.value, ast.Attribute) and node.value.attr == "attr"
        keyed = isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)
        return keyed and not proto_map
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        first = node.args[0] if node.args else None
        is_text = isinstance(first, ast.Constant) and isinstance(first.value, str)
        return node.func.attr == "get" and is_text
    return False


def key_reads() -> dict[str, int]:
    """String-key reads per module (only modules that have some)."""
    counts = {module: sum(map(_is_key_read, ast.walk(tree))) for module, tree in _trees()}
    return {module: count for module, count in counts.items() if count}


def dataclass_names(trees: list[tuple[str, ast.Module]]) -> set[str]:
    """The names of the classes decorated with `dataclass` (called or not)."""
    return {
        node.name
        for _, tree in trees
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(d).split("(")[0] == "dataclass" for d in node.decorator_list)
    }


def positional_calls(trees: list[tuple[str, ast.Module]], classes: set[str]) -> dict[str, int]:
    """Per module, the calls of `classes` with more than MAX_POSITIONAL positional arguments."""
    counts: dict[str, int] = {}
    for module, tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or len(node.args) <= MAX_POSITIONAL:
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in classes:
                counts[module] = counts.get(module, 0) + 1
    return counts


def test_the_counters_count_what_they_name() -> None:
    tree = ast.parse(
        "def f() -> tuple[int, dict[str, Any]]:\n"
        "    x['a'] = y['b'] + z.get('c', 1) + w.get(k) + v[0] + n.attr['dtype']\n"
    )
    reads = [node for node in ast.walk(tree) if _is_key_read(node)]
    assert [ast.unparse(node) for node in reads] == ["y['b']", "z.get('c', 1)"]
    function = tree.body[0]
    assert isinstance(function, ast.FunctionDef) and function.returns is not None
    assert "dict[str, Any]" in ast.unparse(function.returns)


def test_functions_returning_untyped_dicts_do_not_grow() -> None:
    found = dict_returns()
    assert len(found) <= MAX_DICT_RETURNS, "\n".join(found)


def test_string_key_reads_do_not_grow() -> None:
    counts = key_reads()
    listing = "\n".join(f"{n} {m}" for m, n in sorted(counts.items(), key=lambda i: -i[1]))
    assert sum(counts.values()) <= MAX_KEY_READS, listing


def test_dataclasses_are_built_by_name_not_by_long_positions() -> None:
    tests = [
        (f"tests/{path.relative_to(TESTS).as_posix()}", ast.parse(path.read_text()))
        for path in sorted(TESTS.rglob("*.py"))
    ]
    counts = positional_calls([*_trees(), *tests], dataclass_names(_trees()))
    assert counts == {}


def test_the_positional_counter_sees_a_long_call() -> None:
    tree = ast.parse(
        "@dataclass(frozen=True)\nclass P: ...\n"
        "P(1, 2, 3, 4, 5, 6)\nP(1, 2, 3, 4, 5)\nm.P(1, 2, 3, 4, 5, 6)\n"
        "P(a=1, b=2, c=3, d=4, e=5, f=6)\n"
    )
    trees = [("m.py", tree)]
    assert dataclass_names(trees) == {"P"}
    assert positional_calls(trees, {"P"}) == {"m.py": 2}
