"""The one reader of model data: train, convert (calibration and validation), validate and bench
all read a data spec through here, with one set of rules, keyed by input name in the model's dtype.

A data spec is `digits`, `PATH.npz`, an image folder, or `random`. Its calibration part and its
held-out (validation) part never overlap; the bench reads all of it:

- `digits`: scikit-learn's fixed split (calibration: train, validation: test, bench: all);
- `.npz` and image folders: the same seeded 80/20 split `trtconv train` uses, so a file used for
  training, calibration and validation is validated on samples the model never trained on;
- `random`: a seed per role; valid for timing only.

Names: an `.npz` holds one array per input name; a single array feeds a single-input model
whatever its name (said in one log line).
Dtypes: an array of the same kind as the input (float64 for a float32 input, int32 for int64) is
cast, because `np.savez` of Python data gives float64 and the values survive the cast to the
precision the model computes in anyway. uint8 arrays for a float input are raw pixels, like
image files: the model's preprocessing (trtconv.calib.preprocessing) makes them inputs, as `train`
does, so the same file trains, calibrates and validates alike. Any other kind (int32 for a float
input) is refused: its meaning is unknown.
Images: resized to the input's static height and width, then preprocessed the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import numpy as np

from trtconv.calib.calibration_result import CalibrationRecord
from trtconv.calib.preprocessing import (
    MANIFEST,
    MODEL_CARD,
    NCHW,
    Preprocessing,
    input_layout,
    is_default,
    resolve_preprocessing,
)
from trtconv.calib.sources import (
    DIGITS,
    ArraySet,
    ImagePreprocessing,
    check_arrays,
    check_input_shape,
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
    TensorSpec,
    collapse_scalars,
    numpy_dtype,
    scalar_inputs,
)
from trtconv.model.savedmodel import read_model_card
from trtconv.options.shared import PreprocessingOptions

log = logging.getLogger(__name__)
# A batch of images (or maps) has at least this many axes: N, H, W (and channels).
IMAGE_RANK = 3

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


def note_pixels(prep: Preprocessing, what: str) -> None:
    """Say how raw pixels become inputs; warn when nothing said so (the 1/255 default)."""
    if is_default(prep):
        log.warning(
            "%s are scaled by 1/255: no option, manifest or model card says otherwise (use "
            "--image-scale, --image-offset, --image-mean and --image-std if the model expects "
            "another scaling)",
            what,
        )
    else:
        log.info("%s become inputs as %s", what, prep.describe())


def fit_to_signature(
    data: ArraySet, signature: ModelSignature, preprocessing: Preprocessing | None = None
) -> ArraySet:
    """Key `data` by the model's input names, cast same-kind dtypes, check every shape.

    A single array feeds a single-input model, whatever its name; otherwise the names must match
    exactly.
    uint8 arrays for a float input are raw pixels: `preprocessing` (default 1/255) makes them
    inputs; its `input_values` (`--input-value`) fill the inputs the data does not hold. A
    rank-0 input (a TF1 flag) takes one value per sample, all equal. Raises InputError naming
    the input, the expected and the found, and UsageError for an input value that cannot fit.
    """
    values = dict(preprocessing.input_values) if preprocessing is not None else {}
    given = set_values(values, signature, len(data), data.source)
    inputs = {**_match_names(data, signature, set(values)), **given}
    fitted: dict[str, np.ndarray] = {}
    for spec in signature.inputs:
        array = inputs[spec.name]
        if array.ndim == 0:
            raise InputError(
                f"{data.source}: input '{spec.name}' is a scalar; expected a batch "
                f"{spec.describe()}."
            )
        if not spec.shape:
            _check_one_value(array, spec, data.source)
        fitted[spec.name] = _cast(array, spec, data.source, preprocessing)
    pixels = data.raw_pixels or any(
        inputs[spec.name].dtype == np.uint8 and numpy_dtype(spec.dtype).kind == "f"
        for spec in signature.inputs
    )
    result = ArraySet(
        fitted, data.labels, data.source, data.class_names, pixels, scalar_inputs(signature)
    )
    check_arrays(result)
    for spec in signature.inputs:
        check_input_shape(result, spec.name, spec.shape[1:])
    return result


def _match_names(
    data: ArraySet, signature: ModelSignature, given: set[str]
) -> dict[str, np.ndarray]:
    """The data's arrays keyed by the input names `given` (set by --input-value) leaves."""
    both = sorted(given & set(data.inputs))
    if both:
        raise UsageError(
            f"--input-value sets input '{both[0]}', which {data.source} holds too: give its "
            "values one way."
        )
    names = [name for name in signature.input_names if name not in given]
    if set(data.inputs) == set(names):
        return data.inputs
    if len(names) == 1 and len(data.inputs) == 1:
        # One array, one input: there is nothing to choose between.
        ((array_name, array),) = data.inputs.items()
        if array_name != "x":  # the documented spelling needs no word
            log.info(
                "%s: its one array '%s' feeds the model's one input '%s'",
                data.source,
                array_name,
                names[0],
            )
        return {names[0]: array}
    found = ", ".join(sorted(data.inputs))
    expected = ", ".join(names)
    scalars = [spec.name for spec in signature.inputs if not spec.shape and spec.name in names]
    hint = f" (set a flag with --input-value {scalars[0]}=VALUE)" if scalars else ""
    raise InputError(
        f"{data.source} holds arrays {found}; the model expects inputs {expected}{hint}."
    )


