"""Load labelled or unlabelled arrays from `digits`, an `.npz`, or an image folder.

Every loader checks what it read: empty data, NaN/Inf, labels out of range and shapes that do not
fit the model each raise InputError with one sentence naming the file, expected and found. A user
data set has one seeded hold-out split (`split_holdout`), shared by train, convert and validate.
"""

from __future__ import annotations

import logging
import os
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trtconv.calib.calibration_result import InputStats
from trtconv.calib.preprocessing import NCHW, Preprocessing
from trtconv.core.errors import InputError, UsageError
from trtconv.core.fsutil import sha256_bytes

log = logging.getLogger(__name__)

DIGITS = "digits"
DIGITS_TEST_FRACTION = 0.25
DIGITS_SPLIT_SEED = 0  # fixed: the held-out split is the same on every machine and every run
# A user data set's held-out part: the same fixed, seeded 20% whether training holds out its test
# set or convert/validate hold out validation samples, so held-out data stays held out.
HOLDOUT_FRACTION = 0.2
HOLDOUT_SEED = 0
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp"}


@dataclass(frozen=True)
class ImagePreprocessing:
    """How image files become model inputs: decoded to `channels` (1 grey, 3 RGB; None: RGB
    unless every image is grey), resized to `image_size` (None: the images' own size, which
    must then be the same for all), then preprocessed by `pixels` (scale, offset, mean, std,
    layout)."""

    image_size: tuple[int, int] | None
    channels: int | None
    pixels: Preprocessing = field(default_factory=Preprocessing)


@dataclass
class ArraySet:
    """Arrays keyed by input name (`x` when the source does not name them) and optional labels."""

    inputs: dict[str, np.ndarray]
    labels: np.ndarray | None
    source: str
    class_names: list[str] | None = None
    # Made from raw pixels (image files, uint8 arrays) by a preprocessing; float arrays are not.
    raw_pixels: bool = False
    # Rank-0 inputs (a TF1 `is_training` flag): held as one (equal) value per sample, so they
    # slice like every input, and fed as the one value (trtconv.core.model_io.collapse_scalars).
    scalars: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return len(next(iter(self.inputs.values())))

    def take(self, indices: np.ndarray) -> ArraySet:
        labels = None if self.labels is None else self.labels[indices]
        inputs = {name: array[indices] for name, array in self.inputs.items()}
        return ArraySet(
            inputs=inputs,
            labels=labels,
            source=self.source,
            class_names=self.class_names,
            raw_pixels=self.raw_pixels,
            scalars=self.scalars,
        )

    def head(self, count: int) -> ArraySet:
        return self.take(np.arange(min(count, len(self))))

    @property
    def x(self) -> np.ndarray:
        """The only input array; for single-input models."""
        if len(self.inputs) != 1:
            raise InputError(f"{self.source} holds several inputs ({', '.join(self.inputs)}).")
        return next(iter(self.inputs.values()))

    def sha256(self) -> str:
        """Content hash over every array (names, dtypes, shapes, bytes) in a fixed order."""
        parts: list[bytes] = []
        arrays = dict(self.inputs)
        if self.labels is not None:
            arrays["__labels__"] = self.labels
        for name in sorted(arrays):
            array = np.ascontiguousarray(arrays[name])
            parts.append(f"{name}|{array.dtype}|{array.shape}|".encode())
            if array.dtype.kind == "O":  # bytes objects (string inputs): their values, sized
                parts += [f"{len(v)}|".encode() + bytes(v) for v in array.flat]
            else:
                parts.append(array.tobytes())
        return sha256_bytes(b"".join(parts))


def split_holdout(
    data: ArraySet, names: tuple[str, str] = ("train", "test")
) -> tuple[ArraySet, ArraySet]:
    """(kept, held_out): the fixed, seeded 80/20 split of a user data set; they never overlap.

    The parts' sources are labelled with `names` (e.g. `x.npz[train]`). Raises InputError when
    there are too few samples for both parts.
    """
    order = np.random.default_rng(HOLDOUT_SEED).permutation(len(data))
    cut = int(len(data) * (1 - HOLDOUT_FRACTION))
    if cut == 0 or cut == len(data):
        raise InputError(
            f"{data.source} has {len(data)} samples: too few to hold out a part (need at least 2)."
        )
    kept, held_out = data.take(order[:cut]), data.take(order[cut:])
    kept.source, held_out.source = (f"{data.source}[{name}]" for name in names)
    return kept, held_out


