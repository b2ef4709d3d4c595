"""The int8 ladder's time limit bounds the whole search (a strict ladder once ran 631 s against
its 600 s limit: the limit was checked before a step, and the last step ran past it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.calib.readers import calibration_feed
from trtconv.calib.sources import ArraySet
from trtconv.quantize import ladder as ladder_module
from trtconv.quantize import time_limit
from trtconv.quantize.ladder import Ladder, LadderSettings
from trtconv.quantize.qdq import QdqOptions, QdqQuantizer
from trtconv.quantize.time_limit import CALIBRATE, PROBE, REQUANTIZE, TimeLimit

STEP_S = 10.0
LIMIT_S = 25.0


def outlier_classifier(path: Path) -> None:
    """x[N, 16] -> Dense(32) with three channels offset by 1000 (compensated in the next layer:
    the float model is unchanged) -> ReLU -> Dense(10) -> Softmax. One int8 scale for the hidden
    activation erases its other channels: full int8 misses any budget, so the ladder climbs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w1 = rng.normal(0, 0.5, (16, 32)).astype(np.float32)
    b1 = np.zeros(32, np.float32)
    b1[:3] += 1000.0
    w2 = rng.normal(0, 0.5, (32, 10)).astype(np.float32)
    b2 = (-1000.0 * w2[:3].sum(axis=0)).astype(np.float32)
    inits = [
        numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["l0"]),
        helper.make_node("Add", ["l0", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "outlier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, str(path))


def test_a_step_starts_only_when_its_estimated_cost_fits() -> None:
    clock = TimeLimit(10.0, reserve_s=1.0)
    assert clock.estimate(PROBE) == 0.0 and clock.affords(CALIBRATE)
    clock.record(CALIBRATE, 6.0)
    clock.record(REQUANTIZE, 2.0)
    clock.record(REQUANTIZE, 3.0)
    assert (clock.estimate(CALIBRATE), clock.estimate(REQUANTIZE), clock.estimate(PROBE)) == (
        6.0,
        3.0,
        2.0,
    )
    clock.started -= 3.5  # 3.5 s spent
    assert clock.affords(REQUANTIZE) and not clock.affords(CALIBRATE)  # 7.5 and 10.5 s of 10
    clock.started -= 3.0  # 6.5 s spent
    assert not clock.affords(REQUANTIZE) and clock.affords(PROBE)  # 10.5 and 9.5 s of 10


class Clock:
    """A controlled `time` module: the ladder's steps cost what the test says, however loaded
    the machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(time_limit, "time", fake)
    monkeypatch.setattr(ladder_module, "time", fake)
    return fake


def test_steps_of_a_loop_are_timed_between_checks(clock: Clock) -> None:
    limit = TimeLimit(10.0)
    out_of_time = limit.steps_of(PROBE)
    assert not out_of_time()  # nothing measured yet
    clock.now = 4.0
    assert not out_of_time()  # 4 s spent, the next probe should take 4 s more: 8 of 10
    clock.now = 7.0
    assert out_of_time()  # 7 s spent, the next probe should take 4 s more: past 10
    assert limit.costs[PROBE] == [4.0, 3.0]


def test_the_limit_counts_from_the_conversions_start(clock: Clock) -> None:
    """The export and calibration before the ladder spend the same limit (a ladder that
    counted only its own steps ran 12 minutes against 600 s)."""
    clock.now = 8.0  # the conversion began at 0: 8 s of export and calibration
    limit = TimeLimit(10.0, started=0.0)
    assert limit.elapsed() == 8.0 and limit.affords(PROBE)
    limit.record(PROBE, 3.0)
    assert not limit.affords(PROBE)  # 8 + 3 s of 10
    assert TimeLimit(10.0).affords(PROBE)  # counted from now: 3 of 10


def test_the_ladder_stops_before_a_step_that_would_pass_the_limit(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "outlier.onnx"
    outlier_classifier(model)
    rng = np.random.default_rng(1)
    data = ArraySet({"x": rng.normal(0, 1, (600, 16)).astype(np.float32)}, None, "random")
    quantizer = QdqQuantizer(model, tmp_path / "qdq", calibration_feed(data.head(256), 32))
    quantize = quantizer.quantize

    def costly(output: Path, options: QdqOptions) -> dict[str, Any]:
        clock.now += STEP_S  # every quantisation takes STEP_S on the ladder's clock
        return quantize(output, options)

    monkeypatch.setattr(quantizer, "quantize", costly)
    search = data.take(np.arange(256, 600))
    settings = LadderSettings(
        search,
        "spare samples",
        rules("int8", confidence=0.0),
        time_limit_s=LIMIT_S,
        timed=False,
    )
    ladder = Ladder(quantizer, settings, tmp_path / "ladder")
    chosen = ladder.climb(QdqOptions())
    record = ladder.record(chosen)
    # Full int8 (10 s), then one variant (20 s); a third step would end at 30 s, past 25.
    assert [step.seconds for step in record.steps] == [STEP_S, STEP_S]
    assert record.seconds == 2 * STEP_S <= LIMIT_S
    assert not record.met_budget and "time limit" in record.outcome, record.outcome
