"""The runner protocol's base class owns state and input checks; a backend fills in `*_impl`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trtconv.core.errors import InputError, UsageError
from trtconv.core.model_io import Feeds, ModelSignature, Outputs, TensorSpec
from trtconv.protocol.runner import Runner, check_device

SIGNATURE = ModelSignature(
    (TensorSpec("x", (None, 3), "float32"),), (TensorSpec("y", (None, 3), "float32"),)
)


class Doubling(Runner):
    """A runner whose model doubles its input, counting what the base class let through."""

    def __init__(self) -> None:
        super().__init__(Path("doubling"))
        self.calls = 0
        self.freed = 0

    def activate_impl(self) -> ModelSignature:
        return SIGNATURE

    def deactivate_impl(self) -> None:
        self.freed += 1

    def infer_impl(self, feeds: Feeds) -> Outputs:
        self.calls += 1
        return {"y": feeds["x"] * 2}


def test_infer_before_activate_is_refused_and_with_activates_and_frees() -> None:
    runner = Doubling()
    with pytest.raises(RuntimeError, match="before activate"):
        runner.infer({"x": np.ones((1, 3), np.float32)})
    with runner:
        assert runner.is_active and runner.signature == SIGNATURE
        assert runner.infer({"x": np.ones((2, 3), np.float32)})["y"].tolist() == [[2.0] * 3] * 2
    assert not runner.is_active and runner.freed == 1
    runner.deactivate()  # a no-op when not active
    assert runner.freed == 1


@pytest.mark.parametrize(
    ("feeds", "words"),
    [
        ({"z": np.ones((1, 3), np.float32)}, "the model expects ['x']"),
        ({"x": np.ones((1, 3), np.int64)}, "expects dtype float32, found int64"),
        ({"x": np.ones((1, 4), np.float32)}, "expects shape"),
    ],
)
def test_feeds_that_do_not_fit_are_bad_input_before_the_backend_sees_them(
    feeds: Feeds, words: str
) -> None:
    with Doubling() as runner:
        with pytest.raises(InputError, match=words.replace("[", r"\[").replace("]", r"\]")):
            runner.infer(feeds)
        assert runner.calls == 0
        runner.infer({"x": np.ones((1, 4), np.float32)}, check_inputs=False)
        assert runner.calls == 1


def test_check_device_resolves_auto_and_refuses_what_a_backend_cannot_use() -> None:
    assert check_device("ort", "auto", ("cpu", "cuda")) == "cpu"
    assert check_device("ort", "cuda", ("cpu", "cuda")) == "cuda"
    with pytest.raises(UsageError, match="cannot run on --device tensorrt"):
        check_device("ort", "tensorrt", ("cpu", "cuda"))
    with pytest.raises(UsageError, match="Unknown device"):
        check_device("ort", "npu", ("cpu",))