def set_values(
    values: dict[str, InputValue], signature: ModelSignature, samples: int, source: str
) -> dict[str, np.ndarray]:
    """Each input `values` sets (--input-value), as `samples` equal samples in its dtype.
    Raises UsageError for an unknown input, a dynamic dimension, or a value its dtype cannot
    hold exactly."""
    specs = {spec.name: spec for spec in signature.inputs}
    arrays: dict[str, np.ndarray] = {}
    for name, value in values.items():
        if name not in specs:
            raise UsageError(
                f"--input-value {name}: the model has no input '{name}' (inputs: "
                f"{', '.join(specs)})."
            )
        spec = specs[name]
        if any(d is None for d in spec.shape[1:]):
            raise UsageError(
                f"--input-value {name}: input {spec.describe()} has a dynamic dimension; "
                "give its values in the data instead."
            )
        one = _exact_value(value, spec)
        dims = tuple(int(d) for d in spec.shape[1:])  # type: ignore[arg-type]
        arrays[name] = np.full((samples, *dims), one, dtype=one.dtype)
        log.info("%s: input '%s' set to %s for every sample", source, name, value)
    return arrays


def _exact_value(value: InputValue, spec: TensorSpec) -> np.ndarray:
    """`value` as a 0-d array of the input's dtype; UsageError unless it holds it exactly (a
    bool for a bool input, a number for a numeric one)."""
    want = numpy_dtype(spec.dtype)
    is_bool = isinstance(value, bool)
    if want.kind in "OSU" or (want.kind == "b") != is_bool:
        kind = "true or false" if want.kind == "b" else "a number"
        raise UsageError(
            f"--input-value {spec.name}={str(value).lower()}: input {spec.describe()} takes "
            f"{kind if want.kind not in 'OSU' else 'no value from the command line'}."
        )
    one = np.asarray(value).astype(want)
    if not is_bool and one.item() != value:
        raise UsageError(
            f"--input-value {spec.name}={value}: {want.name} cannot hold it exactly ({one.item()})."
        )
    return one