def load_digits(split: str = "all") -> ArraySet:
    """scikit-learn's bundled 8x8 digits as float32 NHWC in [0, 1], with a fixed held-out split.

    `split` is "train" (75%), "test" (the held-out 25%) or "all".
    """
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = (bunch.images / 16.0).astype(np.float32)[..., np.newaxis]
    labels = bunch.target.astype(np.int64)
    order = np.random.default_rng(DIGITS_SPLIT_SEED).permutation(len(labels))
    cut = int(len(labels) * (1 - DIGITS_TEST_FRACTION))
    indices = {"train": order[:cut], "test": order[cut:], "all": np.arange(len(labels))}
    if split not in indices:
        raise UsageError(f"Unknown digits split '{split}'; expected train, test or all.")
    chosen = indices[split]
    names = [str(i) for i in range(10)]
    return ArraySet({"x": images[chosen]}, labels[chosen], f"digits[{split}]", names)


# Arrays an .npz may hold beside the inputs, which no reader takes for one: the outputs `serve
# --shadow-capture` keeps beside the inputs of the samples that disagreed (served/NAME,
# native/NAME), so that the same file validates and calibrates.
OUTPUTS = ("served/", "native/")


def load_npz(path: Path, strings: bool = False) -> ArraySet:
    """An `.npz` with one array per input name (or a single `x`) and optional labels `y`;
    arrays named `served/...` and `native/...` (model outputs kept beside them) are left out.

    `strings`: the model takes tf.string inputs, whose bytes objects an .npz stores pickled;
    only then are object arrays read (the file is the user's own data, like their model).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"Data file {path} does not exist.")
    try:
        with np.load(path, allow_pickle=strings) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except EOFError as exc:  # an empty or truncated file
        size = path.stat().st_size
        raise InputError(
            f"Data file {path} is not a readable .npz archive (empty or truncated: {size} bytes)."
        ) from exc
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise InputError(f"Data file {path} is not a readable .npz archive ({exc}).") from exc
    arrays = {name: array for name, array in arrays.items() if not name.startswith(OUTPUTS)}
    labels = arrays.pop("y", None)
    if not arrays:
        raise InputError(f"Data file {path} holds no input arrays (expected 'x' or input names).")
    data = ArraySet(per_sample(arrays, labels, path), labels, str(path))
    check_arrays(data)
    return data


def per_sample(
    arrays: dict[str, np.ndarray], labels: np.ndarray | None, path: Path
) -> dict[str, np.ndarray]:
    """`arrays` with each 0-d array (one value, as a TF1 flag is written: `np.array(False)`)
    repeated once per sample, so every array slices alike; the samples are counted by the
    labels or the other arrays (1 when every array is 0-d)."""
    if all(array.ndim for array in arrays.values()):
        return arrays
    counts = [len(a) for a in arrays.values() if a.ndim]
    counts += [len(labels)] if labels is not None else []
    if not counts:
        log.info("%s: every array is one value: one sample", path)
    count = min(counts, default=1)
    return {
        name: np.repeat(array[np.newaxis], count) if not array.ndim else array
        for name, array in arrays.items()
    }


def load_image_folder(path: Path, prep: ImagePreprocessing) -> ArraySet:
    """A folder with one sub-folder per class; images decoded, resized and preprocessed as
    `prep` says. Raises InputError for a folder without classes or images, an image that cannot
    be decoded, and images of different sizes when `prep` names no size."""
    path = Path(path)
    classes = sorted(p.name for p in path.iterdir() if p.is_dir())
    if not classes:
        raise InputError(f"Image folder {path} has no class sub-folders.")
    files = [
        (label, file)
        for label, name in enumerate(classes)
        for file in sorted((path / name).iterdir())
        if file.suffix.lower() in IMAGE_SUFFIXES
    ]
    if not files:
        raise InputError(f"Image folder {path} holds no images ({', '.join(IMAGE_SUFFIXES)}).")
    channels = prep.channels or _channels([file for _, file in files])
    decoded = [_decode(file, channels, prep.image_size) for _, file in files]
    sizes = sorted({image.shape for image in decoded})
    if len(sizes) > 1:
        found = " and ".join("x".join(map(str, size[:2])) for size in sizes[:2])
        raise InputError(
            f"Image folder {path} holds images of different sizes ({found}, ...): give "
            "--image-size to resize them to one."
        )
    pixels = np.stack(decoded)
    x = prep.pixels.apply(pixels)
    if prep.pixels.layout == NCHW:
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    labels = np.asarray([label for label, _ in files], np.int64)
    data = ArraySet({"x": x}, labels, str(path), classes, raw_pixels=True)
    check_arrays(data)
    return data


GREY_MODES = ("1", "L", "LA", "I", "I;16")


def _channels(files: list[Path]) -> int:
    """1 when every image is grey, else 3 (the images' own channels)."""
    from PIL import Image

    for file in files:
        try:
            with Image.open(file) as image:
                if image.mode not in GREY_MODES:
                    return 3
        except OSError as exc:
            raise InputError(f"Image {file} could not be decoded ({exc}).") from exc
    return 1


def _decode(file: Path, channels: int, size: tuple[int, int] | None) -> np.ndarray:
    """One image as float32 HxWxC pixels (0-255) with `channels`, resized to `size` if given."""
    from PIL import Image

    try:
        with Image.open(file) as image:
            converted = image.convert("L" if channels == 1 else "RGB")
            if size is not None:
                converted = converted.resize((size[1], size[0]))
            array = np.asarray(converted, dtype=np.float32)
    except OSError as exc:
        raise InputError(f"Image {file} could not be decoded ({exc}).") from exc
    return array.reshape(*array.shape[:2], channels)


def check_arrays(data: ArraySet, num_classes: int | None = None) -> None:
    """Reject empty data, mismatched lengths, NaN/Inf and labels outside [0, num_classes)."""
    lengths = {name: len(array) for name, array in data.inputs.items()}
    if min(lengths.values()) == 0:
        raise InputError(f"{data.source} is empty: 0 samples.")
    if len(set(lengths.values())) > 1 or (
        data.labels is not None and len(data.labels) != min(lengths.values())
    ):
        if data.labels is not None:
            lengths["y"] = len(data.labels)
        found = ", ".join(f"{k}={v}" for k, v in lengths.items())
        raise InputError(f"{data.source}: arrays differ in length ({found}).")
    for name, array in data.inputs.items():
        if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
            bad = int((~np.isfinite(array)).sum())
            raise InputError(f"{data.source}: input '{name}' holds {bad} NaN or Inf values.")
    if data.labels is not None:
        if not np.issubdtype(data.labels.dtype, np.integer):
            raise InputError(
                f"{data.source}: labels 'y' must be integers, found {data.labels.dtype}."
            )
        if num_classes is not None:
            low, high = int(data.labels.min()), int(data.labels.max())
            if low < 0 or high >= num_classes:
                raise InputError(
                    f"{data.source}: labels must lie in [0, {num_classes - 1}], "
                    f"found [{low}, {high}]."
                )


def check_input_shape(
    data: ArraySet, name: str, expected: tuple[int | None, ...], what: str = "model"
) -> None:
    """Raise InputError unless every sample of `data.inputs[name]` fits `expected` (no batch)."""
    array = data.inputs[name]
    found = tuple(array.shape[1:])
    fits = len(found) == len(expected) and all(
        e is None or e == f for e, f in zip(expected, found, strict=True)
    )
    if not fits:
        want = "x".join("?" if e is None else str(e) for e in expected) or "one value"
        held = (
            f"has samples of shape {'x'.join(map(str, found))}"
            if found
            else ("holds one value per sample (a 0-d array, or one number each)")
        )
        raise InputError(f"{data.source}: input '{name}' {held}, but the {what} expects {want}.")


def recorded_spec(spec: str) -> str:
    """`spec` as a manifest records it: a data path made absolute, so that `validate` and
    `bench` read the same data from any directory (a relative path meant the directory the
    conversion ran in); "digits", "random" and other names as given."""
    if spec in (DIGITS, "random") or not Path(spec).exists():
        return spec
    return os.path.abspath(spec)


def load_file(
    spec: str, images: Callable[[], ImagePreprocessing] | None = None, strings: bool = False
) -> ArraySet:
    """A user data set: an `.npz` (`strings`: arrays of bytes objects allowed), or an image
    folder decoded as `images()` says.

    Raises UsageError for a path that does not exist (or an image folder without `images`) and
    InputError for a file that is not an `.npz`.
    """
    path = Path(spec)
    if path.suffix == ".npz":
        return load_npz(path, strings)
    if path.is_dir():
        if images is None:
            raise UsageError(f"Image folder {path} needs an image size (from a model card).")
        return load_image_folder(path, images())
    if not path.exists():
        raise UsageError(
            f"Data source '{spec}' is neither 'digits', 'random', an existing .npz file nor an "
            "image folder."
        )
    raise InputError(f"Data source {path} is a {path.suffix or 'file'}; expected .npz or a folder.")


def input_stats(data: ArraySet) -> dict[str, InputStats]:
    """Mean, standard deviation, min and max of each float input (recorded with calibration)."""
    stats = {}
    for name, array in data.inputs.items():
        if np.issubdtype(array.dtype, np.floating) and array.size:
            values = array.astype(np.float64)
            stats[name] = InputStats(
                float(values.mean()), float(values.std()), float(values.min()), float(values.max())
            )
    return stats
