"""Which nodes of a float32 ONNX model must stay float32 in its float16 copy, measured on data.

Every tensor of the float32 model is compared with the same tensor of the faithful float16
emulation (trtconv.onnxlib.fp16) on the analysis samples. Four rules keep a node in float32,
the first three decided on the float32 values alone:

- range: the node reads or writes a tensor whose largest |x| on the analysis data exceeds
  RANGE_LIMIT, an eighth of float16's largest value 65504 (headroom for inputs larger than the
  analysis data's). Every reader is kept, not only the producer: a float16 node reading a
  float32 tensor casts it to float16 first, which would overflow it there. So the overflowing
  layer and the normalisation that consumes it (LayerNormalization's mean, variance and scaling)
  compute in float32, and float16 resumes where the values are small again.
- underflow: a node that reads values one by one at their own scale (Log, Div's divisor,
  Reciprocal, Sqrt, Pow's base, the normalisation ops: SCALE_SENSITIVE) reading a small tensor:
  more than SMALL_SHARE of its nonzero values on the analysis data lie below float16's smallest
  normal value FLOAT16_TINY (2^-14, about 6.1e-5), where float16 keeps fewer significant bits
  (1e-6 is 1.3% off, 2e-8 becomes 0). Log turns such an error into an absolute one, a division
  or a square root passes it on at full size. The node is kept with the producers of its small
  inputs, and theirs, back to where the values are normal again (log(|stft|^2 + 1e-8) keeps the
  Log, the Add, the square and the transform that makes the small magnitudes; a normalisation
  of small values keeps its square root, mean of squares and squares; a softmax written out
  over large negative logits keeps the division, the sum and the Exp).
- cancellation: an Add or Sub whose largest input is more than CANCELLATION_LIMIT times the
  size of its output (root mean squares on the analysis data): float16's rounding of the
  inputs (up to 2^-11 of them) becomes that many times larger a part of the result (log
  magnitudes near -16 centred to about 1, x - mean of values with a large offset). The node is
  kept with the producers of its inputs, and theirs, back to where the values are no longer
  that large against its output.
- loss: in the emulation of the model with the other rules' nodes kept, a float16 node whose
  output's relative error against float32 (the L2 norm of the difference over the L2 norm of the
  float32 values) exceeds LOSS_LIMIT (1%, twenty times float16's rounding of one value) and
  LOSS_GROWTH (4) times its inputs' worst: a node that makes the error, by cancellation the sizes
  of the values do not show, or overflow, rather than passing on what it was given. It is kept
  with the producers of its inputs (so it reads float32 values) and the model is measured again,
  at most LOSS_ROUNDS times. Float16 rounding alone leaves each tensor about 5e-4 off.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from trtconv.core.lazy import require
from trtconv.core.model_io import Feeds, samples_in
from trtconv.onnxlib.fp16 import emulate_float16, emulation_session, tensor_types, to_mixed_float16
from trtconv.onnxlib.fp16_result import OutputError

FLOAT16_MAX = 65504.0
RANGE_HEADROOM = 8.0
RANGE_LIMIT = FLOAT16_MAX / RANGE_HEADROOM
LOSS_LIMIT = 0.01
LOSS_GROWTH = 4.0
LOSS_ROUNDS = 3
FLOAT16_TINY = 2.0**-14  # float16's smallest normal value, about 6.1e-5
SMALL_SHARE = 0.01
CANCELLATION_LIMIT = 8.0
CANCELLING = ("Add", "Sub")
# The inputs that a node of each op type reads value by value at their own scale, so that
# float16's loss of precision below FLOAT16_TINY reaches its output in full.
SCALE_SENSITIVE: dict[str, tuple[int, ...]] = {
    "Log": (0,),
    "Div": (1,),
    "Reciprocal": (0,),
    "Sqrt": (0,),
    "Pow": (0,),
    "ReduceLogSum": (0,),
    "ReduceL2": (0,),
    "LpNormalization": (0,),
    "LayerNormalization": (0,),
    "InstanceNormalization": (0,),
    "GroupNormalization": (0,),
    "MeanVarianceNormalization": (0,),
    "RMSNormalization": (0,),
}


@dataclass
class TensorStats:
    """One tensor compared between the float32 model and a float16 emulation: the float32
    values' largest |x|, the squared L2 norms of the difference and of the float32 values, the
    emulated values not finite where float32's are, for [N, classes] tensors the rows whose
    argmax agrees, and the float32 values that are nonzero and those of them below
    FLOAT16_TINY."""

    max_abs: float = 0.0
    count: int = 0
    sum_squares: float = 0.0
    nonzero: int = 0
    tiny: int = 0
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
            magnitude = np.abs(reference)
            self.max_abs = max(self.max_abs, float(np.nanmax(magnitude)))
            finite = magnitude[np.isfinite(magnitude)]
            self.count += finite.size
            self.sum_squares += float(np.square(finite).sum())
            self.nonzero += int((magnitude > 0).sum())
            self.tiny += int(((magnitude > 0) & (magnitude < FLOAT16_TINY)).sum())
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
    def rms(self) -> float:
        """The root mean square of the finite float32 values."""
        return math.sqrt(self.sum_squares / self.count) if self.count else 0.0

    @property
    def tiny_share(self) -> float:
        """The share of the nonzero float32 values below float16's smallest normal value."""
        return self.tiny / self.nonzero if self.nonzero else 0.0

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


