"""Parts of the OpenVINO int8 ladder that need no conversion."""

from __future__ import annotations

import logging
import time

import pytest

from trtconv.backends.openvino.ladder import FULL, NncfLadder
from trtconv.quantize.budget import TimeLimit
from trtconv.quantize.search import Score


def test_step_lines_round_the_agreement(caplog: pytest.LogCaptureFixture) -> None:
    """Issue 24: the log read 'top-1 agreement 0.9885579082980972'."""
    ladder = NncfLadder.__new__(NncfLadder)  # the step record needs no search slice
    ladder.steps, ladder.kept_float, ladder.clock = [], [], TimeLimit(60.0)
    score = Score(0.9885579082980972, None, None, 0.01, True)
    with caplog.at_level(logging.INFO, logger="trtconv"):
        ladder.add_step(FULL, "full int8 (NNCF defaults)", score, time.perf_counter())
    assert "top-1 agreement 0.9886 (" in caplog.text, caplog.text
    assert ladder.steps[0]["top1_agreement"] == 0.9885579082980972  # JSON: full precision
