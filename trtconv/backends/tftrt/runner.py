"""Runs a TF-TRT SavedModel; needs TensorRT and a GPU like the converter."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from trtconv.backends.runner import Runner, RunOptions
from trtconv.backends.tf_native.runner import SavedModelRunner
from trtconv.backends.tftrt import rules
from trtconv.backends.tftrt.converter import apply_tf32_policy
from trtconv.facts import probe
from trtconv.model_io import ModelSignature

if TYPE_CHECKING:
    from trtconv.manifest import Manifest


class TfTrtRunner(SavedModelRunner):
    """A TF-TRT SavedModel's serving_default, with the TF32 policy of its precision."""

    def __init__(self, path: Path, precision: str = "fp32", threads: int | None = None) -> None:
        super().__init__(path, threads=threads)
        self.precision = precision

    def activate_impl(self) -> ModelSignature:
        rules.support(probe(), self.precision).require()
        apply_tf32_policy(self.precision)
        return super().activate_impl()


def tftrt_runner(payload: Path, manifest: Manifest | None, options: RunOptions) -> Runner:
    """The runner factory: the artifact's precision decides the TF32 policy."""
    precision = manifest.precision if manifest is not None else "fp32"
    return TfTrtRunner(payload, precision, threads=options.threads)
