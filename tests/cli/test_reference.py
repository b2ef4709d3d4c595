"""docs/cli.md is generated from the typer app (trtconv.cli.reference) and must match it: every
command, every option, and the committed file byte for byte."""

from __future__ import annotations

import enum
from pathlib import Path

import pytest
import typer

from trtconv.cli import reference

DOCS_CLI = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def contexts() -> list[reference.Context]:
    return list(reference.walk(reference.root_command()))


def test_the_walk_reaches_every_command_and_the_report_group() -> None:
    paths = [ctx.command_path for ctx in contexts()]
    assert paths[0] == "trtconv"
    for name in ("doctor", "train", "inspect", "convert", "validate", "release", "bench"):
        assert f"trtconv {name}" in paths
    assert "trtconv report" in paths
    assert "trtconv report merge" in paths
    assert len(paths) == len(set(paths))


@pytest.mark.parametrize("ctx", contexts(), ids=lambda ctx: ctx.command_path)
def test_every_option_of_a_command_is_in_its_section(ctx: reference.Context) -> None:
    text = reference.section(ctx)
    assert text.startswith(f"## `{ctx.command_path}`\n")
    assert f"{ctx.command_path} [OPTIONS]" in text  # the usage line
    params = [p for p in ctx.command.get_params(ctx) if not getattr(p, "hidden", False)]
    assert params, "every command has at least --help"
    for param in params:
        for flag in [*param.opts, *param.secondary_opts]:
            assert f"`{flag}" in text or f"{flag}`" in text or f" {flag} " in text, flag
        if param.help:
            first_words = " ".join(param.help.split()[:4]).replace("|", "\\|")
            assert first_words in text, (param.name, first_words)


def test_defaults_and_required_arguments_are_shown() -> None:
    convert = next(ctx for ctx in contexts() if ctx.command_path == "trtconv convert")
    text = reference.section(convert)
    assert "| `--calib-method` | `<str>` | `minmax` |" in text
    assert "| `--fallback / --no-fallback` |  | `fallback` |" in text
    assert "| `saved_model` | `<path>` | *required* |" in text


class Colour(str, enum.Enum):
    RED = "red"
    BLUE = "blue"


def made_up_app() -> typer.Typer:
    """An app the generator has never seen: a command with a short flag, choices, an env var, a
    range and a hidden option; a hidden command; a sub-group with an optional argument list."""
    app = typer.Typer(add_completion=False, rich_markup_mode=None)

    @app.command("paint")
    def paint(
        target: Path = typer.Argument(..., help="What to paint."),
        colour: Colour = typer.Option(Colour.RED, "--colour", "-c", help="A | B.", envvar="C"),
        secret: bool = typer.Option(False, "--secret", hidden=True),
        coats: int = typer.Option(3, min=1, max=9, help="How many."),
    ) -> None:
        """Paint a thing.

        Second paragraph
        over two lines."""

    @app.command("hidden-command", hidden=True)
    def hidden_command() -> None:
        """Not shown."""

    group = typer.Typer(help="A sub-group.")

    @group.command("leaf")
    def leaf(names: list[str] = typer.Argument(None, help="Optional names.")) -> None:
        """A leaf."""

    app.add_typer(group, name="group")
    return app


def test_a_new_app_is_walked_without_the_generator_knowing_it() -> None:
    text = reference.reference_markdown(made_up_app())
    assert "## `trtconv paint`" in text and "## `trtconv group leaf`" in text
    assert "Paint a thing.\n\nSecond paragraph over two lines." in text
    assert "| `-c, --colour` | `<red\\|blue>` | `red` | A \\| B. [env var: C] |" in text
    assert "| `--coats` | `<int range> 1<=x<=9` | `3` | How many. |" in text
    assert "| `names...` | `<list[str]>` |  | Optional names. |" in text
    assert "--secret" not in text and "hidden-command" not in text


def test_the_output_does_not_depend_on_the_terminal_width(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow = reference.reference_markdown()
    monkeypatch.setenv("COLUMNS", "250")
    assert reference.reference_markdown() == narrow


def test_docs_cli_md_is_the_generated_reference() -> None:
    assert DOCS_CLI.read_text(encoding="utf-8") == reference.reference_markdown(), (
        "docs/cli.md is out of date: run `make docs`"
    )


def test_check_passes_on_the_committed_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert reference.main(["--check", str(DOCS_CLI)]) == 0
    assert capsys.readouterr().err == ""


def test_check_fails_with_one_line_naming_the_file_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "cli.md"
    stale.write_text(reference.reference_markdown().replace("--calib-method", "--calib-way"))
    assert reference.main(["--check", str(stale)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert str(stale) in err
    assert "make docs" in err
    assert reference.main(["--check", str(tmp_path / "missing.md")]) == 1
    assert "missing.md is missing" in capsys.readouterr().err


def test_printing_gives_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert reference.main([]) == 0
    assert capsys.readouterr().out == reference.reference_markdown()
