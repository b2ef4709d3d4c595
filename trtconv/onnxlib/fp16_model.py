"""The one entry point of mixed float16 for backends that build from ONNX (`ort` for the CUDA and
TensorRT providers, `trt` on TensorRT 11's strongly typed networks): the request's validated
float32 export with the nodes float16 breaks kept in float32 (trtconv.onnxlib.fp16_analysis,
measured on the calibration data), everything else float16, and the record of what was kept.

Conversions of one SavedModel (`convert --backend best`) share the analysis through the
request's `shared` dict: the nodes to keep are measured once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from trtconv.core.errors import ConversionError
from trtconv.core.lazy import require
from trtconv.core.model_io import samples_in
from trtconv.onnxlib.fp16 import CONTROL_FLOW, load_model, to_mixed_float16
from trtconv.onnxlib.fp16_analysis import (
    CANCELLATION_LIMIT,
    FLOAT16_TINY,
    LOSS_GROWTH,
    LOSS_LIMIT,
    RANGE_LIMIT,
    SMALL_SHARE,
    Fp16Analysis,
    analyse,
    analysis_batches,
)
from trtconv.onnxlib.fp16_result import EmulatedOutputs, Fp16Summary, KeptNode
from trtconv.onnxlib.tf_names import tf_origin
from trtconv.protocol.request import ConversionRequest

log = logging.getLogger(__name__)

SHARED_KEY = "fp16 analyses"
# The calibration samples the analysis measures on, in batches of at most ANALYSIS_BATCH (every
# tensor of a batch is held at once).
ANALYSIS_SAMPLES = 256
ANALYSIS_BATCH = 16
RULE = (
    f"float32 for every node that reads or writes |x| > {RANGE_LIMIT:g} (float16's 65504 / 8) on "
    f"the analysis data; for every Log, division, Reciprocal, Sqrt, Pow or normalisation "
    f"reading a tensor of which more than {SMALL_SHARE:.0%} of the nonzero values are below "
    f"{FLOAT16_TINY:.3g} (float16's smallest normal), with the producers of those small values "
    f"back to where they are normal; for every Add or Sub whose largest input is more than "
    f"{CANCELLATION_LIMIT:g}x its output (root mean square), with its inputs' producers back to "
    "where they are no longer that large; for every node whose float16 output is more than "
    f"{LOSS_LIMIT:g} off float32 (relative L2) and {LOSS_GROWTH:g}x its inputs' error, with its "
    "inputs' producers; float16 elsewhere"
)


def fp16_model(request: ConversionRequest, output: Path) -> Fp16Summary:
    """Write the mixed float16 model of the request's export to `output`; returns the summary's
    `fp16` block (see `fp16_summary`).

    Raises ConversionError without the export or calibration data, MissingDependencyError
    without onnx or onnxruntime.
    """
    if request.onnx_path is None or request.calibration is None:
        raise ConversionError("fp16 needs the ONNX export and calibration data in the request.")
    made = request.shared.setdefault(SHARED_KEY, {})
    key = str(request.onnx_path)
    if key not in made:
        started = time.perf_counter()
        model = load_model(request.onnx_path)
        batches = list(analysis_batches(request.calibration(), ANALYSIS_SAMPLES, ANALYSIS_BATCH))
        if not batches:
            raise ConversionError("fp16: the calibration data holds no samples to analyse.")
        analysis = _analysed(model, batches)
        made[key] = (analysis, fp16_summary(model, analysis, batches, started))
    analysis, summary = made[key]
    mixed = to_mixed_float16(load_model(request.onnx_path), set(analysis.kept))
    require("onnx").save(mixed, str(output))
    return replace(summary)  # a copy: a backend adds what validates its model


def _analysed(model: Any, batches: list[Any]) -> Fp16Analysis:
    """`analyse(model, batches)`; a graph with control flow (a TF1 `tf.cond` on a training flag
    becomes an ONNX If) that the float16 conversion leaves invalid is a ConversionError saying
    so, not an ONNX Runtime error."""
    flow = sorted({node.op_type for node in model.graph.node if node.op_type in CONTROL_FLOW})
    try:
        return analyse(model, batches)
    except Exception as exc:
        if not flow:
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise ConversionError(
            f"fp16: the float16 conversion of a graph with control flow ({', '.join(flow)}) is "
            f"not a valid model ({first}); fp32 and int8 convert it."
        ) from exc


def fp16_summary(
    model: Any, analysis: Fp16Analysis, batches: list[Any], started: float
) -> Fp16Summary:
    """The `fp16` block: the rule, what it measured on, the node counts (float16 / float32 and
    the float16 share), each node kept in float32 with its TensorFlow layer and why, and the
    outputs of the plain and the mixed float16 emulations against float32."""
    kept = kept_float32(model, analysis.kept)
    nodes = len(model.graph.node)
    outputs = [value.name for value in model.graph.output if value.name in analysis.plain]
    log.info("fp16: %d of %d nodes kept in float32", len(kept), nodes)
    emulated = EmulatedOutputs(
        {name: analysis.plain[name].summary() for name in outputs},
        {name: analysis.mixed[name].summary() for name in outputs},
    )
    return Fp16Summary(
        rule=RULE,
        range_limit=RANGE_LIMIT,
        loss_limit=LOSS_LIMIT,
        loss_growth=LOSS_GROWTH,
        tiny_limit=FLOAT16_TINY,
        small_share=SMALL_SHARE,
        cancellation_limit=CANCELLATION_LIMIT,
        analysis_samples=sum(samples_in(b) for b in batches),
        measurements=analysis.rounds,
        nodes=nodes,
        float16_nodes=nodes - len(kept),
        float32_nodes=len(kept),
        float16_share=round((nodes - len(kept)) / nodes, 4) if nodes else 0.0,
        kept_float32=kept,
        emulated_outputs=emulated,
        seconds=round(time.perf_counter() - started, 3),
    )


def kept_float32(model: Any, kept: dict[str, str]) -> list[KeptNode]:
    """The export's nodes that compute in float32, in graph order: those the analysis kept and
    those of op types the float16 conversion never converts, each {node, op_type, tf_op,
    tf_layer, why}."""
    float16 = require("onnxruntime.transformers.float16")
    by_type = {*float16.DEFAULT_OP_BLOCK_LIST, *CONTROL_FLOW}
    found = []
    for node in model.graph.node:
        why = kept.get(node.name) or ("op type left float32" if node.op_type in by_type else "")
        if why:
            tensors = (*node.input[1:], *node.output, *node.input[:1])
            origin = tf_origin(node.name, tensors)
            found.append(KeptNode(node.name, node.op_type, origin.tf_op, origin.tf_layer, why))
    return found