def _check_one_value(array: np.ndarray, spec: TensorSpec, source: str) -> None:
    """A rank-0 input's data: one value per sample, all equal (fed once per batch)."""
    if array.ndim != 1:
        found = "x".join(map(str, array.shape[1:]))
        raise InputError(
            f"{source}: input {spec.describe()} takes one value for a whole batch; found "
            f"samples of shape {found}."
        )
    distinct = np.unique(array) if array.dtype.kind != "O" else np.unique(array.astype(str))
    if len(distinct) > 1:
        shown = ", ".join(str(v) for v in distinct[:2])
        raise InputError(
            f"{source}: input {spec.describe()} takes one value for a whole batch, found "
            f"{len(distinct)} different values ({shown}, ...); give one: a 0-d array "
            f"(np.array(...)) or --input-value {spec.name}=VALUE."
        )


def _cast(
    array: np.ndarray, spec: TensorSpec, source: str, preprocessing: Preprocessing | None
) -> np.ndarray:
    if spec.is_string:
        return _bytes(array, spec, source)
    want = np.dtype(spec.dtype)
    if array.dtype == want:
        return array
    if array.dtype == np.uint8 and want.kind == "f":
        # 8-bit pixels: the model's preprocessing makes them inputs, as for an image folder.
        prep = preprocessing or Preprocessing()
        note_pixels(prep, f"{source}: uint8 input '{spec.name}' pixels")
        channel_axis = 1 if prep.layout == NCHW else -1
        return prep.apply(array, channel_axis).astype(want)
    # Integer ids and counts cast exactly; integer images are pixels whose scale only the
    # user knows (uint8 is raw pixels, scaled above): they are refused.
    if array.dtype.kind in "iu" and want.kind == "f" and array.ndim < IMAGE_RANK:
        return _exact_float(array, spec, source)
    if array.dtype.kind != want.kind:
        pixels = " (integer images: give uint8 raw pixels, which --image-scale scales, or floats)"
        raise InputError(
            f"{source}: input '{spec.name}' expects dtype {want.name}, found {array.dtype.name} "
            f"(convert it yourself: a {array.dtype.name} -> {want.name} cast can change meaning)"
            f"{pixels if array.dtype.kind in 'iu' and array.ndim >= IMAGE_RANK else ''}."
        )
    log.info("%s: casting input '%s' from %s to %s", source, spec.name, array.dtype, want)
    return array.astype(want)


def _exact_float(array: np.ndarray, spec: TensorSpec, source: str) -> np.ndarray:
    """Integers (token ids, counts) for a float input, cast when the float type holds every
    value exactly (float32: within +-2^24); InputError naming the range otherwise."""
    want = np.dtype(spec.dtype)
    limit = 2 ** (np.finfo(want).nmant + 1)
    low, high = (int(array.min()), int(array.max())) if array.size else (0, 0)
    if max(abs(low), abs(high)) > limit:
        raise InputError(
            f"{source}: input '{spec.name}' expects {want.name}, found {array.dtype.name} "
            f"values in [{low}, {high}]; {want.name} holds integers exactly only within "
            f"+-{limit}: convert them yourself, knowing the cast rounds."
        )
    log.info(
        "%s: input '%s' cast from %s to %s: every value (in [%d, %d]) is exact in %s",
        source,
        spec.name,
        array.dtype.name,
        want.name,
        low,
        high,
        want.name,
    )
    return array.astype(want)


def _bytes(array: np.ndarray, spec: TensorSpec, source: str) -> np.ndarray:
    """A tf.string input's samples as an object array of bytes (str is UTF-8 encoded; a
    fixed-width bytes array loses its values' trailing NUL bytes, as numpy stores them).
    Raises InputError for anything else."""
    if array.dtype.kind in "SU" or (
        array.dtype.kind == "O" and all(isinstance(v, (bytes, str)) for v in array.flat)
    ):
        values = [v.encode() if isinstance(v, str) else bytes(v) for v in array.flat]
        result = np.empty(len(values), dtype=object)
        result[:] = values
        return result.reshape(array.shape)
    raise InputError(
        f"{source}: input '{spec.name}' is a tf.string ({spec.describe()}); expected an array of "
        f"bytes (e.g. encoded PNGs, dtype object or S), found {array.dtype.name}."
    )


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
        recorded_spec(spec), len(data), method, data.sha256(), data.source, stats
    )
