"""tests/ mirrors the package folder for folder: each folder of tests/ is a folder of trtconv/ (at
the same place), each folder of trtconv/ has one, and the top of tests/ holds only the checks of
the whole package. Two folders are the tests' own: `helpers` (what the tests share, imported as
`from tests.helpers.NAME import ...`) and `contract` (the JSON documents of every command)."""

from __future__ import annotations

from pathlib import Path

import trtconv

PACKAGE = Path(trtconv.__file__).resolve().parent
TESTS = Path(__file__).resolve().parent
OWN = frozenset({"helpers", "contract"})
# The checks of the whole package (and the example scripts), kept at the top of tests/.
WHOLE_PACKAGE = {
    "test_examples.py",
    "test_layers.py",
    "test_layout.py",
    "test_mirror.py",
    "test_packaging.py",
    "test_types_cross.py",
}


def folders(root: Path, skip: frozenset[str] = frozenset()) -> set[str]:
    """The folders under `root` that hold Python files, relative to it, except those in `skip`."""
    found = set()
    for path in root.rglob("*.py"):
        relative = path.parent.relative_to(root)
        if relative.parts and relative.parts[0] not in skip:
            found.add(relative.as_posix())
    return found


def test_every_test_folder_is_a_package_folder() -> None:
    assert folders(TESTS, OWN) - folders(PACKAGE) == set()


def test_every_package_folder_has_a_test_folder() -> None:
    untested = {f for f in folders(PACKAGE) - folders(TESTS) if "/" not in f}
    assert untested == set()


def test_the_top_of_tests_holds_only_checks_of_the_whole_package() -> None:
    assert {p.name for p in TESTS.glob("test_*.py")} == WHOLE_PACKAGE


def test_every_test_folder_is_a_package() -> None:
    """Test modules get their folder in their name (tests.model.test_savedmodel), so two folders
    may hold modules of the same name and no folder shadows a library (tests/inspect)."""
    missing = [f for f in folders(TESTS) if not (TESTS / f / "__init__.py").is_file()]
    assert missing == []
    assert (TESTS / "__init__.py").is_file()
