"""Which nodes of a float32 ONNX model must stay float32 in its float16 copy, measured on data.

Every tensor of the float32 model is compared with the same tensor of the faithful float16
emulation (trtconv.onnxlib.fp16) on the analysis samples. Two rules keep a node in float32:

- range: the node reads or writes a tensor whose largest |x| on the analysis data exceeds
  RANGE_LIMIT, an eighth of float16's largest value 65504 (headroom for inputs larger than the
  analysis data's). Every reader is kept, not only the producer: a float16 node reading a
  float32 tensor casts it to float16 first, which would overflow it there. So the overflowing
  layer and the normalisation that consumes it (LayerNormalization's mean, variance and scaling)
  compute in float32, and float16 resumes where the values are small again.
- loss: in the emulation of the model with the range rule's nodes kept, a float16 node whose
  output's relative error against float32 (the L2 norm of the difference over the L2 norm of the
  float32 values) exceeds LOSS_LIMIT (1%, twenty times float16's rounding of one value) and
  LOSS_GROWTH (4) times its inputs' worst: a node that makes the error, by cancellation (x - mean
  of large, close values) or overflow, rather than passing on what it was given. It is kept
  with the producers of its inputs (so it reads float32 values) and the model is measured again,
  at most LOSS_ROUNDS times. Float16 rounding alone leaves each tensor about 5e-4 off.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from trtconv.core.lazy import require
from trtconv.core.model_io import Feeds
from trtconv.onnxlib.fp16 import emulate_float16, emulation_session, tensor_types, to_mixed_float16
from trtconv.onnxlib.fp16_record import OutputError

FLOAT16_MAX = 65504.0
RANGE_HEADROOM = 8.0
RANGE_LIMIT = FLOAT16_MAX / RANGE_HEADROOM
LOSS_LIMIT = 0.01
LOSS_GROWTH = 4.0
LOSS_ROUNDS = 3


@dataclass
class TensorStats:
    """One tensor compared between the float32 model and a float16 emulation: the float32
    values' largest |x|, the squared L2 norms of the difference and of the float32 values, the
    emulated values not finite where float32's are, and for [N, classes] tensors the rows whose
    argmax agrees."""

    max_abs: float = 0.0
    squared_error: float = 0.0
    squared_reference: float = 0.0
    max_abs_error: float = 0.0
    nonfinite: int = 0
    rows: int = 0
    top1_agree: int = 0

    def add(self, reference: np.ndarray, emulated: np.ndarray | None) -> None:
        """Accumulate one batch (`emulated` None: the float32 range only)."""
        reference = reference.astype(np.float64)
        if reference.size:
            self.max_abs = max(self.max_abs, float(np.nanmax(np.abs(reference))))
        if emulated is None:
            return
        emulated = emulated.astype(np.float64)
        finite = np.isfinite(reference)
        bad = finite & ~np.isfinite(emulated)
        self.nonfinite += int(bad.sum())
        good = finite & ~bad
        difference = np.abs(emulated[good] - reference[good])
        self.squared_error += float(np.square(difference).sum())
        self.squared_reference += float(np.square(reference[good]).sum())
        if difference.size:
            self.max_abs_error = max(self.max_abs_error, float(difference.max()))
        if reference.ndim == 2 and reference.shape[1] > 1:
            self.rows += len(reference)
            self.top1_agree += int((reference.argmax(1) == emulated.argmax(1)).sum())

    @property
    def relative_error(self) -> float:
        """||emulated - float32|| / ||float32|| (inf when a value overflowed or went NaN)."""
        if self.nonfinite:
            return math.inf
        if self.squared_reference == 0.0:
            return 0.0 if self.squared_error == 0.0 else math.inf
        return math.sqrt(self.squared_error / self.squared_reference)

    def summary(self) -> OutputError:
        """The record of these figures: JSON-safe (inf -> None), rounded."""
        relative = self.relative_error
        return OutputError(
            relative_error=None if math.isinf(relative) else round(relative, 6),
            max_abs_error=round(self.max_abs_error, 6),
            nonfinite=self.nonfinite,
            top1_agreement=round(self.top1_agree / self.rows, 4) if self.rows else None,
        )


def float_tensors(model: Any) -> list[str]:
    """The float32 tensors `model`'s nodes compute, in graph order."""
    float32 = require("onnx").TensorProto.FLOAT
    types = tensor_types(model)
    return [
        name
        for node in model.graph.node
        for name in node.output
        if name and types.get(name) == float32
    ]


def with_outputs(model: Any, names: Iterable[str]) -> Any:
    """A copy of `model` with each of `names` (float32 tensors) a graph output too."""
    onnx = require("onnx")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    present = {value.name for value in copy.graph.output}
    for name in names:
        if name not in present:
            copy.graph.output.append(
                onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
            )
    return copy


