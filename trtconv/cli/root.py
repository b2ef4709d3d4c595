"""The root `trtconv` app: options of its own, and the commands it loads when run.

Each command's module is imported when that command runs or shows its own help, as pip's
`commands_dict` does: `trtconv --help` reads the one-line summaries in COMMANDS and imports no
command (and so no pipeline). `trtconv.cli.reference` walks every command, which loads them all.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from trtconv import __version__
from trtconv.cli._output import emit_error
from trtconv.core.lazy import lean_keras_start


@dataclass(frozen=True)
class CommandSpec:
    """Where a command lives (module and attribute: a command function or a sub-app) and the
    summary `trtconv --help` lists, which a test holds equal to the command's own short help."""

    module: str
    attribute: str
    summary: str


# In the order `trtconv --help` lists them.
COMMANDS: dict[str, CommandSpec] = {
    "doctor": CommandSpec(
        "trtconv.cli.doctor",
        "doctor_cli",
        "Report libraries, GPUs, CPU features and which conversions can run here (always exit 0).",
    ),
    "train": CommandSpec(
        "trtconv.cli.train",
        "train_cli",
        "Train (AMP) and export a float32 SavedModel with a serving_default signature.",
    ),
    "inspect": CommandSpec(
        "trtconv.cli.inspect",
        "inspect_cli",
        "Show signatures, inputs/outputs, op histogram, size and model card or manifest.",
    ),
    "convert": CommandSpec(
        "trtconv.cli.convert",
        "convert_cli",
        "Convert a SavedModel (or a train output, or a Keras file) at a precision, validate it "
        "against the native model, save it.",
    ),
    "validate": CommandSpec(
        "trtconv.cli.validate",
        "validate_cli",
        "Compare a converted artifact with its native model; exit 4 when it fails, is "
        "inconclusive or an output is not judged.",
    ),
    "release": CommandSpec(
        "trtconv.cli.release",
        "release_cli",
        "Convert every target, validate, bench, apply gates: exit 0 with a recommendation, else 4.",
    ),
    "bench": CommandSpec(
        "trtconv.cli.bench",
        "bench_cli",
        "Benchmark SavedModels and converted artifacts side by side (latency, throughput, "
        "speedup).",
    ),
    "deploy": CommandSpec(
        "trtconv.cli.deploy",
        "deploy_cli",
        "Write a Triton model repository: per model its payload, config.pbtxt (native Triton "
        "backend, tensors, dynamic batching, instances) and trtconv.json (the manifest).",
    ),
    "serve": CommandSpec(
        "trtconv.cli.serve",
        "serve_cli",
        "Serve a model with Triton's dynamic batcher on loopback until Ctrl-C or SIGTERM (exit "
        "130/143 once the requests in flight are answered and the server is stopped).",
    ),
    "report": CommandSpec(
        "trtconv.cli.report", "app", "Work on bench and release reports already written."
    ),
}

# The root app's settings; each command is built under the same ones when it is loaded.
SETTINGS: dict[str, Any] = {
    "add_completion": False,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
}


def load_command(name: str) -> Any:
    """The click command for COMMANDS[name], built exactly as registering it on the root app
    would build it (typer's own path: a holder app with the same settings)."""
    spec = COMMANDS[name]
    target = getattr(importlib.import_module(spec.module), spec.attribute)
    holder = typer.Typer(**SETTINGS)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
    else:
        holder.command(name)(target)
    return typer.main.get_group(holder).commands[name]


class LazyCommands(Mapping[str, Any]):
    """The root group's commands: every name is known, a command is built on first access."""

    def __init__(self) -> None:
        self._loaded: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            self._loaded[name] = load_command(name)  # KeyError for an unknown name
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class LazyGroup(TyperGroup):
    """typer's group with lazily loaded commands; its listing reads COMMANDS' summaries."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands()  # type: ignore[assignment]

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """As typer's, with a stand-in carrying the summary so that no command is imported."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [
            (name, TyperCommand(name=name, help=spec.summary).get_short_help_str(limit))
            for name, spec in COMMANDS.items()
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


app = typer.Typer(
    name="trtconv",
    help="Train, convert, validate and benchmark TensorFlow models for fast inference.",
    no_args_is_help=True,
    cls=LazyGroup,
    **SETTINGS,
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


def main(argv: list[str] | None = None) -> None:
    """Entry point. Usage errors become exit 2 (and a JSON error document with --json)."""
    args = sys.argv[1:] if argv is None else argv
    json_mode = "--json" in args
    lean_keras_start()  # each command that starts TensorFlow: about 1.2 s of CPU less
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
