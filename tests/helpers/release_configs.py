"""Release configs on digits with tiny bench settings, for the release and contract tests."""

from __future__ import annotations

LENIENT_GATES = {
    "max_accuracy_drop": 0.05,
    "min_top1_agreement": 0.9,
    "min_speedup": 0.01,
    "max_latency_ms_p99": 10000.0,
}


def config_text(model: str, targets: list[tuple[str, str | None]], gates: dict[str, float]) -> str:
    """A release config on digits with tiny bench settings (precision None: left out)."""
    lines = ["[model]", f'path = "{model}"', ""]
    for backend, precision in targets:
        lines += ["[[targets]]", f'backend = "{backend}"']
        lines += [f'precision = "{precision}"', ""] if precision else [""]
    lines += [
        "[calibration]",
        'data = "digits"',
        "samples = 128",
        "",
        "[eval]",
        'data = "digits"',
        "samples = 450",  # every held-out digit: 200 could show 0.97 only at 0.995 agreement
        "",
        "[bench]",
        "batch_sizes = [1, 8]",
        "iterations = 20",
        "warmup = 3",
        "",
        "[gates]",
        *(f"{key} = {value}" for key, value in gates.items()),
    ]
    return "\n".join(lines) + "\n"
