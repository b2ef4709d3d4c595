"""ONNX Runtime sessions for ONNX files, as a Runner: the one way trtconv runs an ONNX model (the
export check, the int8 ladder's scoring and timing, and the `ort` backend's runner).

The session must really use every execution provider asked for: onnxruntime-gpu silently falls
back to the CPU when CUDA libraries are missing, and that is an error here, not a slow surprise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trtconv.core.errors import InputError, MissingDependencyError
from trtconv.core.lazy import require
from trtconv.core.model_io import Feeds, ModelSignature, Outputs, TensorSpec
from trtconv.facts.libraries import preload_cuda_libraries
from trtconv.protocol.runner import Runner

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
        spin: bool = True,
    ) -> None:
        super().__init__(path)
        self.spin = spin
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
        if not self.spin:  # threads sleep between calls (RunOptions.spin)
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
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
        return self.session_signature()

    def session_signature(self) -> ModelSignature:
        """The open session's inputs and outputs."""
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
