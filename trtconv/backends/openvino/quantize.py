"""INT8 for OpenVINO: NNCF post-training quantisation from trtconv's calibration feed.

NNCF inserts FakeQuantize operations (8-bit activations and weights); OpenVINO's CPU plugin runs
the quantised convolutions and matmuls as int8 kernels. The choices trtconv makes for ONNX
Runtime's U8S8 Q/DQ hold here too, because the CPU kernels are the same kind:

- on x86 without VNNI, u8 x s8 pairs are summed in saturating int16 (`vpmaddubsw`), so weights
  must leave headroom: NNCF's `overflow_fix` ("enable": 7-bit weights everywhere) is what
  ONNX Runtime's `reduce_range` is; with VNNI/AMX the full range is exact ("disable");
- nodes kept in float go to NNCF's `ignored_scope`;
- when int8 misses the accuracy budget, NNCF's own accuracy control
  (`quantize_with_accuracy_control`) keeps the most damaging operations in float
  (trtconv.backends.openvino.ladder).

NNCF is otherwise left at its defaults (preset, range estimators, fast bias correction): they are
what OpenVINO users get, and what trtconv's int8 is compared against.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trtconv.core.errors import ConversionError
from trtconv.core.lazy import require
from trtconv.core.model_io import CalibrationFeed, Feeds, samples_in
from trtconv.core.results import JsonResult, optional_key
from trtconv.quantize.isa import CPU_SCHEME, WeightChoice
from trtconv.quantize.ladder_result import NncfLadderRecord

log = logging.getLogger(__name__)

# NNCF's own name for how a model's weights are quantised on x86 CPUs without VNNI.
OVERFLOW_FIX = {True: "enable", False: "disable"}


@dataclass(frozen=True)
class NncfOptions:
    """How NNCF quantises: 7-bit weights (`reduce_range`) and the nodes kept in float."""

    reduce_range: bool = False
    ignored_nodes: tuple[str, ...] = ()

    @property
    def overflow_fix(self) -> str:
        """NNCF's `OverflowFix` value for this weight range."""
        return OVERFLOW_FIX[self.reduce_range]


@dataclass(frozen=True, kw_only=True)
class NncfSummary(JsonResult):
    """An OpenVINO int8 model's `quantization` block: NNCF's settings and what it quantised,
    the precision the artifact must run in when ops are kept in float, the ladder's record
    (None: the ladder was off) and the weight range chosen for where it will run."""

    tool: str = "nncf"
    nncf_version: str
    # uint8 activations (after ReLU) x int8 weights on the CPU's int8 kernels: the same class as
    # ONNX Runtime's U8S8, with the same saturation without VNNI.
    scheme: str = CPU_SCHEME
    format: str = "FakeQuantize (NNCF defaults: min/max ranges, fast bias correction)"
    samples: int
    batches: int
    overflow_fix: str
    reduce_range: bool
    float_nodes: list[str] = field(default_factory=list)
    int8_weight_ops: int
    float_weight_ops: list[str] = field(default_factory=list)
    quantize_seconds: float
    inference_precision: str | None = optional_key()
    ladder: NncfLadderRecord | None = None
    int8_target: str | None = None
    weight_range_reason: str | None = None
    converted_on_cpu_class: str | None = None

    def with_weights(self, choice: WeightChoice) -> NncfSummary:
        """This block with the weight range chosen for where it will run."""
        return replace(
            self,
            int8_target=choice.int8_target,
            weight_range_reason=choice.weight_range_reason,
            converted_on_cpu_class=choice.converted_on_cpu_class,
        )


def quantize_model(
    model: Any, feed: CalibrationFeed, options: NncfOptions
) -> tuple[Any, NncfSummary]:
    """(the quantised `ov.Model`, the quantisation summary) for `model` calibrated on `feed`.

    Every batch of `feed` is used once. Raises ConversionError when the feed is empty or NNCF
    fails.
    """
    nncf = require("nncf")
    batches = _batches(feed)
    started = time.perf_counter()
    try:
        with nncf_on_stderr():
            quantized = nncf.quantize(
                model,
                nncf.Dataset(batches),
                subset_size=len(batches),
                ignored_scope=_ignored_scope(nncf, options.ignored_nodes),
                advanced_parameters=_advanced(nncf, options),
            )
    except Exception as exc:
        raise ConversionError(f"NNCF could not quantise the model: {exc}") from exc
    return quantized, _summary(quantized, batches, options, started)


class StopAccuracyControl(Exception):
    """Raised by an AccuracyControl metric to stop NNCF's search (e.g. its time is up)."""


@dataclass(frozen=True)
class AccuracyControl:
    """What `nncf.quantize_with_accuracy_control` validates on and how far it may go.

    `items` are the validation data items; `transform` turns one into the model's feeds;
    `metric(compiled_model, items)` is (the metric, its value per item), higher is better.
    NNCF reverts the quantised operations that cost the most metric to float, one group per
    iteration, until the metric has dropped by at most `max_drop` (absolute) from the float
    model's or `max_iterations` groups are reverted; `ranking_items` rank the groups.
    """

    items: list[Any]
    transform: Callable[[Any], Feeds]
    metric: Callable[[Any, Iterable[Any]], tuple[float, list[float]]]
    max_drop: float
    max_iterations: int
    ranking_items: int


