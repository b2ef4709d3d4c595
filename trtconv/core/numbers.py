"""Figures rounded for people (logs, tables, sentences); JSON keeps full precision.

Four significant digits say an agreement of 0.9885579082980972 (0.9886) or a throughput of
1234.5/s (1235); from 10,000 on, whole numbers with thousands separators (12,346). A figure
shown beside a bound it is judged against gets more digits when four would make it read as the
bound itself (0.96996 "misses >= 0.97" would otherwise read "0.97 misses >= 0.97").
"""

from __future__ import annotations

import math

DIGITS = 4
MAX_DIGITS = 9


def human(value: float | None, digits: int = DIGITS) -> str:
    """`value` in `digits` significant digits ('n/a' for None, 'inf'/'nan' as such)."""
    if value is None:
        return "n/a"
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def human_against(value: float, bound: float) -> str:
    """`value` as `human` shows it, with digits added until it no longer reads as `bound`
    when it differs from it."""
    for digits in range(DIGITS, MAX_DIGITS + 1):
        text = human(value, digits)
        if value == bound or text.replace(",", "") != human(bound, digits).replace(",", ""):
            return text
    return repr(value)
