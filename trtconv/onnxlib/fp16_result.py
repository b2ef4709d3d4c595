"""The mixed float16 model's record, typed: the rule, the node counts, each node kept in float32
and why, and what float16 emulation measured. Made by trtconv.onnxlib.fp16_model (for `ort` and
`trt`), read by `convert`'s report; `to_json()` is the `fp16` block of a manifest's conversion
summary, `from_json()` reads one back. No heavy imports: the CLI loads this module."""

from __future__ import annotations

from dataclasses import dataclass, field

from trtconv.core.results import JsonResult, optional_key


@dataclass(frozen=True)
class OutputError:
    """One output of a float16 emulation against float32: relative L2 error (None: a value
    overflowed or went NaN), max abs error, the non-finite values, top-1 agreement (None: the
    output has no classes)."""

    relative_error: float | None
    max_abs_error: float
    nonfinite: int
    top1_agreement: float | None


@dataclass(frozen=True)
class KeptNode:
    """A node that computes in float32: its ONNX name and op type, the TensorFlow op and layer
    it came from, and why it stayed float32."""

    node: str
    op_type: str
    tf_op: str | None
    tf_layer: str | None
    why: str


@dataclass(frozen=True)
class EmulatedOutputs:
    """Each output under plain float16 and under this mixed model, against float32."""

    plain_float16: dict[str, OutputError] = field(default_factory=dict)
    mixed: dict[str, OutputError] = field(default_factory=dict)


@dataclass(kw_only=True)
class Fp16Summary(JsonResult):
    """The `fp16` block: the rule and its limits, the samples and rounds it measured, the node
    counts and float16 share, the nodes kept float32, the emulated outputs, the seconds, and
    (ONNX Runtime) what validates the model: a float16 provider, or emulation."""

    rule: str
    range_limit: float
    loss_limit: float
    loss_growth: float
    # The underflow and cancellation rules' limits (absent from blocks written before them).
    tiny_limit: float | None = optional_key()
    small_share: float | None = optional_key()
    cancellation_limit: float | None = optional_key()
    analysis_samples: int
    measurements: int
    nodes: int
    float16_nodes: int
    float32_nodes: int
    float16_share: float
    kept_float32: list[KeptNode] = field(default_factory=list)
    emulated_outputs: EmulatedOutputs = field(default_factory=EmulatedOutputs)
    seconds: float = 0.0
    validated_by: str | None = optional_key()
