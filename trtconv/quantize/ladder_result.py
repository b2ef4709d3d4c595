"""The int8 precision ladder's record, typed: what it aimed for, where it scored, each step,
the choice, the nodes kept in float and the speed it timed.

Made by the ONNX Runtime ladder (trtconv.quantize.ladder) and OpenVINO's NNCF ladder
(trtconv.backends.openvino.ladder); read by `convert`'s and the release's reports. `to_json()` is
the `ladder` block of a manifest's `quantization` summary, `from_json()` reads one back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trtconv.core.results import JsonResult, optional_key
from trtconv.onnxlib.tf_names import TfOrigin


@dataclass(frozen=True)
class Budget:
    """What the ladder aimed for: the precision's tolerance (atol None: not judged by it)."""

    min_top1_agreement: float
    max_accuracy_drop: float
    atol: float | None


@dataclass(frozen=True)
class SearchData:
    """Where the steps were scored: `samples` of `part`, drawn from `drawn_from`, compared with
    `reference`; `note` when the slice cannot show the budget."""

    part: str
    samples: int
    drawn_from: str
    note: str | None
    reference: str


@dataclass(frozen=True)
class LadderStep:
    """One step: its stage, what changed, the nodes in float and its figures on the search slice
    (None: not scored, e.g. the sensitivity probe, or a step that did not finish)."""

    step: int
    stage: str
    change: str
    kept_float: int
    top1_agreement: float | None = None
    accuracy: float | None = None
    accuracy_drop: float | None = None
    output_error: float | None = None
    meets_budget: bool | None = None
    verdict: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class FloatNode:
    """A node kept in (or ranked for) float: its ONNX name and op type, the TensorFlow op and
    layer it came from, and its output error quantised alone (None: not measured)."""

    node: str
    op_type: str
    tf_op: str | None
    tf_layer: str | None
    output_error: float | None


@dataclass(kw_only=True)
class SpeedRow(JsonResult):
    """One batch size timed: each model's latency and the ratios between them."""

    batch_size: int
    fp32_latency_ms: float
    full_int8_latency_ms: float
    chosen_latency_ms: float | None = optional_key()  # only when the ladder chose another model
    speedup_vs_fp32: float  # of the chosen model (full int8 when it was chosen)
    full_int8_speedup_vs_fp32: float
    slowdown_vs_full_int8: float


@dataclass
class LadderSpeed(JsonResult):
    """fp32, full int8 and the chosen model timed in process: how, per batch size, and notes."""

    method: str
    rows: list[SpeedRow]
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class AccuracyControlSettings:
    """What NNCF's accuracy control was asked (OpenVINO's ladder): the metric drop it may allow
    (absolute), at most how many groups of quantised operations it reverts, on how many samples
    it ranks them, and the metric."""

    max_drop: float
    drop_type: str
    max_num_iterations: int
    ranking_subset_size: int
    metric: str


@dataclass(kw_only=True)
class LadderRecord(JsonResult):
    """The ladder a conversion climbed. `sensitivity` is None where the ranking is not exposed
    (NNCF), `speed` None where the ladder did not time (the bench times the artifact);
    `accuracy_control` is NNCF's (OpenVINO records it, None when it did not run)."""

    budget: Budget
    search_data: SearchData
    time_limit_s: float
    seconds: float
    outcome: str
    met_budget: bool
    chosen_step: int
    scheme: str
    steps: list[LadderStep]
    accuracy_control: AccuracyControlSettings | None = optional_key()
    kept_float: list[FloatNode] = field(default_factory=list)
    sensitivity: list[FloatNode] | None = None
    speed: LadderSpeed | None = None
    # OpenVINO's ladder records `accuracy_control` also when it is None.
    records_control: ClassVar[bool] = False

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        if self.records_control and "accuracy_control" not in document:
            at = list(document).index("kept_float")
            items = list(document.items())
            document = dict([*items[:at], ("accuracy_control", None), *items[at:]])
        return document

    @classmethod
    def read(cls, block: Mapping[str, Any] | None) -> LadderRecord | None:
        """The record of a `ladder` block (None for none)."""
        return None if not block else cls.from_json(block)

    @property
    def chosen(self) -> LadderStep:
        """The step whose model the artifact holds."""
        return next(step for step in self.steps if step.step == self.chosen_step)


@dataclass(kw_only=True)
class NncfLadderRecord(LadderRecord):
    """OpenVINO's record: `accuracy_control` is always a key (None: NNCF's did not run)."""

    records_control: ClassVar[bool] = True


def float_node(node: str, op_type: str, origin: TfOrigin, output_error: float | None) -> FloatNode:
    """A FloatNode for ONNX node `node` of `op_type`, from TensorFlow's `origin`."""
    return FloatNode(node, op_type, origin.tf_op, origin.tf_layer, output_error)
