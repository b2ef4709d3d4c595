"""Runs a TF-TRT SavedModel; needs TensorRT and a GPU like the converter."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import trtconv.backends.tftrt.rules as rules
from trtconv.backends import registry
from trtconv.backends.tf_native.runner import SavedModelRunner, signature_key
from trtconv.core.model_io import ModelSignature
from trtconv.core.precision import Precision
from trtconv.model.savedmodel import SERVING_KEY
from trtconv.protocol.runner import Runner, RunOptions, check_device

if TYPE_CHECKING:
    from trtconv.artifact.manifest import Manifest


class TfTrtRunner(SavedModelRunner):
    """A TF-TRT SavedModel's signature (the one it was converted from); TF32 allowed in its
    native segments exactly when its precision is not fp32."""

    def __init__(
        self,
        path: Path,
        precision: str = "fp32",
        threads: int | None = None,
        signature: str = SERVING_KEY,
    ) -> None:
        super().__init__(
            path, threads=threads, tf32=precision != Precision.FP32, signature=signature
        )
        self.precision = precision
        self.device = "tensorrt"

    def activate_impl(self) -> ModelSignature:
        rules.support(registry.facts_here(), self.precision).require()
        return super().activate_impl()


def tftrt_runner(payload: Path, manifest: Manifest | None, options: RunOptions) -> Runner:
    """The runner factory: the artifact's precision decides the TF32 policy. TF-TRT runs
    TensorRT engines inside TensorFlow on a GPU: --device auto, tensorrt or cuda."""
    check_device("tftrt", options.device, ("tensorrt", "cuda"))
    precision = manifest.precision if manifest is not None else "fp32"
    return TfTrtRunner(
        payload, precision, threads=options.threads, signature=signature_key(manifest, options)
    )
