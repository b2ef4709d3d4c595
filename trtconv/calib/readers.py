"""The one reader of model data: train, convert (calibration and validation), validate and bench
all read a data spec through here, with one set of rules, keyed by input name in the model's dtype
(trtconv.calib.fitting fits what is read to the model's signature: names, dtypes, set values).

A data spec is `digits`, `PATH.npz`, an image folder, or `random`. Its calibration part and its
held-out (validation) part never overlap; the bench reads all of it:

- `digits`: scikit-learn's fixed split (calibration: train, validation: test, bench: all);
- `.npz` and image folders: the same seeded 80/20 split `trtconv train` uses, so a file used for
  training, calibration and validation is validated on samples the model never trained on;
- `random`: a seed per role; valid for timing only.

Images: resized to the input's static height and width, then preprocessed the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np

from trtconv.calib.calibration_result import CalibrationRecord
from trtconv.calib.fitting import fit_to_signature, note_pixels, set_values
from trtconv.calib.preprocessing import (
    MANIFEST,
    MODEL_CARD,
    NCHW,
    Preprocessing,
    input_layout,
    resolve_preprocessing,
)
from trtconv.calib.sources import (
    DIGITS,
    ArraySet,
    ImagePreprocessing,
    input_stats,
    load_digits,
    load_file,
    recorded_spec,
    split_holdout,
)
from trtconv.core.errors import InputError, UsageError
from trtconv.core.model_io import (
    CalibrationFeed,
    Feeds,
    InputValue,
    ModelSignature,
    collapse_scalars,
    scalar_inputs,
)
from trtconv.model.savedmodel import read_model_card
from trtconv.options.shared import PreprocessingOptions

log = logging.getLogger(__name__)

RANDOM = "random"
CALIBRATION = "calibration"
VALIDATION = "validation"
ALL = "all"  # every sample, no hold-out (the bench's inputs and evaluation data)
ROLES = (CALIBRATION, VALIDATION, ALL)
DIGITS_SPLITS = {CALIBRATION: "train", VALIDATION: "test", ALL: "all"}
RANDOM_SEEDS = {CALIBRATION: 1, VALIDATION: 2, ALL: 0}
DEFAULT_RANDOM_SAMPLES = 256


def read_model_data(
    spec: str,
    signature: ModelSignature,
    *,
    role: str,
    samples: int | None = None,
    saved_model: Path | None = None,
    preprocessing: Preprocessing | None = None,
) -> ArraySet:
    """The `role` part ("calibration", "validation" or "all") of `spec`, fitted to `signature`.

    Returns at most `samples` samples keyed by the model's input names, in the signature dtypes
    (`random`: exactly `samples`, default 256). Raw pixels (image folders, uint8 arrays for a
    float input) become inputs as `preprocessing` says (default: the model card beside
    `saved_model`, else 1/255). Raises UsageError for an unknown spec or role and InputError
    for data that cannot fit.
    """
    if role not in ROLES:
        raise UsageError(f"Unknown data role '{role}'; expected one of {', '.join(ROLES)}.")
    if samples is not None and samples < 1:
        raise UsageError(f"The number of samples must be at least 1, found {samples}.")
    if spec == RANDOM:
        if role != ALL:
            log.warning(
                "calibrating/validating on random data: the result is valid for timing only, "
                "not for accuracy"
            )
        values = preprocessing.input_values if preprocessing is not None else {}
        count = samples or DEFAULT_RANDOM_SAMPLES
        return random_data(signature, count, RANDOM_SEEDS[role], values)
    if preprocessing is None:
        preprocessing = card_preprocessing(signature, saved_model)
    prep = preprocessing
    strings = any(spec.is_string for spec in signature.inputs)
    part = load_part(spec, role, lambda: image_preprocessing(signature, prep), strings)
    data = fit_to_signature(part, signature, prep)
    if samples is not None and samples < len(data):
        return data.head(samples)
    if samples is not None and samples > len(data):
        log.info(
            "%s: %d samples requested, %d available; using all", data.source, samples, len(data)
        )
    return data


def card_preprocessing(
    signature: ModelSignature,
    saved_model: Path | None,
    options: PreprocessingOptions | None = None,
    manifest: Preprocessing | None = None,
) -> Preprocessing:
    """The preprocessing of raw pixels for this model: `options`, else the manifest's data
    contract (`manifest`: its preprocessing), else the model card beside `saved_model`, else
    the defaults; the input layout from the signature."""
    card = read_model_card(saved_model) if saved_model is not None else None
    # Both as blocks: a model card's may hold some values only (the rest default).
    recorded = [
        (MANIFEST, manifest.to_dict() if manifest is not None else None),
        (MODEL_CARD, card.preprocessing if card is not None else None),
    ]
    first = signature.inputs[0] if len(signature.inputs) == 1 else None
    layout = input_layout(first) if first is not None else None
    return resolve_preprocessing(options, recorded, layout)


def load_part(
    spec: str,
    role: str,
    images: Callable[[], ImagePreprocessing] | None = None,
    strings: bool = False,
) -> ArraySet:
    """The `role` part of `digits` or a user data set (as read, not yet fitted to a model).

    `images` gives the preprocessing of an image folder (called only for one); `strings`: the
    model takes tf.string inputs, so an .npz may hold arrays of bytes objects.
    """
    if spec == DIGITS:
        return load_digits(DIGITS_SPLITS[role])
    data = load_file(spec, images, strings)
    if role == ALL:
        return data
    calibration, held_out = split_holdout(data, (CALIBRATION, VALIDATION))
    return calibration if role == CALIBRATION else held_out


def image_preprocessing(signature: ModelSignature, prep: Preprocessing) -> ImagePreprocessing:
    """Decode to the single input's static size and channels (as its layout places them), then
    `prep`. Raises InputError for a model that cannot take images."""
    if len(signature.inputs) != 1:
        raise InputError(
            f"Image folders feed single-input models; the model has {len(signature.inputs)} "
            f"inputs ({', '.join(signature.input_names)})."
        )
    spec = signature.inputs[0]
    if len(spec.shape) != 4 or any(d is None for d in spec.shape[1:]):
        raise InputError(
            f"Image folders need an NHWC or NCHW input with a static size; input "
            f"{spec.describe()} has none."
        )
    dims = [int(d) for d in spec.shape[1:]]  # type: ignore[arg-type]
    height, width, channels = dims if prep.layout != NCHW else (dims[1], dims[2], dims[0])
    note_pixels(prep, "images")
    return ImagePreprocessing((height, width), channels, prep)


def random_data(
    signature: ModelSignature,
    samples: int,
    seed: int,
    values: Mapping[str, InputValue] | None = None,
) -> ArraySet:
    """Seeded inputs shaped by the signature: floats in [0, 1), integers in [0, 10), booleans;
    only good for timing. The inputs `values` sets (--input-value) hold their value. Raises
    InputError for a dynamic non-batch dimension (naming --input-shape and --data), a string
    input, and a rank-0 input (a flag) no value sets."""
    rng = np.random.default_rng(seed)
    source = f"{RANDOM}(seed={seed})"
    inputs = set_values(dict(values or {}), signature, samples, source)
    for spec in signature.inputs:
        if spec.name in inputs:
            continue
        if not spec.shape:
            raise InputError(
                f"Random data cannot choose input {spec.describe()}, one value for a whole "
                f"batch (a flag): set it with --input-value {spec.name}=VALUE."
            )
        if spec.is_string:
            raise InputError(
                f"Random data cannot fill input {spec.describe()}, a tf.string: give real "
                "inputs (--data / --calib-data PATH.npz holding an array of bytes, e.g. "
                "encoded PNGs)."
            )
        if any(d is None for d in spec.shape[1:]):
            example = "x".join(
                ("1" if i == 0 else "?") if d is None else str(d) for i, d in enumerate(spec.shape)
            )
            raise InputError(
                f"Random data needs static dimensions; input {spec.describe()} has a dynamic "
                f"one: give its shape with --input-shape {spec.name}={example} (each ? a size) "
                "or real inputs with --data / --calib-data."
            )
        shape = (samples, *(int(d) for d in spec.shape[1:]))  # type: ignore[arg-type]
        dtype = np.dtype(spec.dtype)
        if dtype.kind == "f":
            inputs[spec.name] = rng.random(shape, dtype=np.float32).astype(dtype)
        elif dtype.kind in "iu":
            inputs[spec.name] = rng.integers(0, 10, shape).astype(dtype)
        elif dtype.kind == "b":
            inputs[spec.name] = rng.random(shape) < 0.5
        else:
            raise InputError(f"Random data cannot fill input {spec.describe()}.")
    return ArraySet(inputs, None, source, scalars=scalar_inputs(signature))


def batches(data: ArraySet, batch_size: int) -> Iterator[Feeds]:
    """Consecutive batches keyed by input name; the last one may be smaller."""
    if batch_size < 1:
        raise UsageError(f"Batch size must be at least 1, found {batch_size}.")
    for start in range(0, len(data), batch_size):
        yield {name: array[start : start + batch_size] for name, array in data.inputs.items()}


def whole_batches(data: ArraySet, batch_size: int) -> ArraySet:
    """`data` cut to a multiple of `batch_size` (at least one batch) so every batch is equal.

    ONNX Runtime's histogram calibrators (entropy, percentile) stack per-batch outputs and fail
    on a smaller last batch.
    """
    batch = min(batch_size, len(data))
    keep = len(data) - len(data) % batch
    if keep != len(data):
        log.info("%s: calibrating on %d samples (whole batches of %d)", data.source, keep, batch)
    return data.head(keep)


def calibration_feed(data: ArraySet, batch_size: int) -> CalibrationFeed:
    """A callable giving a fresh batch iterator each call (calibrators may read the data twice).
    Its batches feed libraries directly (ONNX Runtime's calibrators, NNCF): a rank-0 input
    gets its one value."""

    def feed() -> Iterator[Feeds]:
        return (collapse_scalars(feeds, data.scalars) for feeds in batches(data, batch_size))

    return feed


def describe(data: ArraySet, spec: str, method: str | None = None) -> CalibrationRecord:
    """The manifest's calibration block (the inputs' spread lets validate see data on another
    scale)."""
    stats = input_stats(data)
    return CalibrationRecord(
        source=recorded_spec(spec),
        samples=len(data),
        method=method,
        sha256=data.sha256(),
        part=data.source,
        input_stats=stats,
    )
