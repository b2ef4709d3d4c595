"""The options package: each command's options beside the checks they share, importing nothing
of trtconv but core (every layer above takes an options object), and one sentence for each value
refused, whichever command's options it was given to."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import trtconv.options
from trtconv.core.errors import UsageError
from trtconv.options.bench import BenchOptions
from trtconv.options.convert import ConvertOptions
from trtconv.options.shared import check_choice, shapes_of

OPTIONS = Path(trtconv.options.__file__).resolve().parent


def test_the_options_import_only_core_and_each_other() -> None:
    imported = set()
    for path in OPTIONS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            imported |= {".".join(n.split(".")[:2]) for n in names if n.startswith("trtconv")}
    assert imported <= {"trtconv.core", "trtconv.options"}, imported


def test_a_choice_outside_the_list_names_the_flag_and_the_choices() -> None:
    with pytest.raises(UsageError, match=r"^--split must be one of held-out, all, found 'x'\.$"):
        check_choice("--split", "x", ("held-out", "all"))


def test_an_input_shape_with_a_size_below_one_is_refused() -> None:
    assert shapes_of({"image": [1, 28, 28]}) == {"image": (1, 28, 28)}
    with pytest.raises(UsageError, match=r"--input-shape image: sizes must be positive"):
        shapes_of({"image": [1, 0, 28]})


def test_convert_and_bench_refuse_the_same_batch_sizes_alike(tmp_path: Path) -> None:
    """The shared check, through two commands' options: the same sentence from both."""
    said = []
    for make in (
        lambda: ConvertOptions(tmp_path, batch_sizes=(0,)),
        lambda: BenchOptions((tmp_path,), batch_sizes=(0,)),
    ):
        with pytest.raises(UsageError) as refused:
            make()
        said.append(str(refused.value))
    assert said == ["--batch-sizes must be positive integers, found [0]."] * 2
