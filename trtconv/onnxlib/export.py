"""SavedModel -> ONNX with tf2onnx, then checked against TensorFlow before anything uses it.

tf2onnx runs in a subprocess (tf2onnx.convert's command line, `--saved-model`, started through
`trtconv.onnxlib.tf2onnx_cli`, which skips Keras' optional imports): on ResNet-50 it takes
about a minute and peaks at 7-10 GB, memory the parent process gets back when the child exits.
`from_function(signatures['serving_default'])` fails in tf2onnx 1.17 (measured here:
it cannot trace the loaded signature), the CLI path does not.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trtconv.core.errors import ConversionError, first_line, itemised
from trtconv.core.lazy import TF_LOG_LEVEL, require
from trtconv.core.model_io import ModelSignature
from trtconv.core.precision import Precision
from trtconv.core.results import JsonResult, optional_key
from trtconv.onnxlib import tf_equivalents
from trtconv.onnxlib.frozen_graph import FixedValues, exportable
from trtconv.onnxlib.session import CPU, OrtRunner
from trtconv.outputs.compare import compare, run_batched
from trtconv.outputs.contract import resolve
from trtconv.outputs.tolerance import Tolerance
from trtconv.outputs.validation_result import ValidationReport

log = logging.getLogger(__name__)

OPSET = 17
BATCH_DIM = "batch"
EXPORT_TIMEOUT_S = 1800
# An ONNX model is one protobuf, which stops at 2 GiB. tf2onnx's --large_model writes a zip
# with external data instead, but the ONNX files trtconv writes after the export (the ORT
# backend's optimised model, the Q/DQ models, the payload copies) are single files: above this
# size an ONNX-based backend refuses before any work and names --backend openvino.
ONNX_SIZE_LIMIT_BYTES = 2 * 1024**3
# The module the export process runs: tf2onnx.convert's command line (see its docstring).
TF2ONNX_CLI = "trtconv.onnxlib.tf2onnx_cli"


def export_onnx(
    saved_model: Path,
    output: Path,
    signature: ModelSignature,
    opset: int = OPSET,
    timeout_s: float = EXPORT_TIMEOUT_S,
    fixed: FixedValues | None = None,
) -> OnnxExport:
    """Export `saved_model`'s `signature` (by its name) to `output` (opset, the signature's
    batch, names kept); the scalar inputs `fixed` names have one value for the whole run, and
    a v1 SavedModel has them folded in (trtconv.onnxlib.frozen_graph).

    Returns what was exported (unchecked: `check` None). Raises ConversionError when tf2onnx
    fails or the ONNX model's inputs/outputs do not match `signature`.
    """
    require("tf2onnx")  # fail with an install hint here, not as a subprocess traceback
    with exportable(saved_model, fixed) as source:  # a v1 SavedModel: frozen, values folded
        folded = source.folded.values
        export = _export(saved_model, source.path, output, signature, opset, timeout_s, folded)
    return replace(export, folded_inputs=dict(folded)) if folded else export


def _export(
    saved_model: Path,
    source: Path,
    output: Path,
    signature: ModelSignature,
    opset: int,
    timeout_s: float,
    folded: Mapping[str, bool | int | float],
) -> OnnxExport:
    """tf2onnx's export of `source` (`saved_model` or its exportable copy, with the inputs
    `folded` folded to their values) in a subprocess: whatever stops it, a fatal check inside
    TensorFlow included, ends that process only and is said in one sentence."""
    command = [
        sys.executable,
        "-m",
        TF2ONNX_CLI,
        "--saved-model",
        str(source),
        "--signature_def",
        signature.name,
        "--opset",
        str(opset),
        "--output",
        str(output),
    ]
    env = {**os.environ}
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", TF_LOG_LEVEL)
    log.info(
        "exporting %s (signature %s) to ONNX (tf2onnx, opset %d)",
        saved_model,
        signature.name,
        opset,
    )
    started = time.perf_counter()
    completed = _run_export(command, env, saved_model, timeout_s)
    seconds = time.perf_counter() - started
    unconverted = tf_equivalents.unsupported_ops(completed.stderr)
    if unconverted:
        raise ConversionError(
            f"tf2onnx could not export {saved_model} to ONNX: it has no conversion for the "
            f"TensorFlow op(s) {tf_equivalents.unsupported_text(unconverted)}, and ONNX no "
            "operator that computes them"
        )
    if completed.returncode != 0 or not output.is_file():
        raise ConversionError(
            f"tf2onnx could not export {saved_model} to ONNX{_folded_words(folded)}: "
            f"{_last_error(completed.stderr)}"
        )
    try:
        nodes = finalize_onnx(output, signature)
    except InvalidOnnx as exc:
        raise ConversionError(
            f"tf2onnx could not export {saved_model} to a valid ONNX model: {exc}"
        ) from exc
    size = output.stat().st_size
    return OnnxExport(opset=opset, seconds=round(seconds, 3), nodes=nodes, size_bytes=size)


def _run_export(
    command: list[str], env: dict[str, str], saved_model: Path, timeout_s: float
) -> subprocess.CompletedProcess[str]:
    """tf2onnx's process, run to its end; ConversionError when it outlives `timeout_s`."""
    try:
        return subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ConversionError(
            f"tf2onnx did not finish exporting {saved_model} within {timeout_s:.0f} s."
        ) from exc


