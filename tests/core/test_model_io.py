"""What a signature accepts: its fixed batch, shapes given for dynamic inputs, string inputs;
and the data readers feeding string inputs (no TensorFlow)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trtconv.calib.fitting import fit_to_signature
from trtconv.calib.readers import ALL, random_data, read_model_data
from trtconv.calib.sources import ArraySet, load_npz
from trtconv.core.errors import InputError, UsageError
from trtconv.core.model_io import (
    ModelSignature,
    TensorSpec,
    dtype_fits,
    missing_signature,
    numpy_dtype,
    parse_input_shapes,
)
from trtconv.options.bench import BenchOptions
from trtconv.options.convert import ConvertOptions
from trtconv.options.shared import DEFAULT_BATCH_SIZES

FIXED = ModelSignature((TensorSpec("image", (1, 32, 32, 3), "float32"),), ())
ANY = ModelSignature((TensorSpec("image", (None, 32, 32, 3), "float32"),), ())
DYNAMIC = ModelSignature((TensorSpec("image", (None, None, None, 3), "float32"),), ())
PNG = ModelSignature((TensorSpec("png", (None,), "string"),), ())


def test_the_signature_decides_the_batch_sizes_it_accepts() -> None:
    assert (FIXED.fixed_batch, ANY.fixed_batch) == (1, None)
    assert (FIXED.batch_for(32), ANY.batch_for(32)) == (1, 32)
    # The default sizes become the fixed batch; sizes the user named must all be it.
    assert FIXED.accepted_batch_sizes(DEFAULT_BATCH_SIZES, DEFAULT_BATCH_SIZES, "m", "-b") == (1,)
    assert FIXED.accepted_batch_sizes((1,), DEFAULT_BATCH_SIZES, "m", "-b") == (1,)
    assert ANY.accepted_batch_sizes((4, 8), DEFAULT_BATCH_SIZES, "m", "-b") == (4, 8)
    message = (
        r"^m takes batch size 1 only \(input image: float32\[1,32,32,3\]\); --batch-sizes asks "
        r"for 8: give --batch-sizes 1 or leave it out\.$"
    )
    with pytest.raises(UsageError, match=message):
        FIXED.accepted_batch_sizes((1, 8), DEFAULT_BATCH_SIZES, "m", "--batch-sizes")


def test_input_shapes_fill_in_dynamic_dimensions() -> None:
    shapes = parse_input_shapes(["image=1x48x48x3"])
    assert shapes == {"image": (1, 48, 48, 3)}
    assert DYNAMIC.with_shapes(shapes).inputs[0].shape == (None, 48, 48, 3)  # batch stays free
    data = random_data(DYNAMIC.with_shapes(shapes), 4, seed=0)
    assert data.x.shape == (4, 48, 48, 3)
    with pytest.raises(UsageError, match="names input 'img'; the model's inputs are image"):
        DYNAMIC.with_shapes({"img": (1, 48, 48, 3)})
    with pytest.raises(UsageError, match=r"image=1x48x48x4 does not fit input image"):
        DYNAMIC.with_shapes({"image": (1, 48, 48, 4)})
    for bad in ("image", "image=1x0x3", "image=axb", "=1x2"):
        with pytest.raises(UsageError, match="--input-shape takes NAME=DIMS"):
            parse_input_shapes([bad])
    assert ConvertOptions("m", "fp32", input_shapes=shapes).input_shapes == shapes
    with pytest.raises(UsageError, match="sizes must be positive"):
        BenchOptions((Path("m"),), input_shapes={"image": (1, 0)})
    with pytest.raises(UsageError, match="--signature needs a signature name"):
        ConvertOptions("m", "fp32", signature=" ")


def test_random_data_on_a_dynamic_input_names_input_shape_and_data() -> None:
    """Before: "Random data needs static dimensions" and nothing about what to do."""
    with pytest.raises(InputError) as caught:
        random_data(DYNAMIC, 4, seed=0)
    assert "--input-shape image=1x?x?x3" in str(caught.value)
    assert "--data / --calib-data" in str(caught.value)
    with pytest.raises(InputError, match=r"a tf\.string: give real inputs"):
        random_data(PNG, 4, seed=0)


def test_string_inputs_take_arrays_of_bytes() -> None:
    assert numpy_dtype("string") == np.dtype(object) and numpy_dtype("int64") == np.int64
    blobs = np.empty(3, dtype=object)
    blobs[:] = [b"\x89PNG\x00a", b"b", "text"]
    fitted = fit_to_signature(ArraySet({"x": blobs}, None, "blobs"), PNG)
    assert list(fitted.inputs["png"]) == [b"\x89PNG\x00a", b"b", b"text"]  # str: UTF-8
    assert dtype_fits(fitted.inputs["png"], "string") and not dtype_fits(blobs, "float32")
    fixed_width = fit_to_signature(ArraySet({"x": np.array([b"ab", b"c"])}, None, "s"), PNG)
    assert list(fixed_width.inputs["png"]) == [b"ab", b"c"]
    with pytest.raises(InputError, match=r"'png' is a tf\.string .* found float32"):
        fit_to_signature(ArraySet({"x": np.zeros(3, np.float32)}, None, "floats"), PNG)
    # The content hash reads the bytes, not the objects' addresses.
    again = fit_to_signature(ArraySet({"x": blobs.copy()}, None, "blobs"), PNG)
    assert fitted.sha256() == again.sha256()


def test_an_npz_of_bytes_objects_is_read_for_string_models_only(tmp_path: Path) -> None:
    blobs = np.empty(4, dtype=object)
    blobs[:] = [b"a", b"bb", b"ccc", b"dddd"]
    path = tmp_path / "blobs.npz"
    np.savez(path, x=blobs, y=np.arange(4))
    data = read_model_data(str(path), PNG, role=ALL)
    assert list(data.inputs["png"]) == [b"a", b"bb", b"ccc", b"dddd"]
    with pytest.raises(InputError, match="allow_pickle"):  # numbers never unpickle
        load_npz(path)


def test_a_missing_signature_lists_those_there_are() -> None:
    error = missing_signature("m", "serving_default", ["predict_logits", "extra"])
    assert isinstance(error, UsageError) and error.exit_code == 2
    assert str(error) == (
        "SavedModel m has no 'serving_default' signature (found: extra, predict_logits); "
        "choose one with --signature NAME (model.signature in a release config)."
    )
