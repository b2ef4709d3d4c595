"""TensorFlow's TF32 switch, set for one piece of work and restored after it.

On Ampere and later GPUs TensorFlow computes float32 matmuls and convolutions in TF32 unless told
not to (measured on an H100: a ResNet-50's logits moved by up to 2.6e-2, 20x the fp32 tolerance).
A reference for validation must therefore run with TF32 off, TF-TRT's `fp32` builds with it off
(its builder sets BuilderFlag::kTF32 exactly when TensorFlow allows TF32) and `tf32` with it on.
The switch is process-wide, and one process may convert and validate several models (a release),
so every change is scoped: what was set before is set again afterwards.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from trtconv.core.lazy import require

# CUDA libraries read this when they initialise: it acts only before the process first uses the
# GPU, but then also covers libraries outside TensorFlow's switch.
OVERRIDE = "NVIDIA_TF32_OVERRIDE"


@contextlib.contextmanager
def tf32_policy(allow: bool) -> Iterator[None]:
    """Inside: TensorFlow allows TF32 exactly when `allow` (NVIDIA_TF32_OVERRIDE=0 when not);
    afterwards both are what they were, whatever happened inside."""
    tf = require("tensorflow")
    experimental = tf.config.experimental
    before = bool(experimental.tensor_float_32_execution_enabled())
    override = os.environ.get(OVERRIDE)
    if allow:
        if override == "0":
            os.environ.pop(OVERRIDE)
    else:
        os.environ[OVERRIDE] = "0"
    experimental.enable_tensor_float_32_execution(allow)
    try:
        yield
    finally:
        experimental.enable_tensor_float_32_execution(before)
        if override is None:
            os.environ.pop(OVERRIDE, None)
        else:
            os.environ[OVERRIDE] = override
