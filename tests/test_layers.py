"""Imports point down the layers only, with no cycle, counting imports inside functions too.

The layers, bottom to top, are listed in LAYERS (docs/architecture.md draws them). A module may
import from its own layer or a lower one. A folder is a layer: every module of a folder (a
subpackage of trtconv, or a top-level module) sits on the same layer, and the folders, drawn with
their imports, form no cycle. Every import is read from the source with `ast`: module
level, inside functions, under `if TYPE_CHECKING:`. `from P import name` depends on package P
(its `__init__` runs first) and, when `name` is a submodule, on that submodule too.

Imports of trtconv's own modules inside a function are allowed only with a `# local: <reason>`
comment on the import's first line, and at most MAX_LOCAL_IMPORTS of them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import trtconv

PACKAGE = Path(trtconv.__file__).resolve().parent
MAX_LOCAL_IMPORTS = 15

# Bottom first. A module belongs to the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core and options", ("trtconv", "trtconv.core", "trtconv.options")),
    ("facts and model", ("trtconv.facts", "trtconv.model")),
    (
        "data, compare, results",
        ("trtconv.calib", "trtconv.artifact", "trtconv.outputs", "trtconv.measure", "trtconv.zoo"),
    ),
    (
        "backend protocol",
        ("trtconv.protocol",),
    ),
    ("onnx library", ("trtconv.onnxlib", "trtconv.quantize")),
    ("backends", ("trtconv.backends",)),
    (
        "pipelines",
        (
            "trtconv.convert",
            "trtconv.validate",
            "trtconv.bench",
            "trtconv.train",
            "trtconv.inspect",
            "trtconv.doctor",
            "trtconv.report",
            "trtconv.serving",
        ),
    ),
    ("api and release", ("trtconv.api", "trtconv.release")),
    ("cli", ("trtconv.cli", "trtconv.__main__")),
)

# A folder may be split further into packages that are layers among themselves, bottom first: a
# module of one may import from its own package or an earlier one, never a later one. Every
# module of such a folder, but its __init__, sits in one of them.
SUBLAYERS: dict[str, tuple[str, ...]] = {
    "trtconv.serving": (
        "trtconv.serving.repository",  # a Triton model repository (deploy)
        "trtconv.serving.server",  # the live server and its shadow check (serve)
        "trtconv.serving.load",  # load generation and the rate search (bench --scenario server)
    ),
}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    local: bool  # inside a function
    reason: str  # the `# local: ...` comment, if any


def modules() -> dict[str, Path]:
    """Every trtconv module by dotted name."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def layer_of(module: str) -> int:
    """The index in LAYERS of `module`'s longest matching prefix. KeyError when none."""
    best = (-1, -1)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                best = max(best, (len(prefix), index))
    if best[1] < 0:
        raise KeyError(module)
    return best[1]


def imports(known: dict[str, Path]) -> Iterator[Import]:
    """Each dependency of each trtconv module on another trtconv module."""
    for name, path in known.items():
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source)
        local_nodes = {
            id(node)
            for func in ast.walk(tree)
            if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(func)
        }
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            for target in _targets(node, package, known):
                if target == name:
                    continue
                text = lines[node.lineno - 1]
                reason = text.split("# local:", 1)[1].strip() if "# local:" in text else ""
                yield Import(name, target, node.lineno, id(node) in local_nodes, reason)


