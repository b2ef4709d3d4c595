"""The benchmark worker's process entry point: `python -m trtconv.cli.bench_worker SPEC.json`.

The harness (trtconv.bench.harness) starts one such process per model. Its stdout carries exactly
one JSON line (the measurements or an error); everything else goes to stderr.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import TextIO

from trtconv.bench.worker import run
from trtconv.core.errors import TrtconvError
from trtconv.core.lazy import tensorflow_environment


def _claim_stdout() -> TextIO:
    """Keep the real stdout for our one JSON line; send stray library prints to stderr."""
    sys.stdout.flush()
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return result


def _note(message: str) -> None:
    sys.stderr.write(f"worker: {message}\n")


def main(argv: list[str] | None = None) -> int:
    """Entry point: read the spec file, run, print one JSON line; the exit code says success."""
    args = sys.argv[1:] if argv is None else argv
    tensorflow_environment()
    out = _claim_stdout()
    try:
        spec = json.loads(Path(args[0]).read_text())
        document = run(spec, progress=_note)
        code = 0
    except TrtconvError as exc:
        document = {"error": {"type": type(exc).__name__, "message": str(exc)}}
        code = 1
    except Exception as exc:  # reported to the parent, which names the model
        traceback.print_exc(file=sys.stderr)
        document = {"error": {"type": "InternalError", "message": f"{type(exc).__name__}: {exc}"}}
        code = 1
    out.write(json.dumps(document) + "\n")
    out.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