def measure(
    reference: Any, emulated: Any | None, batches: Iterable[Feeds]
) -> dict[str, TensorStats]:
    """Each float tensor of `reference` (the float32 model) on `batches`, compared with the
    tensor of the same name in `emulated` (a float16 emulation; None: ranges only), plus the
    graph inputs' ranges. Both run on the CPU with graph optimisations off."""
    names = float_tensors(reference)
    reference_run = emulation_session(with_outputs(reference, names))
    shared: list[str] = []
    emulated_run = None
    if emulated is not None:
        made = {name for node in emulated.graph.node for name in node.output}
        shared = [name for name in names if name in made]
        emulated_run = emulation_session(with_outputs(emulated, shared))
    stats: dict[str, TensorStats] = {}
    for feeds in batches:
        for name, array in feeds.items():
            if np.issubdtype(array.dtype, np.floating):
                stats.setdefault(name, TensorStats()).add(array, None)
        outputs = dict(zip(names, reference_run.run(names, feeds), strict=True))
        candidate = {}
        if emulated_run is not None:
            candidate = dict(zip(shared, emulated_run.run(shared, feeds), strict=True))
        for name in names:
            stats.setdefault(name, TensorStats()).add(outputs[name], candidate.get(name))
    return stats


def initializer_ranges(model: Any) -> dict[str, float]:
    """The largest |w| of each float32 initializer."""
    numpy_helper = require("onnx.numpy_helper")
    float32 = require("onnx").TensorProto.FLOAT
    return {
        init.name: float(np.abs(numpy_helper.to_array(init)).max(initial=0.0))
        for init in model.graph.initializer
        if init.data_type == float32
    }


def range_rule(model: Any, stats: dict[str, TensorStats]) -> dict[str, str]:
    """{node name: why} for every node reading or writing a tensor (initializers included)
    whose largest |x| exceeds RANGE_LIMIT."""
    ranges = {name: s.max_abs for name, s in stats.items()} | initializer_ranges(model)
    kept = {}
    for node in model.graph.node:
        touched = [ranges.get(name, 0.0) for name in [*node.input, *node.output] if name]
        largest = max(touched, default=0.0)
        if largest > RANGE_LIMIT:
            kept[node.name] = f"range: |x| up to {largest:.3g}"
    return kept


def loss_rule(model: Any, stats: dict[str, TensorStats], kept: Iterable[str]) -> dict[str, str]:
    """{node name: why} for the float16 nodes where the error starts (see the module docstring)
    and the producers of their inputs; nodes already `kept` are left out."""
    kept = set(kept)
    producer = {output: node for node in model.graph.node for output in node.output}
    found: dict[str, str] = {}
    for node in model.graph.node:
        if node.name in kept:
            continue
        after = _worst(stats, node.output)
        if after <= LOSS_LIMIT or after <= LOSS_GROWTH * _worst(stats, node.input):
            continue
        why = f"loss: relative error {after:.3g}" if math.isfinite(after) else "loss: overflow"
        found[node.name] = why
        for name in node.input:
            source = producer.get(name)
            if source is not None and source.name not in kept and source.op_type != "Cast":
                found.setdefault(source.name, f"feeds {node.name}")
    return found


def _worst(stats: dict[str, TensorStats], names: Iterable[str]) -> float:
    """The largest relative error among the measured `names` (0 when none is measured)."""
    errors = [stats[name].relative_error for name in names if name in stats]
    return max(errors, default=0.0)


def analysis_batches(feed: Iterable[Feeds], samples: int, batch_size: int) -> Iterator[Feeds]:
    """The first `samples` samples of `feed`'s batches, in batches of at most `batch_size`."""
    left = samples
    for feeds in feed:
        count = len(next(iter(feeds.values())))
        for start in range(0, count, batch_size):
            if left <= 0:
                return
            end = start + min(batch_size, left)
            left -= min(batch_size, left, count - start)
            yield {name: array[start:end] for name, array in feeds.items()}


@dataclass
class Fp16Analysis:
    """The nodes kept in float32 ({name: why}), and the measurements of the plain float16 copy's
    emulation and of the mixed model's (the last measured)."""

    kept: dict[str, str]
    plain: dict[str, TensorStats]
    mixed: dict[str, TensorStats]
    rounds: int


def analyse(model: Any, batches: list[Feeds]) -> Fp16Analysis:
    """Measure the plain float16 copy of `model` (float32 ModelProto) on `batches`, keep the
    range rule's nodes, then add the loss rule's until it finds none (at most LOSS_ROUNDS)."""
    plain = measure(model, emulate_float16(to_mixed_float16(model)), batches)
    kept = range_rule(model, plain)
    stats, measured, rounds = plain, frozenset[str](), 1
    while True:
        if set(kept) != measured:
            mixed = emulate_float16(to_mixed_float16(model, set(kept)))
            stats, measured, rounds = measure(model, mixed, batches), frozenset(kept), rounds + 1
        lossy = loss_rule(model, stats, kept) if rounds <= LOSS_ROUNDS else {}
        if not lossy:
            return Fp16Analysis(kept, plain, stats, rounds)
        kept.update(lossy)
