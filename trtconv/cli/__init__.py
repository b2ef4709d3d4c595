"""The `trtconv` command: the root app only wires the per-command modules together."""

from __future__ import annotations

import sys

import typer

from trtconv import __version__
from trtconv.cli import (
    bench,
    convert,
    deploy,
    doctor,
    inspect,
    release,
    report,
    serve,
    train,
    validate,
)
from trtconv.cli._output import emit_error

app = typer.Typer(
    name="trtconv",
    help="Train, convert, validate and benchmark TensorFlow models for fast inference.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit(0)


@app.callback()
def root(
    # Eager: runs before click asks for a command, so `trtconv --version` alone works.
    version: bool = typer.Option(
        False,
        "--version",
        help="Print the version and exit.",
        is_eager=True,
        callback=_print_version,
    ),
) -> None:
    """Train, convert, validate and benchmark TensorFlow models for fast inference."""


app.command("doctor")(doctor.doctor_cli)
app.command("train")(train.train_cli)
app.command("inspect")(inspect.inspect_cli)
app.command("convert")(convert.convert_cli)
app.command("validate")(validate.validate_cli)
app.command("release")(release.release_cli)
app.command("bench")(bench.bench_cli)
app.command("deploy")(deploy.deploy_cli)
app.command("serve")(serve.serve_cli)
app.add_typer(report.app, name="report")


def main(argv: list[str] | None = None) -> None:
    """Entry point. Usage errors become exit 2 (and a JSON error document with --json)."""
    args = sys.argv[1:] if argv is None else argv
    json_mode = "--json" in args
    try:
        code = app(args=args, prog_name="trtconv", standalone_mode=False)
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.TyperException as exc:  # usage errors: unknown option, bad value, ...
        emit_error("UsageError", exc.format_message(), json_mode)
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        emit_error("Interrupted", "interrupted.", json_mode)
        code = 130
    sys.exit(code if isinstance(code, int) else 0)
