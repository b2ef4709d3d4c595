"""What `deploy` returns (typed; its fields are the JSON keys)."""

from __future__ import annotations

from dataclasses import dataclass, field

from trtconv.core.results import JsonResult
from trtconv.measure.server_bench_result import SERVING_SCHEMA_VERSION


@dataclass
class DeployedModel(JsonResult):
    """One model of a Triton repository: where it came from, what serves it, how it batches."""

    name: str
    source: str  # the artifact or SavedModel it was made from
    backend: str  # trtconv's backend
    precision: str
    status: str  # the manifest's validation verdict ("unvalidated" for a SavedModel)
    triton_backend: str | None  # onnxruntime, openvino (None: a platform serves it)
    triton_platform: str | None  # tensorrt_plan, tensorflow_savedmodel
    payload: str  # relative to the repository: NAME/1/model.onnx
    config: str  # relative to the repository: NAME/config.pbtxt
    max_batch_size: int  # 0: the model takes one fixed batch, nothing is batched
    preferred_batch_sizes: list[int]
    max_queue_delay_us: int
    batching_source: str  # "defaults", or the bench run the figures came from
    instance_kind: str  # KIND_CPU or KIND_GPU
    instance_count: int
    parameters: dict[str, str]
    # Admission control (default_queue_policy): None without a dynamic batcher.
    max_queue_size: int | None = None
    queue_timeout_us: int | None = None
    admission_source: str = ""


@dataclass
class DeployResult(JsonResult):
    """`trtconv deploy`: the repository written and each model in it."""

    repository: str
    models: list[DeployedModel]
    warnings: list[str] = field(default_factory=list)
    schema_version: int = SERVING_SCHEMA_VERSION
