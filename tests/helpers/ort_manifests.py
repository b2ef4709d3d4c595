"""The manifest of an ONNX Runtime artifact, as its runner reads it: only the execution providers
recorded at conversion matter to the tests that build one in memory."""

from __future__ import annotations

from collections.abc import Sequence

from trtconv.artifact.manifest import Manifest
from trtconv.onnxlib.session import CPU


def ort_manifest(precision: str, providers: Sequence[str] = (CPU,)) -> Manifest:
    """An `ort` artifact's manifest at `precision`, converted for `providers` (no options)."""
    summary = {"providers": list(providers), "provider_options": [{} for _ in providers]}
    return Manifest(
        backend="ort",
        precision=precision,
        payload="model.onnx",
        source_model={},
        signature={},
        device={},
        tools={},
        conversion_seconds=0.0,
        conversion_summary=summary,
    )
