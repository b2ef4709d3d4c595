"""Data fitted to a model's signature: the reader's arrays keyed by the model's input names, in
each input's dtype, and the inputs `--input-value` sets.

Names: an `.npz` holds one array per input name; a single array feeds a single-input model
whatever its name (said in one log line).
Dtypes: an array of the same kind as the input (float64 for a float32 input, int32 for int64) is
cast, because `np.savez` of Python data gives float64 and the values survive the cast to the
precision the model computes in anyway. uint8 arrays for a float input are raw pixels, like
image files: the model's preprocessing (trtconv.calib.preprocessing) makes them inputs, as `train`
does, so the same file trains, calibrates and validates alike. Integers for a float input (token
ids, counts) are cast when the float holds each exactly. Any other kind (int32 for a float image)
is refused: its meaning is unknown.
"""

from __future__ import annotations

import logging

import numpy as np

from trtconv.calib.preprocessing import NCHW, Preprocessing, is_default
from trtconv.calib.sources import ArraySet, check_arrays, check_input_shape
from trtconv.core.errors import InputError, UsageError
from trtconv.core.model_io import InputValue, ModelSignature, TensorSpec, numpy_dtype, scalar_inputs

log = logging.getLogger(__name__)
# A batch of images (or maps) has at least this many axes: N, H, W (and channels).
IMAGE_RANK = 3


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
        inputs=fitted,
        labels=data.labels,
        source=data.source,
        class_names=data.class_names,
        raw_pixels=pixels,
        scalars=scalar_inputs(signature),
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
