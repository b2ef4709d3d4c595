"""The `trtconv` command line: one module per command, wired together in trtconv.cli.root.

`app` and `main` load from trtconv.cli.root on first access, so that a process that imports
only one module of this package (the bench worker, `python -m trtconv.cli.bench_worker`) does not
pay for typer, rich and the root app.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtconv.cli.root import app, main

__all__ = ["app", "main"]
ROOT = "trtconv.cli.root"


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(ROOT), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
