"""The model's data contract: how raw pixels become its input, its input layout, and which part
of a data set it is evaluated on.

`train` records it in the model card, `convert` in the manifest; `validate`, `bench` and
`release` read it back, so an artifact is judged on the data its model expects. Each value comes
from, in order: an option (`--image-scale`, `--image-offset`, `--image-mean`, `--image-std`,
`--split`), the artifact's manifest, the model card, else a default; the result says which.

Preprocessing applies to raw pixels only: image folders, and uint8 arrays fed to a float input.
Float arrays are fed as given (they are the model's input already).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from trtconv.core.data_contract import (
    DEFAULT,
    DEFAULT_SCALE,
    NCHW,
    NHWC,
    PIXEL_FIELDS,
    Preprocessing,
)
from trtconv.core.errors import UsageError
from trtconv.core.model_io import InputValue, TensorSpec
from trtconv.options.shared import HELD_OUT, SPLITS, PreprocessingOptions

log = logging.getLogger(__name__)

OPTION, MANIFEST, MODEL_CARD, SIGNATURE = "option", "manifest", "model card", "model signature"
INPUT_VALUES = "input_values"  # the key of a recorded preprocessing block (Preprocessing.to_dict)
DEFAULTS: dict[str, Any] = {"scale": DEFAULT_SCALE, "offset": 0.0, "mean": None, "std": None}


def parse_channels(text: str | None, flag: str) -> tuple[float, ...] | None:
    """'0.485,0.456,0.406' -> a tuple; None stays None. Raises UsageError naming `flag`."""
    if text is None:
        return None
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageError(f"{flag} takes numbers like 0.485,0.456,0.406, found '{text}'.") from None
    if not values:
        raise UsageError(f"{flag} takes one number per channel, found '{text}'.")
    return values


def resolve_preprocessing(
    options: PreprocessingOptions | None,
    recorded: Sequence[tuple[str, Mapping[str, Any] | None]] = (),
    layout: str | None = None,
) -> Preprocessing:
    """Each value from `options`, else the first of `recorded` ((where, preprocessing block):
    manifest, then model card) that has it, else the default; `layout` is the input's own."""
    options = options or PreprocessingOptions()
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in PIXEL_FIELDS:
        chosen = getattr(options, key)
        where = OPTION
        if chosen is None:
            where, chosen = next(
                (
                    (_origin(name, block, key), block[key])
                    for name, block in recorded
                    if block and key in block
                ),
                (DEFAULT, DEFAULTS[key]),
            )
        if isinstance(chosen, list | tuple):
            chosen = tuple(chosen)  # mean, std: one value per channel
        values[key] = chosen if key in ("mean", "std") else float(chosen)
        sources[key] = where
    where, recorded_layout = next(
        (
            (_origin(name, block, "layout"), block["layout"])
            for name, block in recorded
            if block and block.get("layout")
        ),
        (SIGNATURE, layout or NHWC),
    )
    sources["layout"] = where
    where, input_values = _input_values(options, recorded)
    if input_values:
        sources["input_values"] = where
    return Preprocessing(
        **values, layout=str(recorded_layout), sources=sources, input_values=input_values
    )


def _input_values(
    options: PreprocessingOptions, recorded: Sequence[tuple[str, Mapping[str, Any] | None]]
) -> tuple[str, dict[str, InputValue]]:
    """(where, the inputs' fixed values): `--input-value`, else the first recorded block (a
    manifest's) that has them, else none."""
    if options.input_values:
        return OPTION, dict(options.input_values)
    return next(
        (
            (_origin(name, block, INPUT_VALUES), dict(block[INPUT_VALUES]))
            for name, block in recorded
            if block and INPUT_VALUES in block
        ),
        (DEFAULT, {}),
    )


def _origin(where: str, block: Mapping[str, Any], key: str) -> str:
    """`where` a value was read, and where a manifest's came from before: "manifest (option)".
    A model card's values are what the model was trained with, whatever chose them."""
    before = (block.get("sources") or {}).get(key)
    return f"{where} ({before})" if before and where != MODEL_CARD else where


def input_layout(spec: TensorSpec) -> str | None:
    """NHWC or NCHW for a 4-D image input (channels 1, 3 or 4 last, else 1 or 3 first); None
    for anything else."""
    if len(spec.shape) != 4:
        return None
    channels_last, channels_first = spec.shape[3], spec.shape[1]
    if channels_last in (1, 3, 4):
        return NHWC
    if channels_first in (1, 3):
        return NCHW
    return None


def check_split(split: str | None) -> str:
    """The evaluation split (held-out by default). Raises UsageError for another value."""
    if split is None:
        return HELD_OUT
    if split not in SPLITS:
        raise UsageError(f"--split must be one of {', '.join(SPLITS)}, found '{split}'.")
    return split


def is_default(preprocessing: Preprocessing) -> bool:
    """True when no scale, offset, mean or std was given or recorded anywhere (a value a
    manifest recorded as the default is still the default)."""
    return all(
        preprocessing.sources.get(key, DEFAULT).endswith((DEFAULT, f"({DEFAULT})"))
        for key in PIXEL_FIELDS
    )