@dataclass(frozen=True)
class ExportCheck:
    """The export checked against TensorFlow's outputs: on how many held-out samples, each
    output's largest absolute error, and the top-1 agreement (None: no class output)."""

    samples: int
    max_abs_error: dict[str, float | None]
    top1_agreement: float | None

    @classmethod
    def of(cls, report: ValidationReport) -> ExportCheck:
        """The check `verify_export`'s report describes."""
        errors = {name: output.max_abs_error for name, output in report.outputs.items()}
        return cls(report.samples, errors, report.top1_agreement)


@dataclass(frozen=True, kw_only=True)
class OnnxExport(JsonResult):
    """The ONNX export (a manifest's `conversion_summary.onnx_export`): the exporter and opset,
    how long it took, the graph's node count and file size, its check against TensorFlow
    (None until checked; the key is absent then), and the scalar inputs folded to their one
    value (the key only when some was: the ONNX model keeps the input and ignores it)."""

    exporter: str = "tf2onnx"
    opset: int
    seconds: float
    nodes: int
    size_bytes: int
    check: ExportCheck | None = optional_key()
    folded_inputs: dict[str, bool | int | float] | None = optional_key()


def _folded_words(folded: Mapping[str, bool | int | float]) -> str:
    """' with is_training folded to false' (nothing when nothing was folded)."""
    values = ", ".join(f"{name} folded to {str(value).lower()}" for name, value in folded.items())
    return f" with {values}" if values else ""


# TensorFlow's log lines: absl's since 2.18 ('F0000 00:00:1795913187.008172    5445
# graph_view.h:334] text'), its own before ('2026-11-29 00:51:01.440975: F
# tensorflow/core/grappler/graph_view.h:334] text'). An F line is a fatal check that aborts the
# process; I and W lines are chatter (oneDNN's notice speaks of "round-off errors").
TF_LOG_LINE = re.compile(
    r"^(?:(?P<absl>[IWEF])\d{4} [\d:.]+\s+\d+|\d{4}-\d\d-\d\d [\d:.]+: (?P<own>[IWEF])) "
    r"[^\]]+\] (?P<text>.*)$"
)


def _logged(line: str) -> tuple[str, str] | None:
    """(level, text) of one of TensorFlow's log lines; None for any other line."""
    match = TF_LOG_LINE.match(line)
    if match is None:
        return None
    absl, own, text = match.group("absl", "own", "text")
    return absl or own, text


