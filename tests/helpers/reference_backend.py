"""A test-only backend: the validated ONNX export run by ONNX's numpy reference evaluator.

It exists to show that a backend is one record: importing this module registers it, and then
doctor, convert, bench (its worker processes import it from $TRTCONV_BACKENDS) and release
configs know it, with no change anywhere else.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from trtconv.artifact.manifest import Manifest
from trtconv.backends.registry import Backend, register
from trtconv.core.errors import ConversionError, InputError
from trtconv.core.lazy import require
from trtconv.core.model_io import Feeds, ModelSignature, Outputs
from trtconv.facts import Facts
from trtconv.protocol.request import ConversionOutcome, ConversionRequest
from trtconv.protocol.runner import Runner, RunOptions
from trtconv.protocol.support import EXPORT_FIX, Support, onnx_export_missing, verdict

NAME = "onnx-reference"
PAYLOAD = "model.onnx"


def support(facts: Facts, precision: str) -> Support:
    """fp32 wherever onnx (its evaluator) and the ONNX export's libraries are installed."""
    if onnx_export_missing(facts):
        return verdict(NAME, precision, "the ONNX export needs onnx and tf2onnx", EXPORT_FIX)
    return verdict(NAME, precision, f"onnx {facts.version('onnx')} reference evaluator (numpy)")


def convert(request: ConversionRequest) -> ConversionOutcome:
    """The validated fp32 export, as it is."""
    if request.onnx_path is None:
        raise ConversionError(f"{NAME} needs the ONNX export (request.onnx_path unset).")
    shutil.copyfile(request.onnx_path, request.output_dir / PAYLOAD)
    return ConversionOutcome(PAYLOAD, {"evaluator": "onnx.reference.ReferenceEvaluator"})


class ReferenceRunner(Runner):
    """Runs an ONNX model with `onnx.reference.ReferenceEvaluator` (numpy, one thread)."""

    def __init__(self, path: Path, signature: ModelSignature) -> None:
        super().__init__(path)
        self.model_signature = signature
        self.evaluator: Any = None

    def activate_impl(self) -> ModelSignature:
        reference = require("onnx.reference")
        try:
            self.evaluator = reference.ReferenceEvaluator(str(self.path))
        except Exception as exc:
            raise InputError(f"{self.path} is not a model the ONNX evaluator reads: {exc}") from exc
        return self.model_signature

    def deactivate_impl(self) -> None:
        self.evaluator = None

    def infer_impl(self, feeds: Feeds) -> Outputs:
        names = self.signature.output_names
        return dict(zip(names, self.evaluator.run(names, feeds), strict=True))


def reference_runner(payload: Path, manifest: Manifest | None, options: RunOptions) -> Runner:
    """Runs from its artifact: the manifest holds the SavedModel's signature."""
    if manifest is None:
        raise InputError(f"{payload}: an {NAME} model runs from its artifact (manifest.json).")
    return ReferenceRunner(payload, manifest.model_signature)


BACKEND = register(
    Backend(
        name=NAME,
        library="onnx",
        precisions=("fp32",),
        support=support,
        runner=reference_runner,
        module=__name__,
        convert=convert,
        needs_onnx=True,
    )
)
