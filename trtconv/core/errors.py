"""Typed errors. Each carries its exit code; only `trtconv.cli` turns them into exits.

Exit codes (docs/architecture.md): 0 success, 1 known failure, 2 usage error, 3 missing
dependency or hardware, 4 a gate failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtconv.core.results import JsonResult


def itemised(sentence: str, items: list[str]) -> str:
    """An error about several things (outputs, checks): `sentence` with its one item on the same
    line, or, for several, `sentence` then one indented line per item, so that no line grows
    with the number of outputs. `sentence` ends without a full stop; the result has one."""
    if len(items) == 1:
        return f"{sentence}: {items[0]}."
    return f"{sentence}:" + "".join(f"\n  - {item}" for item in items)


def first_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (its type name when it has none), cut short."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]


class TrtconvError(Exception):
    """Base of every error trtconv reports to users with a one-sentence message.

    `result` is the command's full result when there is one to show despite the error (a gate
    that failed on measured figures); the CLI prints it as it would on success.
    """

    exit_code = 1
    result: JsonResult | dict[str, Any] | None = None


class UsageError(TrtconvError):
    """The command line or a config was wrong: unknown choice, bad value, existing output."""

    exit_code = 2


class InputError(TrtconvError):
    """A model or data file is missing, corrupt, or does not fit what was expected."""

    exit_code = 1


class ConversionError(TrtconvError):
    """A converter ran and failed."""

    exit_code = 1


class MissingDependencyError(TrtconvError):
    """A library or a device this step needs is absent (TensorRT, a GPU, ...)."""

    exit_code = 3


class GateError(TrtconvError):
    """A result fell outside a tolerance, speedup or latency budget; `result` holds all of it."""

    exit_code = 4

    def __init__(self, message: str, result: JsonResult | dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.result = result


class AccuracyError(GateError):
    """A converted model disagrees with the native one beyond the precision's tolerance."""


class ClusterError(TrtconvError):
    """A worker of a multi-worker run could not reach the others, or the cluster failed."""

    exit_code = 1