def _last_error(stderr: str) -> str:
    """The most telling line of a tf2onnx failure: the fatal check that stopped TensorFlow,
    else the last error-looking line that is not TensorFlow's chatter."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    logged = {line: found for line in lines if (found := _logged(line))}
    fatal = [text for level, text in logged.values() if level == "F"]
    if fatal:
        return f"TensorFlow stopped the export process: {fatal[-1][:300]}"
    chatter = {line for line, (level, _) in logged.items() if level in "IW"}
    for line in reversed(lines):
        if line not in chatter and ("Error" in line or "error" in line):
            return line[:300]
    return lines[-1][:300] if lines else "no output"


class InvalidOnnx(Exception):
    """A model the ONNX checker refuses (its message)."""


def finalize_onnx(path: Path, signature: ModelSignature) -> int:
    """Name the dynamic batch dimension, check names against `signature`, run the ONNX checker.

    Returns the node count. Raises ConversionError naming the mismatch, InvalidOnnx with the
    checker's first line when the model is not valid ONNX: its full check, with type and shape
    inference, which finds what the plain check passes and ONNX Runtime would refuse to load
    (TensorFlow 2.21's bfloat16 casts exported as float16 beside bfloat16 weights).
    """
    onnx = require("onnx")
    model = onnx.load(str(path))
    graph_inputs = [value.name for value in model.graph.input]
    graph_outputs = [value.name for value in model.graph.output]
    if sorted(graph_inputs) != sorted(signature.input_names) or sorted(graph_outputs) != sorted(
        signature.output_names
    ):
        raise ConversionError(
            f"ONNX export {path} has inputs {graph_inputs} and outputs {graph_outputs}; the "
            f"SavedModel signature has {signature.input_names} and {signature.output_names}."
        )
    # tf2onnx names the dynamic batch "unk__NN"; one stable name lets TensorRT profiles and
    # readers of the model refer to it.
    for value in [*model.graph.input, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_param = BATCH_DIM
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        raise InvalidOnnx(first_line(exc)) from exc
    onnx.save(model, str(path))
    return len(model.graph.node)


def verify_export(
    onnx_path: Path,
    data: Any,
    reference_outputs: dict[str, Any],
    roles: dict[str, Any] | None = None,
    tolerance: Tolerance | None = None,
    source: Path | None = None,
) -> ValidationReport:
    """Run the ONNX model (ORT CPU, fp32) on `data` and compare with TensorFlow's outputs,
    each judged by its role (default: inferred from the values) at `tolerance` (default: the
    fp32 one; each output at least at its own dtype's resolution, see outputs.tolerance).

    Returns the validation report; raises ConversionError naming `source` (the user's model;
    default the ONNX file) when the export is outside the tolerance (a wrong export must never
    reach quantisation or TensorRT).
    """

    with OrtRunner(onnx_path, providers=[CPU]) as runner:
        candidate = run_batched(runner, data)
    # A check of the exporter on every sample, not a statistical verdict (that is the artifact's
    # validation): point decisions, or a few hundred identical samples would be "inconclusive"
    # against fp32's 0.99 agreement.
    exact = replace(tolerance or resolve(Precision.FP32).tolerance, confidence=0.0)
    report = compare(
        reference_outputs, candidate, exact, data.labels, data.source, roles, feeds=data.inputs
    )
    if not report.passed:
        what = f"The ONNX export of {source}" if source else f"ONNX export {onnx_path}"
        raise ConversionError(
            itemised(
                f"{what} disagrees with TensorFlow on {report.samples} samples (a looser bound "
                "is --tolerance X[,R] for every output, or --tolerance NAME=X[,R])",
                report.failure_lines(),
            )
        )
    log.info("ONNX export matches TensorFlow on %d samples", report.samples)
    return report


def op_counts(path: Path) -> dict[str, int]:
    """How many nodes of each op type the ONNX model holds (sorted by type)."""
    onnx = require("onnx")
    model = onnx.load(str(path), load_external_data=False)
    return dict(sorted(Counter(node.op_type for node in model.graph.node).items()))


def to_float16(source: Path, output: Path) -> None:
    """A plain fp16 copy of `source` at `output`: float16 weights and compute everywhere,
    float32 inputs and outputs (casts at the edges). Backends build the mixed copy instead
    (trtconv.onnxlib.fp16_model), which keeps the nodes float16 breaks in float32.

    Raises MissingDependencyError (exit 3, with the install hint) without onnx or onnxruntime.
    """
    onnx = require("onnx")
    float16 = require("onnxruntime.transformers.float16")
    model = float16.convert_float_to_float16(onnx.load(str(source)), keep_io_types=True)
    onnx.save(model, str(output))
