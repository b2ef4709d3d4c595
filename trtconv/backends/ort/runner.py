"""Runs an ONNX model with ONNX Runtime on the execution providers its artifact was built for."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtconv.backends.runner import Runner, RunOptions, check_device
from trtconv.core.errors import InputError, MissingDependencyError
from trtconv.core.lazy import require
from trtconv.core.model_io import Feeds, ModelSignature, Outputs, TensorSpec
from trtconv.facts.libraries import preload_cuda_libraries

if TYPE_CHECKING:
    from trtconv.manifest import Manifest

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
TENSORRT = "TensorrtExecutionProvider"
ORT_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(double)": "float64",
    "tensor(int64)": "int64",
    "tensor(int32)": "int32",
    "tensor(int8)": "int8",
    "tensor(uint8)": "uint8",
    "tensor(bool)": "bool",
}


class OrtRunner(Runner):
    """Runs an ONNX model with ONNX Runtime, inputs fed by name.

    `providers` default to the CPU provider (`ort_runner` passes what the artifact recorded). The
    session must really use every provider asked for: onnxruntime-gpu silently falls back to the
    CPU when CUDA libraries are missing, and that is an error here, not a slow surprise.
    """

    def __init__(
        self,
        path: Path,
        providers: list[str] | None = None,
        threads: int | None = None,
        denormal_as_zero: bool = True,
        options: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(path)
        self.providers = providers or [CPU]
        self.options = options
        self.threads = threads
        self.denormal_as_zero = denormal_as_zero
        self.session: Any = None

    def activate_impl(self) -> ModelSignature:
        ort = require("onnxruntime")
        if not self.path.is_file():
            raise InputError(f"ONNX model {self.path} does not exist.")
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.threads is not None:
            options.intra_op_num_threads = self.threads
        if self.denormal_as_zero:
            # Denormal floats take a slow path on x86: a random-weight model ran 2x slower.
            options.add_session_config_entry("session.set_denormal_as_zero", "1")
        if any(provider != CPU for provider in self.providers):
            preload_cuda_libraries(ort)
        try:
            self.session = ort.InferenceSession(
                str(self.path),
                sess_options=options,
                providers=self.providers,
                provider_options=self.options,
            )
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"ONNX Runtime could not load {self.path}: {first[:300]}") from exc
        used = self.session.get_providers()
        absent = [p for p in self.providers if p not in used]
        if absent:
            raise MissingDependencyError(
                f"ONNX Runtime did not enable {', '.join(absent)} for {self.path} (it uses "
                f"{', '.join(used)}); check the CUDA/TensorRT libraries."
            )
        return ModelSignature(
            inputs=tuple(_spec(value) for value in self.session.get_inputs()),
            outputs=tuple(_spec(value) for value in self.session.get_outputs()),
        )

    def deactivate_impl(self) -> None:
        self.session = None

    def infer_impl(self, feeds: Feeds) -> Outputs:
        names = self.signature.output_names
        results = self.session.run(names, feeds)
        return dict(zip(names, results, strict=True))


def _spec(value: Any) -> TensorSpec:
    shape = tuple(d if isinstance(d, int) else None for d in value.shape)
    return TensorSpec(value.name, shape, ORT_TYPES.get(value.type, value.type))


# --device -> the execution providers asked for, in order (ONNX Runtime falls through the list
# per node; the runner refuses a session that silently dropped one).
DEVICE_PROVIDERS = {"cpu": [CPU], "cuda": [CUDA, CPU], "tensorrt": [TENSORRT, CUDA, CPU]}
INT8_ON_CUDA = (
    "int8 Q/DQ on ONNX Runtime's CUDA provider runs dequantised float kernels, not int8 ones: "
    "measured slower than fp16 on an H100 (MobileNetV2: 0.57x at batch 1, 0.91x at 64); "
    "--device tensorrt or --backend trt run int8 kernels"
)


def ort_runner(payload: Path, manifest: Manifest | None, options: RunOptions) -> Runner:
    """The runner factory: providers for `options.device` ("auto": what the manifest recorded,
    else the CPU), with the CUDA provider's TF32 setting for the artifact's precision."""
    summary = manifest.conversion_summary if manifest is not None else {}
    precision = manifest.precision if manifest is not None else "fp32"
    device = check_device("ort", options.device, ("auto", "cpu", "cuda", "tensorrt"))
    if device == "auto":
        providers = list(summary.get("providers") or [CPU])
        recorded = summary.get("provider_options") or [{} for _ in providers]
    else:
        providers = DEVICE_PROVIDERS[device]
        recorded = [provider_options(provider, precision) for provider in providers]
    runner = OrtRunner(payload, providers, threads=options.threads, options=list(recorded))
    runner.device = {CUDA: "cuda", TENSORRT: "tensorrt"}.get(providers[0], "cpu")
    if precision == "int8" and runner.device == "cuda":
        runner.warnings.append(f"{payload}: {INT8_ON_CUDA}.")
    return runner


def provider_options(provider: str, precision: str) -> dict[str, str]:
    """One provider's options: CUDA computes float32 in TF32 unless told not to, so only tf32
    allows it (an fp32 artifact must match an fp32 reference)."""
    if provider == CUDA:
        return {"use_tf32": "1" if precision == "tf32" else "0"}
    return {}
