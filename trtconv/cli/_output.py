"""stdout is data, stderr is talk (after huggingface_hub's cli/_output.py).

In JSON mode stdout carries exactly one JSON document: the result, or {"error": {...}}.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.logging import RichHandler

from trtconv.core.errors import TrtconvError
from trtconv.core.interrupts import Terminated, interrupt_exit_code, sigterm_as_interrupt
from trtconv.core.lazy import tensorflow_environment
from trtconv.core.progress import Progress
from trtconv.core.results import JsonResult

# A command's result: typed (trtconv.core.results.JsonResult) or, for the few commands that
# print a plain document, a dict. Either prints as one JSON document.
Result = JsonResult | dict[str, Any]
R = TypeVar("R", bound=Result)


# Columns of the human rendering when stdout is not a terminal (a pipe, a file, a CI log): rich
# would fold every table to 80 columns there (`--backend best`'s table read one word per line);
# this wide, every row and line stays whole, and a table takes only the width it needs.
PIPED_WIDTH = 1000


def stderr_console() -> Console:
    return Console(stderr=True)


def stdout_console() -> Console:
    """The console results are rendered on: the terminal's width, or PIPED_WIDTH when stdout is
    not a terminal."""
    console = Console()
    if console.is_terminal:
        return console
    return Console(width=max(console.width, PIPED_WIDTH))


@contextmanager
def progress_bar(title: str) -> Iterator[Progress | None]:
    """A transient progress bar on stderr when it is a terminal; None otherwise (CI logs)."""
    console = stderr_console()
    if not console.is_terminal:
        yield None
        return
    from rich.progress import Progress as Bar

    with Bar(console=console, transient=True) as bar:
        task = bar.add_task(title, total=None)

        def update(done: int, total: int, label: str) -> None:
            step = f" ({done + 1}/{total})" if done < total else ""
            description = f"{title}: {label}{step}"
            bar.update(task, completed=done, total=total, description=description)

        yield update


def configure_logging(verbose: bool = False) -> None:
    """Send trtconv's log records to stderr (rich on a TTY, plain lines otherwise)."""
    console = stderr_console()
    handler: logging.Handler
    if console.is_terminal:
        handler = RichHandler(console=console, show_path=False, show_time=False)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("trtconv: %(message)s"))
    root = logging.getLogger("trtconv")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


def emit_result(result: R, json_mode: bool, render: Callable[[R, Console], None] | None) -> None:
    """Print the command's result: JSON to stdout, or the human rendering."""
    if json_mode:
        document = result.to_json() if isinstance(result, JsonResult) else result
        sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")
        sys.stdout.flush()
    elif render is not None:
        render(result, stdout_console())


def emit_error(error_type: str, message: str, json_mode: bool) -> None:
    """Report an error: one line on stderr, and in JSON mode an error document on stdout."""
    if json_mode:
        document = {"error": {"type": error_type, "message": message}}
        sys.stdout.write(json.dumps(document) + "\n")
        sys.stdout.flush()
    sys.stderr.write(f"trtconv: error: {message}\n")
    sys.stderr.flush()


def run_command(
    work: Callable[[], R], *, json_mode: bool, render: Callable[[R, Console], None] | None = None
) -> None:
    """Run a command's work, print its result, and map errors to exit codes (the only place).

    Every error is a TrtconvError carrying its exit code. One that carries the command's result
    (a failed validation or gate, exit 4) prints that result as success would, JSON included,
    and its one-line reason on stderr.
    """
    configure_logging(verbose=bool(os.environ.get("TRTCONV_VERBOSE")))
    tensorflow_environment()  # before any command imports TensorFlow (and for its subprocesses)
    debug = os.environ.get("TRTCONV_DEBUG") == "1"
    try:
        with sigterm_as_interrupt():
            result = work()
    except TrtconvError as exc:
        if debug:
            traceback.print_exc()
        if exc.result is not None:
            emit_result(exc.result, json_mode, render)  # type: ignore[arg-type]
        # With a result on stdout, the error document would make it two: stderr only.
        emit_error(type(exc).__name__, str(exc), json_mode and exc.result is None)
        raise typer.Exit(exc.exit_code) from None
    except KeyboardInterrupt as interrupt:
        what = "terminated (SIGTERM)" if isinstance(interrupt, Terminated) else "interrupted"
        emit_error("Interrupted", f"{what}; nothing half-written was kept.", json_mode)
        raise typer.Exit(interrupt_exit_code(interrupt)) from None
    except Exception as exc:
        if debug:
            raise
        message = (
            f"internal error: {type(exc).__name__}: {exc} (set TRTCONV_DEBUG=1 for a traceback)"
        )
        emit_error("InternalError", message, json_mode)
        raise typer.Exit(1) from None
    emit_result(result, json_mode, render)
