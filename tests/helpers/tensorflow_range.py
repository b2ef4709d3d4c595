"""Which end of the supported TensorFlow range this environment holds, read without importing
TensorFlow: TF-TRT's facts differ (2.17 ships it as a TensorRT build; 2.18 removed it)."""

from __future__ import annotations

from trtconv.backends.tftrt.rules import ended
from trtconv.facts.libraries import package_version

TENSORFLOW_VERSION = package_version("tensorflow") or ""
# TensorFlow 2.17: a TensorRT build (is_tensorrt_build) that looks for libnvinfer.so.8.6.1.
SHIPS_TFTRT = bool(TENSORFLOW_VERSION) and not ended(TENSORFLOW_VERSION)
ENDED_REASON = f"TF-TRT ends at TensorFlow 2.17 and this is TensorFlow {TENSORFLOW_VERSION}"