def _targets(node: ast.AST, package: str, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name.split(".")[0] == "trtconv"]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        parent = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*parent, base] if base else parent)
    if base.split(".")[0] != "trtconv":
        return []
    found = [base]
    found += [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
    return found


def cycles(known: dict[str, Path]) -> list[list[str]]:
    """The import graph's strongly connected components of more than one module."""
    graph: dict[str, set[str]] = {name: set() for name in known}
    for found in imports(known):
        if found.imported in graph:
            graph[found.importer].add(found.imported)
    return components(graph)


def folder_of(module: str) -> str:
    """The folder a module is drawn in: its subpackage of trtconv, or itself when top-level."""
    return ".".join(module.split(".")[:2])


def folder_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """Each folder and the other folders its modules import."""
    graph: dict[str, set[str]] = {folder_of(name): set() for name in known}
    for found in imports(known):
        if found.imported in known and folder_of(found.imported) != folder_of(found.importer):
            graph[folder_of(found.importer)].add(folder_of(found.imported))
    return graph


def components(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    result: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for name in modules():
        try:
            layer_of(name)
        except KeyError:
            unplaced.append(name)
    assert unplaced == []


def test_imports_point_down_the_layers() -> None:
    known = modules()
    upward = [
        f"{i.importer}:{i.line} ({LAYERS[layer_of(i.importer)][0]}) imports {i.imported} "
        f"({LAYERS[layer_of(i.imported)][0]})"
        for i in imports(known)
        if i.imported in known and layer_of(i.imported) > layer_of(i.importer)
    ]
    assert upward == []


def sublayer_of(module: str) -> tuple[str, int] | None:
    """The split folder `module` is in and the index of its package there; None when its folder
    is not split. KeyError when the folder is split and the module is in none of its packages."""
    folder = folder_of(module)
    if folder not in SUBLAYERS or module == folder:
        return None
    for index, package in enumerate(SUBLAYERS[folder]):
        if module == package or module.startswith(package + "."):
            return folder, index
    raise KeyError(module)


def climbing(found: list[Import], known: dict[str, Path]) -> list[str]:
    """The imports, of a split folder's modules, of a later package of the same folder."""
    upward = []
    for i in found:
        if i.imported not in known or folder_of(i.importer) != folder_of(i.imported):
            continue
        low, high = sublayer_of(i.importer), sublayer_of(i.imported)
        if low is not None and high is not None and high[1] > low[1]:
            upward.append(f"{i.importer}:{i.line} imports {i.imported}")
    return upward


def test_every_module_of_a_split_folder_has_a_package() -> None:
    unplaced = []
    for name in modules():
        try:
            sublayer_of(name)
        except KeyError:
            unplaced.append(name)
    assert unplaced == []


def test_imports_point_down_the_packages_of_a_split_folder() -> None:
    known = modules()
    assert climbing(list(imports(known)), known) == []


def test_the_package_rule_sees_an_import_climbing(tmp_path: Path) -> None:
    """Checked on a synthetic pair: the repository importing the server climbs, the reverse
    does not."""
    low = tmp_path / "low.py"
    high = tmp_path / "high.py"
    low.write_text("import trtconv.serving.server.high\n")
    high.write_text("import trtconv.serving.repository.low\n")
    known = {"trtconv.serving.repository.low": low, "trtconv.serving.server.high": high}
    assert climbing(list(imports(known)), known) == [
        "trtconv.serving.repository.low:1 imports trtconv.serving.server.high"
    ]


def test_no_import_cycles() -> None:
    assert cycles(modules()) == []


def test_every_module_of_a_folder_sits_on_the_folders_layer() -> None:
    """A folder is a layer: the drawing in docs/architecture.md names folders, not files."""
    layers: dict[str, set[str]] = {}
    for name in modules():
        layers.setdefault(folder_of(name), set()).add(LAYERS[layer_of(name)][0])
    assert {folder: found for folder, found in layers.items() if len(found) > 1} == {}


def test_folders_form_no_cycle() -> None:
    assert components(folder_graph(modules())) == []


def test_local_imports_of_trtconv_are_few_and_say_why() -> None:
    local = {(i.importer, i.line, i.reason) for i in imports(modules()) if i.local}
    unexplained = sorted(f"{m}:{line}" for m, line, reason in local if not reason)
    assert unexplained == []
    assert len(local) <= MAX_LOCAL_IMPORTS, sorted(local)


def test_the_layer_rules_see_local_imports_and_cycles(tmp_path: Path) -> None:
    """The rules above would catch a violation: checked on a synthetic two-module cycle."""
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text("def f():\n    from trtconv.two import x\n")
    two.write_text("import trtconv.one\n")
    known = {"trtconv.one": one, "trtconv.two": two}
    found = list(imports(known))
    assert {(i.importer, i.imported, i.local) for i in found} == {
        ("trtconv.one", "trtconv.two", True),
        ("trtconv.two", "trtconv.one", False),
    }
    assert cycles(known) == [["trtconv.one", "trtconv.two"]]


def test_the_folder_rules_see_a_cycle_between_folders(tmp_path: Path) -> None:
    """Modules that form no cycle can still tie their folders in one: checked on a synthetic
    pair of folders, each importing a module of the other."""
    files = {
        "trtconv.one.low": "",
        "trtconv.one.high": "import trtconv.two.mid\n",
        "trtconv.two.mid": "import trtconv.one.low\n",
    }
    known = {}
    for name, text in files.items():
        known[name] = tmp_path / f"{name}.py"
        known[name].write_text(text)
    assert cycles(known) == []
    assert folder_graph(known) == {"trtconv.one": {"trtconv.two"}, "trtconv.two": {"trtconv.one"}}
    assert components(folder_graph(known)) == [["trtconv.one", "trtconv.two"]]
