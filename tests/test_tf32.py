"""TF32 is set for one piece of work and restored after it (TensorFlow's real switch)."""

from __future__ import annotations

import os

import pytest

from trtconv.tf32 import OVERRIDE, tf32_policy

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
