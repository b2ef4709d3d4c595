"""`trtconv --help` loads no command (as pip's commands_dict), and the bench worker loads no CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from trtconv.cli.root import COMMANDS, load_command

# Prints the trtconv, typer and numpy modules loaded after running `run`.
PROBE = """
import json, sys
{run}
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("trtconv", "typer", "numpy")))))
"""
HELP = """
from trtconv.cli import main
try:
    main(["--help"])
except SystemExit:
    pass
"""


def _modules_after(run: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(run=run)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_summary_is_the_commands_own_short_help(name: str) -> None:
    assert COMMANDS[name].summary == load_command(name).get_short_help_str(10_000)


def test_root_help_imports_no_command_module() -> None:
    loaded = _modules_after(HELP)
    assert {f"trtconv.cli.{name}" for name in COMMANDS} & loaded == set()
    assert "numpy" not in loaded


def test_the_bench_worker_imports_neither_typer_nor_the_commands() -> None:
    loaded = _modules_after("import trtconv.cli.bench_worker")
    assert "trtconv.cli.bench_worker" in loaded
    assert {
        m for m in loaded if m.startswith(("typer", "trtconv.cli.root", "trtconv.api"))
    } == set()
    assert {f"trtconv.cli.{name}" for name in COMMANDS} & loaded == set()


def test_an_unknown_command_is_no_command() -> None:
    from typer.main import get_command

    from trtconv.cli import app

    group = get_command(app)
    assert group.get_command(None, "nope") is None  # type: ignore[arg-type]
    assert group.list_commands(None) == list(COMMANDS)  # type: ignore[arg-type]
