"""Triton's model configuration (`config.pbtxt`) written as protobuf text, from plain data.

Written by hand rather than through Triton's protobuf classes so that `deploy` needs nothing
beyond trtconv itself; the tests parse every config with `tritonclient`'s own `ModelConfig`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from trtconv.core.errors import InputError
from trtconv.core.model_io import STRING, TensorSpec
from trtconv.protocol.serving import TritonServing
from trtconv.serving.repository.admission import Admission

# numpy dtype name -> Triton's DataType.
TRITON_TYPES = {
    "bool": "TYPE_BOOL",
    "uint8": "TYPE_UINT8",
    "uint16": "TYPE_UINT16",
    "uint32": "TYPE_UINT32",
    "uint64": "TYPE_UINT64",
    "int8": "TYPE_INT8",
    "int16": "TYPE_INT16",
    "int32": "TYPE_INT32",
    "int64": "TYPE_INT64",
    "float16": "TYPE_FP16",
    "float32": "TYPE_FP32",
    "float64": "TYPE_FP64",
    "bfloat16": "TYPE_BF16",
    STRING: "TYPE_STRING",
}


@dataclass(frozen=True)
class Batching:
    """How requests are batched: `max_batch_size` 0 means the model takes one fixed batch (its
    dims then include it) and nothing is batched; `source` says where the figures came from."""

    max_batch_size: int
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_delay_us: int = 0
    source: str = "defaults"

    @property
    def dynamic(self) -> bool:
        return self.max_batch_size > 0


@dataclass(frozen=True)
class ModelConfigSpec:
    """Everything a config.pbtxt says about one model."""

    name: str
    serving: TritonServing
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    batching: Batching
    instance_kind: str = "KIND_CPU"
    instance_count: int = 1
    backend_parameters: Mapping[str, str] = field(default_factory=dict)
    # trtconv's own record (verdict, versions): model-level parameters a backend does not read.
    metadata: Mapping[str, str] = field(default_factory=dict)
    # GPU execution accelerators: (name, {parameter: value}), e.g. ONNX Runtime's TensorRT.
    accelerators: tuple[tuple[str, Mapping[str, str]], ...] = ()
    # The batcher's queue policy (a dynamic batcher only): bounded, requests timed out rejected.
    admission: Admission | None = None
    # `model_warmup` runs before Triton marks the model ready (False: the backend warms itself).
    warmup: bool = True


def triton_type(spec: TensorSpec, model: str) -> str:
    """Triton's TYPE_* for a tensor. Raises InputError for a dtype Triton has no type for."""
    if spec.dtype not in TRITON_TYPES:
        raise InputError(
            f"{model}: tensor '{spec.name}' has dtype {spec.dtype}, which Triton lacks."
        )
    return TRITON_TYPES[spec.dtype]


def triton_dims(spec: TensorSpec, batching: Batching) -> list[int]:
    """The dims Triton declares: without the batch when it batches, -1 for a dynamic dimension."""
    shape = spec.shape[1:] if batching.dynamic and spec.shape else spec.shape
    return [-1 if dim is None else int(dim) for dim in shape]


def render_config(spec: ModelConfigSpec) -> str:
    """The config.pbtxt text for `spec`."""
    lines = [f"name: {_quote(spec.name)}"]
    if spec.serving.platform:
        lines.append(f"platform: {_quote(spec.serving.platform)}")
    if spec.serving.backend:
        lines.append(f"backend: {_quote(spec.serving.backend)}")
    lines.append(f"default_model_filename: {_quote(spec.serving.model_filename)}")
    lines.append(f"max_batch_size: {spec.batching.max_batch_size}")
    lines += _tensors("input", spec.inputs, spec)
    lines += _tensors("output", spec.outputs, spec)
    lines += _batcher(spec.batching, spec.admission)
    lines.append(
        f"instance_group [ {{ kind: {spec.instance_kind} count: {spec.instance_count} }} ]"
    )
    lines += _accelerators(spec.accelerators)
    lines += _warmup(spec) if spec.warmup else []
    parameters = {**spec.backend_parameters, **spec.metadata}
    lines += [_parameter(key, value) for key, value in parameters.items()]
    return "\n".join(lines) + "\n"


