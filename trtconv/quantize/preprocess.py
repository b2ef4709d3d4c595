"""The ONNX model made ready for ONNX Runtime's quantiser: shape inference (symbolic, in a child
process, else ONNX's own) and ORT's basic fusions, so that Q/DQ pairs are fewer and better
placed."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

from trtconv.core.errors import ConversionError, first_line

log = logging.getLogger(__name__)

PRE_PROCESS_TIMEOUT = 600  # seconds


def prepare_for_quantization(
    source: Path, output: Path, model_name: str | None = None
) -> tuple[Path, str]:
    """Shape inference and ORT's basic fusions (Conv+BN, ...): fewer, better-placed Q/DQ.

    Symbolic shape inference runs first, in a child process whose working directory is a
    temporary one: when it cannot resolve a dynamic dimension (text models with a dynamic
    sequence length) ONNX Runtime writes `sym_shape_infer_temp.onnx` and a data file into the
    working directory and raises. Then ONNX's own shape inference is used, which quantises every
    tensor whose shape it knows. Returns (prepared model, which inference ran).
    """
    from onnxruntime.quantization.shape_inference import quant_pre_process

    command = [sys.executable, "-c", _PRE_PROCESS, str(source), str(output)]
    try:
        done = subprocess.run(
            command, cwd=output.parent, capture_output=True, text=True, timeout=PRE_PROCESS_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        done = None
    if done is not None and done.returncode == 0 and output.is_file():
        return output, "symbolic"
    reason = _last_line(done.stderr) if done is not None else "timed out"
    log.info("symbolic shape inference failed (%s); using ONNX shape inference", reason)
    try:
        quant_pre_process(str(source), str(output), skip_symbolic_shape=True)
    except Exception as exc:
        message = f"INT8 pre-processing of {model_name or source} failed: {first_line(exc)}"
        raise ConversionError(message) from exc
    return output, f"onnx (symbolic: {reason})"


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no message"


# Child process of prepare_for_quantization: argv = [source, output].
_PRE_PROCESS = (
    "import sys\n"
    "from onnxruntime.quantization.shape_inference import quant_pre_process\n"
    "quant_pre_process(sys.argv[1], sys.argv[2])\n"
)
