"""Release configs for the release and contract tests: on digits with tiny bench settings (run
for real), and the texts the config tests vary (read only, never run)."""

from __future__ import annotations

from pathlib import Path

# One fp32 ort target on the SavedModel at {} (str.format).
MINIMAL_CONFIG = '[model]\npath = "{}"\n[[targets]]\nbackend = "ort"\nprecision = "fp32"\n'

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


def cheap_saved_model(root: Path) -> Path:
    """A directory under `root` that passes the cheap SavedModel check (config loading never
    loads TensorFlow)."""
    model = root / "model" / "saved_model"
    model.mkdir(parents=True)
    (model / "saved_model.pb").write_bytes(b"")
    return model


def write_config(folder: Path, text: str) -> Path:
    """`text` as folder/release.toml."""
    path = folder / "release.toml"
    path.write_text(text)
    return path


def good_config(saved_model: Path, extra: str = "") -> str:
    """A valid config on `saved_model`: ort int8 and tftrt fp16 targets, calibration, bench;
    `extra` (TOML tables) appended."""
    return f"""
[model]
path = "{saved_model}"

[[targets]]
backend = "ort"
precision = "int8"

[[targets]]
backend = "tftrt"
precision = "fp16"

[calibration]
data = "digits"
method = "minmax"
samples = 64
int8_target = "portable"
fallback_time_limit_s = 120

[bench]
batch_sizes = [1, 8, 32]
iterations = 20
{extra}
"""
