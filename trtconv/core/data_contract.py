"""The model's data contract as it is recorded (manifest, model card, results): how raw pixels
become its input and its layout (`Preprocessing`), the data and split it was judged on, and which
samples a conversion put to which purpose (`Purpose`). trtconv.calib.preprocessing resolves each
value from options, manifest and model card; this module only holds the records, in core because
calib, the manifest and the bench result all carry them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from trtconv.core.model_io import InputValue
from trtconv.core.results import JsonResult, optional_key

DEFAULT = "default"
NHWC, NCHW = "NHWC", "NCHW"
DEFAULT_SCALE = 1.0 / 255.0
PIXEL_FIELDS = ("scale", "offset", "mean", "std")
NO_IMAGE_INPUT = "fed as given (no input is an image)"


@dataclass(frozen=True)
class Preprocessing:
    """Raw pixels -> model input: ((x * scale + offset) - mean) / std, mean and std per channel
    (or one value for all); `layout` is the input's (NHWC or NCHW). `sources` says where each
    value came from. `input_values`: inputs the data does not hold, each set to one value for
    every sample (`--input-value`, a TF1 `is_training` flag)."""

    scale: float = DEFAULT_SCALE
    offset: float = 0.0
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None
    layout: str = NHWC
    sources: Mapping[str, str] = field(default_factory=dict)
    input_values: Mapping[str, InputValue] = field(default_factory=dict)

    def apply(self, pixels: np.ndarray, channel_axis: int = -1) -> np.ndarray:
        """`pixels` as float32 model input."""
        x = pixels.astype(np.float32) * np.float32(self.scale) + np.float32(self.offset)
        shape = [1] * x.ndim
        shape[channel_axis] = -1
        if self.mean is not None:
            x = x - np.asarray(self.mean, np.float32).reshape(shape)
        if self.std is not None:
            x = x / np.asarray(self.std, np.float32).reshape(shape)
        return x

    def describe(self) -> str:
        """`x * 0.00392 + 0 (default)`, with mean/std when set and where the values came from."""
        text = f"x * {self.scale:.6g} + {self.offset:g}"
        if self.mean is not None or self.std is not None:
            text = f"({text} - {list(self.mean or [0])}) / {list(self.std or [1])}"
        origins = list(dict.fromkeys(self.sources.get(key, DEFAULT) for key in PIXEL_FIELDS))
        return f"{text} ({', '.join(origins)})"

    def to_dict(self) -> dict[str, Any]:
        """The `preprocessing` block of a manifest's data contract."""
        block: dict[str, Any] = {
            "scale": self.scale,
            "offset": self.offset,
            "mean": None if self.mean is None else list(self.mean),
            "std": None if self.std is None else list(self.std),
            "layout": self.layout,
            "sources": dict(self.sources),
            "summary": self.describe(),
        }
        if self.input_values:  # written only when set: older manifests read the same
            block["input_values"] = dict(self.input_values)
        return block


@dataclass(frozen=True)
class Purpose:
    """One purpose a conversion put its data to (trtconv.calib.purposes): positions
    `start:stop` of the `part`'s seeded order of `source`, and the source's `total` samples
    (None when it was not read whole)."""

    purpose: str
    source: str
    part: str
    start: int
    stop: int
    samples: int
    total: int | None


@dataclass(frozen=True)
class DataContract(JsonResult):
    """The data a model was judged (or converted) on and how it was read: the data and its
    split, each with where it came from, the preprocessing of raw pixels and whether the data
    had any (`preprocessing_applied`: float arrays are fed as given), whether the model has an
    image input at all (`image_inputs` False: none, e.g. a text model's token ids; pixels are
    then never spoken of), the fitted samples a validation left out, and (a conversion's)
    which samples served which purpose. A key is in the document only when set (a bench
    without evaluation data records the preprocessing alone); `purposes` absent and empty
    differ (a conversion that records none)."""

    data: str | None = optional_key()
    split: str | None = optional_key()
    preprocessing: Preprocessing = field(default_factory=Preprocessing)
    preprocessing_applied: bool | None = optional_key()
    data_from: str | None = optional_key()
    split_from: str | None = optional_key()
    fitted_samples_excluded: int | None = optional_key()
    purposes: tuple[Purpose, ...] | None = optional_key()
    image_inputs: bool | None = optional_key()  # False only: no input is an image

    @property
    def summary(self) -> str:
        """How raw pixels become inputs, or that none were (arrays fed as given), and for a
        model without an image input that there are no pixels to speak of."""
        if self.image_inputs is False and self.preprocessing_applied is not True:
            return NO_IMAGE_INPUT
        text = self.preprocessing.describe()
        if self.preprocessing_applied is False:
            return f"none applied (arrays fed as given; raw pixels would be {text})"
        return text

    @property
    def line(self) -> str:
        """The preprocessing as one line says it: 'raw pixels -> SUMMARY', or for a model
        without an image input 'inputs fed as given (no input is an image)'."""
        if self.summary == NO_IMAGE_INPUT:
            return f"inputs {NO_IMAGE_INPUT}"
        return f"raw pixels -> {self.summary}"

    def to_json(self) -> dict[str, Any]:
        """The `data_contract` block of a manifest and of validate's and bench's documents."""
        document = super().to_json()
        document["preprocessing"] = {**self.preprocessing.to_dict(), "summary": self.summary}
        if self.purposes is not None and "data_from" in document:
            # A conversion's contract (a manifest's) has always named where its data came from
            # first; keep manifest.json as it was.
            document = {"data_from": document.pop("data_from"), **document}
        return document

    def with_purposes(self, purposes: tuple[Purpose, ...]) -> DataContract:
        """This contract recording `purposes`."""
        return replace(self, purposes=purposes)
