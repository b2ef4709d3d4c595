"""The benchmark worker's process entry point: `python -m trtconv.cli.bench_worker SPEC.json`.

The harness (trtconv.bench.harness) starts one such process per model. Its stdout carries JSON
lines only (the measurements or an error); everything else goes to stderr. With `--serve` the
worker keeps its model loaded and answers one request per stdin line (trtconv.bench.worker.serve)
until told to finish or stdin closes; without it, it times every batch size and prints one line.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import TextIO

from trtconv.bench.messages import ErrorInfo, WorkerFailure, WorkerSpec
from trtconv.bench.worker import run, serve
from trtconv.core.errors import TrtconvError
from trtconv.core.lazy import tensorflow_environment, without_keras_optional_imports
from trtconv.core.results import JsonResult

SERVE = "--serve"


def _claim_stdout() -> TextIO:
    """Keep the real stdout for our JSON lines; send stray library prints to stderr."""
    sys.stdout.flush()
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return result


def _note(message: str) -> None:
    sys.stderr.write(f"worker: {message}\n")


def main(argv: list[str] | None = None) -> int:
    """Entry point: read the spec file, run (or serve), print JSON lines; the exit code says
    success."""
    args = sys.argv[1:] if argv is None else argv
    tensorflow_environment()
    without_keras_optional_imports()  # a worker runs a model: it never plots nor fits
    out = _claim_stdout()

    def reply(message: JsonResult) -> None:
        out.write(json.dumps(message.to_json()) + "\n")
        out.flush()

    try:
        spec = WorkerSpec.load(Path(args[0]))
        if SERVE in args[1:]:
            serve(spec, sys.stdin, reply)
        else:
            reply(run(spec, progress=_note))
        return 0
    except TrtconvError as exc:
        reply(WorkerFailure(ErrorInfo(type(exc).__name__, str(exc))))
    except Exception as exc:  # reported to the parent, which names the model
        traceback.print_exc(file=sys.stderr)
        reply(WorkerFailure(ErrorInfo("InternalError", f"{type(exc).__name__}: {exc}")))
    return 1


if __name__ == "__main__":
    sys.exit(main())
