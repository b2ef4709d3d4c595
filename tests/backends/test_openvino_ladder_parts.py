"""Parts of the OpenVINO int8 ladder that need no conversion."""

from __future__ import annotations

import logging
import re
import time

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.backends.openvino.ladder import FULL, NncfLadder
from trtconv.core.precision import Precision
from trtconv.outputs.compare import compare
from trtconv.quantize.search import Score, step_words
from trtconv.quantize.time_limit import TimeLimit


def test_step_lines_round_the_agreement(caplog: pytest.LogCaptureFixture) -> None:
    """The log read 'top-1 agreement 0.9885579082980972'. The line names the deciding
    check with its figures rounded; the step record keeps full precision for JSON."""
    rng = np.random.default_rng(0)
    want = rng.normal(size=(300, 10)).astype(np.float32)
    got = want.copy()
    got[:3] = np.roll(got[:3], 1, axis=1)  # 297 of 300 agree: 0.99 exactly shows no rounding
    got[3, :] = want[3, ::-1]  # one more: 296/300 = 0.98666...
    report = compare({"logits": want}, {"logits": got}, rules(Precision.INT8))
    agreement = report.top1_agreement
    assert agreement is not None and len(repr(agreement)) > 8  # a figure that needs rounding
    score = Score(agreement, None, None, 0.01, report.passed, deciding=step_words(report))
    ladder = NncfLadder.__new__(NncfLadder)  # the step record needs no search slice
    ladder.steps, ladder.kept_float, ladder.clock = [], [], TimeLimit(60.0)
    with caplog.at_level(logging.INFO, logger="trtconv"):
        ladder.add_step(FULL, "full int8 (NNCF defaults)", score, time.perf_counter())
    assert "top-1 agreement" in caplog.text, caplog.text
    assert repr(agreement) not in caplog.text
    assert not re.search(r"\d\.\d{5,}", caplog.text), caplog.text
    assert ladder.steps[0].top1_agreement == agreement  # JSON: full precision