def _tensors(kind: str, specs: Sequence[TensorSpec], config: ModelConfigSpec) -> list[str]:
    lines = [f"{kind} ["]
    for index, spec in enumerate(specs):
        dims = ", ".join(str(d) for d in triton_dims(spec, config.batching))
        comma = "," if index < len(specs) - 1 else ""
        lines.append(
            f"  {{ name: {_quote(spec.name)} data_type: {triton_type(spec, config.name)} "
            f"dims: [ {dims} ] }}{comma}"
        )
    return [*lines, "]"]


def _batcher(batching: Batching, admission: Admission | None = None) -> list[str]:
    if not batching.dynamic:
        return []
    preferred = ", ".join(str(size) for size in batching.preferred_batch_sizes)
    policy = (
        [
            f"  default_queue_policy {{ timeout_action: REJECT default_timeout_microseconds: "
            f"{admission.timeout_us} max_queue_size: {admission.max_queue_size} }}"
        ]
        if admission and admission.enabled
        else []
    )
    return [
        "dynamic_batching {",
        *([f"  preferred_batch_size: [ {preferred} ]"] if preferred else []),
        f"  max_queue_delay_microseconds: {batching.max_queue_delay_us}",
        *policy,
        "}",
    ]


# model_warmup: runs per batch size Triton makes before it marks the model ready.
WARMUP_COUNT = 5


def _warmup(spec: ModelConfigSpec) -> list[str]:
    """`model_warmup`: WARMUP_COUNT runs on random data (zeros for strings) at batch 1 and at
    the largest batch (once, batch_size 1 as Triton wants it, for a model that is not batched:
    its dims hold the batch), so the first requests do not pay the backend's lazy set-up.
    Dynamic dimensions other than the batch are 1."""
    batching = spec.batching
    sizes = sorted({1, batching.max_batch_size}) if batching.dynamic else [1]
    lines = ["model_warmup ["]
    for index, size in enumerate(sizes):
        inputs = []
        for tensor in spec.inputs:
            dims = ", ".join(str(max(d, 1)) for d in triton_dims(tensor, batching))
            data = "zero_data: true" if tensor.dtype == STRING else "random_data: true"
            inputs.append(
                f"    inputs {{ key: {_quote(tensor.name)} value {{ data_type: "
                f"{triton_type(tensor, spec.name)} dims: [ {dims} ] {data} }} }}"
            )
        comma = "," if index < len(sizes) - 1 else ""
        label = f"batch {size}" if batching.dynamic else "its fixed batch"
        lines += [
            f"  {{ name: {_quote(f'random data, {label}')} batch_size: {size} count: "
            f"{WARMUP_COUNT}",
            *inputs,
            f"  }}{comma}",
        ]
    return [*lines, "]"]


def _accelerators(accelerators: Sequence[tuple[str, Mapping[str, str]]]) -> list[str]:
    if not accelerators:
        return []
    lines = ["optimization { execution_accelerators {"]
    for name, parameters in accelerators:
        lines.append(f"  gpu_execution_accelerator {{ name: {_quote(name)}")
        lines += [
            f"    parameters {{ key: {_quote(k)} value: {_quote(v)} }}"
            for k, v in parameters.items()
        ]
        lines.append("  }")
    return [*lines, "} }"]


def _parameter(key: str, value: str) -> str:
    return f"parameters {{ key: {_quote(key)} value {{ string_value: {_quote(value)} }} }}"


def _quote(text: str) -> str:
    # A JSON string literal is a valid protobuf text-format string (same escapes for ", \\, \n).
    return json.dumps(str(text), ensure_ascii=True)