def quantize_with_accuracy_control(
    model: Any, feed: CalibrationFeed, options: NncfOptions, control: AccuracyControl
) -> tuple[Any, NncfSummary]:
    """(the `ov.Model` NNCF's accuracy control settled on, its quantisation summary): `model`
    quantised as `quantize_model` does, then its most damaging quantised operations kept in
    float as `control` bounds it. Raises StopAccuracyControl when `control.metric` does (a
    caller's deadline), ConversionError when NNCF fails."""
    nncf = require("nncf")
    batches = _batches(feed)
    restorer = nncf.AdvancedAccuracyRestorerParameters(
        max_num_iterations=control.max_iterations,
        ranking_subset_size=control.ranking_items,
        num_ranking_workers=1,  # one compile at a time: OpenVINO already uses every core
    )
    started = time.perf_counter()
    try:
        with nncf_on_stderr():
            quantized = nncf.quantize_with_accuracy_control(
                model,
                nncf.Dataset(batches),
                nncf.Dataset(control.items, control.transform),
                control.metric,
                max_drop=control.max_drop,
                drop_type=nncf.DropType.ABSOLUTE,
                subset_size=len(batches),
                ignored_scope=_ignored_scope(nncf, options.ignored_nodes),
                advanced_quantization_parameters=_advanced(nncf, options),
                advanced_accuracy_restorer_parameters=restorer,
            )
    except StopAccuracyControl:
        raise
    except Exception as exc:
        raise ConversionError(f"NNCF accuracy control failed: {exc}") from exc
    return quantized, _summary(quantized, batches, options, started)


def _batches(feed: CalibrationFeed) -> list[Feeds]:
    """Every calibration batch of `feed`; ConversionError when there is none."""
    batches = list(feed())
    if not batches:
        raise ConversionError("NNCF quantisation needs calibration data; the feed was empty.")
    return batches


def _advanced(nncf: Any, options: NncfOptions) -> Any:
    return nncf.AdvancedQuantizationParameters(overflow_fix=nncf.OverflowFix(options.overflow_fix))


def _summary(
    quantized: Any, batches: list[Feeds], options: NncfOptions, started: float
) -> NncfSummary:
    """The quantisation summary of `quantized`, calibrated on `batches` from `started` on."""
    nncf = require("nncf")
    weighted = weighted_ops(quantized)
    return NncfSummary(
        nncf_version=nncf.__version__,
        samples=sum(samples_in(batch) for batch in batches),
        batches=len(batches),
        overflow_fix=options.overflow_fix,
        reduce_range=options.reduce_range,
        float_nodes=list(options.ignored_nodes),
        int8_weight_ops=sum(weighted.values()),
        float_weight_ops=sorted(name for name, int8 in weighted.items() if not int8),
        quantize_seconds=round(time.perf_counter() - started, 3),
    )


def _ignored_scope(nncf: Any, names: Sequence[str]) -> Any:
    return nncf.IgnoredScope(names=list(names)) if names else None


# Operations with weights: NNCF stores their weights as int8 constants when it quantises them.
WEIGHTED_OPS = ("Convolution", "GroupConvolution", "MatMul", "ConvolutionBackpropData")
# What NNCF puts between an int8 weight constant and the operation (dequantisation, layout).
WEIGHT_PATH_OPS = ("Convert", "Multiply", "Subtract", "Reshape", "Transpose")


def weighted_ops(model: Any) -> dict[str, bool]:
    """{name: its weights are stored in int8} for every convolution and matmul of `model`."""
    return {
        op.get_friendly_name(): _int8_weights(op.input(1).get_source_output().get_node())
        for op in model.get_ordered_ops()
        if op.get_type_name() in WEIGHTED_OPS
    }


def _int8_weights(node: Any) -> bool:
    """True when `node` reaches an 8-bit integer Constant through dequantisation ops only."""
    while node.get_type_name() in WEIGHT_PATH_OPS:
        node = node.input(0).get_source_output().get_node()
    return node.get_type_name() == "Constant" and node.get_element_type().to_string() in (
        "i8",
        "u8",
    )


@contextlib.contextmanager
def nncf_on_stderr() -> Iterator[None]:
    """NNCF writes its log and progress bars to stdout; `--json` owns stdout, so move them.

    Its logger's handler holds the stdout stream it was created with, so that handler is pointed
    at stderr too, and restored afterwards. Its INFO lines (`INFO:nncf:...`, between trtconv's
    own) are kept out unless TRTCONV_VERBOSE asks for them; its warnings stay.
    """
    nncf_log = logging.getLogger("nncf")
    level = nncf_log.level
    if not os.environ.get("TRTCONV_VERBOSE"):
        nncf_log.setLevel(max(level, logging.WARNING))
    moved = []
    for handler in nncf_log.handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream in (
            sys.stdout,
            sys.__stdout__,
        ):
            moved.append((handler, handler.stream))
            handler.setStream(sys.stderr)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        nncf_log.setLevel(level)
        for handler, stream in moved:
            handler.setStream(stream)