def underflow_rule(
    model: Any, stats: dict[str, TensorStats], kept: Iterable[str]
) -> dict[str, str]:
    """{node name: why} for the nodes of SCALE_SENSITIVE op types reading a small tensor (more
    than SMALL_SHARE of its nonzero values below FLOAT16_TINY) and the producers of their small
    inputs, walked back to where the values are normal again; nodes already `kept` are left
    out."""
    kept = set(kept)
    producer = {output: node for node in model.graph.node for output in node.output}
    found: dict[str, str] = {}
    for node in model.graph.node:
        reads = [
            node.input[i] for i in SCALE_SENSITIVE.get(node.op_type, ()) if i < len(node.input)
        ]
        small = [name for name in reads if _is_small(stats, name)]
        if node.name in kept or node.name in found or not small:
            continue
        share = stats[small[0]].tiny_share
        found[node.name] = f"underflow: {share:.0%} of its input below {FLOAT16_TINY:.2g}"
        why = f"underflow: feeds {node.name} values below {FLOAT16_TINY:.2g}"
        _walk_back(node, lambda name: _is_small(stats, name), producer, kept, found, why)
    return found


def cancellation_rule(
    model: Any, stats: dict[str, TensorStats], kept: Iterable[str]
) -> dict[str, str]:
    """{node name: why} for the Add and Sub nodes whose largest input is more than
    CANCELLATION_LIMIT times the size (root mean square) of their output, and the producers of
    their inputs back to where the values are no longer that large; `kept` nodes are left out."""
    kept = set(kept)
    producer = {output: node for node in model.graph.node for output in node.output}
    found: dict[str, str] = {}
    for node in model.graph.node:
        if node.op_type not in CANCELLING or node.name in kept or node.name in found:
            continue
        size = _rms(stats, node.output[0])
        largest = max((_rms(stats, name) for name in node.input), default=0.0)
        if size == 0.0 or largest <= CANCELLATION_LIMIT * size:
            continue
        found[node.name] = f"cancellation: inputs {largest / size:.0f}x the size of its output"
        why = f"cancellation: feeds {node.name} values {CANCELLATION_LIMIT:g}x its output"
        large = functools.partial(_larger, stats, CANCELLATION_LIMIT * size)
        _walk_back(node, large, producer, kept, found, why)
    return found


def _walk_back(
    start: Any,
    follows: Callable[[str], bool],
    producer: dict[str, Any],
    kept: set[str],
    found: dict[str, str],
    why: str,
) -> None:
    """Add to `found` (as `why`) the producers of `start`'s inputs that `follows`, and theirs,
    transitively; kept nodes, Casts and graph inputs end the walk."""
    walk = [start]
    while walk:
        reader = walk.pop()
        for name in reader.input:
            source = producer.get(name)
            if (
                source is None
                or source.name in kept
                or source.name in found
                or source.op_type == "Cast"
                or not follows(name)
            ):
                continue
            found[source.name] = why
            walk.append(source)


def _larger(stats: dict[str, TensorStats], limit: float, name: str) -> bool:
    """Whether tensor `name`'s root mean square exceeds `limit`."""
    return _rms(stats, name) > limit


def _rms(stats: dict[str, TensorStats], name: str) -> float:
    """Tensor `name`'s root mean square on the analysis data (0 when not measured)."""
    return stats[name].rms if name in stats else 0.0


def _is_small(stats: dict[str, TensorStats], name: str) -> bool:
    """Whether more than SMALL_SHARE of tensor `name`'s nonzero values are below FLOAT16_TINY."""
    return name in stats and stats[name].tiny_share > SMALL_SHARE


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
        count = samples_in(feeds)
        for start in range(0, count, batch_size):
            if left <= 0:
                return
            end = start + min(batch_size, left)
            left -= min(batch_size, left, count - start)
            yield {name: array[start:end] if array.ndim else array for name, array in feeds.items()}


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
    range, underflow and cancellation rules' nodes, then add the loss rule's until it finds
    none (at most LOSS_ROUNDS)."""
    plain = measure(model, emulate_float16(to_mixed_float16(model)), batches)
    kept = range_rule(model, plain)
    kept.update(underflow_rule(model, plain, kept))
    kept.update(cancellation_rule(model, plain, kept))
    stats, measured, rounds = plain, frozenset[str](), 1
    while True:
        if set(kept) != measured:
            mixed = emulate_float16(to_mixed_float16(model, set(kept)))
            stats, measured, rounds = measure(model, mixed, batches), frozenset(kept), rounds + 1
        lossy = loss_rule(model, stats, kept) if rounds <= LOSS_ROUNDS else {}
        if not lossy:
            return Fp16Analysis(kept, plain, stats, rounds)
        kept.update(lossy)
