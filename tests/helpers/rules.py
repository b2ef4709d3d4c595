"""The rules a precision's verdicts are judged by, as the tests state them: the judging contract
(trtconv.outputs.contract) resolved from keywords, so a test says only what it changes."""

from __future__ import annotations

from collections.abc import Mapping

from trtconv.core.judging_options import ToleranceOptions
from trtconv.outputs.contract import Stated, resolve
from trtconv.outputs.tolerance import Tolerance


def rules(
    precision: str,
    *,
    atol: float | None = None,
    rtol: float | None = None,
    atols: Mapping[str, float] | None = None,
    min_within: Mapping[str, float] | None = None,
    confidence: float | None = None,
    min_top1_agreement: float | None = None,
    max_accuracy_drop: float | None = None,
) -> Tolerance:
    """`precision`'s contract with what is given stated as options."""
    tolerance = ToleranceOptions(atol, rtol, dict(atols or {}), {}, dict(min_within or {}))
    stated = Stated(tolerance, min_top1_agreement, max_accuracy_drop, confidence)
    return resolve(precision, stated).tolerance
