"""TF32 is set for one piece of work and restored after it (TensorFlow's real switch)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest

from trtconv.core.tf32 import OVERRIDE, tf32_policy

pytestmark = pytest.mark.tensorflow

tf = pytest.importorskip("tensorflow")
enabled = tf.config.experimental.tensor_float_32_execution_enabled


def test_off_inside_and_restored_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(OVERRIDE, raising=False)
    assert enabled() is True  # TensorFlow's default
    with tf32_policy(False):
        assert enabled() is False and os.environ[OVERRIDE] == "0"
    assert enabled() is True and OVERRIDE not in os.environ


def test_restored_when_the_work_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(OVERRIDE, "0")
    tf.config.experimental.enable_tensor_float_32_execution(False)
    try:
        with pytest.raises(RuntimeError), tf32_policy(True):
            assert enabled() is True and OVERRIDE not in os.environ
            raise RuntimeError("conversion failed")
        assert enabled() is False and os.environ[OVERRIDE] == "0"
    finally:
        tf.config.experimental.enable_tensor_float_32_execution(True)


def test_the_reference_runs_without_tf32_on_a_gpu(
    digits_saved_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a GPU TensorFlow computes float32 in TF32 by default; the native runner, which gives
    every reference output, turns it off for its own calls only."""
    from trtconv.backends.tf_native import runner as native
    from trtconv.facts import Gpu, described

    h100 = described(gpus=[Gpu("NVIDIA H100 80GB HBM3", (9, 0))])
    monkeypatch.setattr(native.registry, "facts_here", lambda deep=False: h100)
    seen: list[bool] = []
    with native.SavedModelRunner(digits_saved_model) as runner:
        call = runner._call
        runner._call = lambda **feeds: (seen.append(enabled()), call(**feeds))[1]
        runner.infer({"image": np.zeros((2, 8, 8, 1), np.float32)})
    assert seen == [False] and enabled() is True
