"""ONNX Runtime's quantiser talks on stdout and through the root logger: while it runs, what it
says goes to trtconv's debug log, so stdout stays the result (--json) and stderr stays trtconv's."""

from __future__ import annotations

import contextlib
import io
import logging
from collections.abc import Iterator

log = logging.getLogger(__name__)


@contextlib.contextmanager
def onnxruntime_chatter() -> Iterator[None]:
    """Keep ONNX Runtime's quantiser output off stdout (the result, with --json) and its
    root-logger warnings off stderr: both go to trtconv's debug log instead."""
    stdout = io.StringIO()
    handler = _DebugHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with contextlib.redirect_stdout(stdout):
            yield
    finally:
        root.removeHandler(handler)
        if stdout.getvalue().strip():
            log.debug("onnxruntime: %s", stdout.getvalue().strip())


class _DebugHandler(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        log.debug("onnxruntime: %s", record.getMessage())
