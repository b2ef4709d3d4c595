"""An error about many outputs: a short sentence, then one indented line per check (an
error sentence naming every output on one line reached ~3,000 characters)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.rules import rules
from trtconv.core.errors import AccuracyError, itemised
from trtconv.outputs.compare import compare, raise_if_failed


def test_one_item_stays_one_line_and_several_get_a_line_each() -> None:
    assert itemised("The model is off", ["a: 3"]) == "The model is off: a: 3."
    assert itemised("The model is off", ["a: 3", "b: 4"]) == "The model is off:\n  - a: 3\n  - b: 4"


def test_many_failing_outputs_read_as_one_line_each() -> None:
    rng = np.random.default_rng(0)
    names = [f"head_{index}" for index in range(12)]
    reference = {name: rng.random((64, 5)).astype(np.float32) for name in names}
    candidate = {name: rng.random((64, 5)).astype(np.float32) for name in names}
    report = compare(reference, candidate, rules("fp32"))
    with pytest.raises(AccuracyError) as caught:
        raise_if_failed(report, "The int8 artifact")
    first, *rest = str(caught.value).splitlines()
    assert first.startswith("The int8 artifact is outside tolerance") and len(first) < 100
    assert len(rest) == len(report.failure_lines()) >= len(names)
    assert all(line.startswith("  - ") and len(line) < 300 for line in rest), rest
    for name in names:
        assert any(line.startswith(f"  - {name} ") for line in rest), name
