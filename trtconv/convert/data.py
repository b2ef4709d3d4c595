"""The data a conversion reads once: the held-out part (validation and the export check), the
calibration part (int8, and fp16 from ONNX) and the int8 ladder's search slice, each checked
against the signature and read by the model's data contract (recorded in the manifest)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from trtconv.calib.contract import HELD_OUT
from trtconv.calib.evaluation import data_spec, model_preprocessing, record_contract
from trtconv.calib.readers import (
    CALIBRATION,
    RANDOM,
    VALIDATION,
    batches,
    calibration_feed,
    read_model_data,
    whole_batches,
)
from trtconv.calib.sources import ArraySet
from trtconv.core.errors import UsageError
from trtconv.core.model_io import CalibrationFeed, Feeds
from trtconv.options import ConvertOptions
from trtconv.protocol.runner import Runner
from trtconv.quantize.search import HELD_OUT_SPARE, SEARCH_SAMPLES, split_for_search

log = logging.getLogger(__name__)

CALIB_BATCH = 32


@dataclass(frozen=True)
class ConversionData:
    """The data spec and where it came from (in `contract`), the held-out samples, and for int8
    the calibration samples (whole batches) and, with the ladder on, its search slice."""

    spec: str
    contract: dict[str, Any]
    held_out: ArraySet
    calibration: ArraySet | None = None
    search: ArraySet | None = None
    search_drawn_from: str = ""
    batch: int = CALIB_BATCH  # calibration batches: the model's fixed batch, if it has one

    def calibration_feed(self) -> CalibrationFeed | None:
        """A fresh iterator over calibration batches, None without calibration data."""
        return None if self.calibration is None else calibration_feed(self.calibration, self.batch)

    def sample(self) -> Feeds:
        """One batch of held-out inputs (what engine builds take shapes and strings from)."""
        return next(batches(self.held_out, self.batch))


def read_data(
    options: ConvertOptions, native: Runner, int8: bool, calibrate: bool = False
) -> ConversionData:
    """The data `options` name (default: the model card's) as the native model's signature and
    data contract read it; `int8` (or `calibrate`: fp16 from ONNX) reads the calibration part
    too. With the int8 ladder on, both parts are read whole (random data: SEARCH_SAMPLES more)
    for the search slice.

    Random data takes the dynamic dimensions `options.input_shapes` gives. Raises UsageError
    when int8 has no calibration data and InputError for data that does not fit the signature.
    """
    spec, spec_from = data_spec(options.calib_data, options.saved_model)
    if int8 and options.calib_data is None:
        if spec == RANDOM:  # random calibration only when asked for by name
            raise UsageError(
                f"INT8 needs calibration data and {options.saved_model} has no model card "
                "naming its data; pass --calib-data digits|PATH.npz|IMAGE_DIR (or 'random', for "
                "timing only)."
            )
        log.info("no --calib-data: calibrating on '%s' (the model card's data)", spec)
    prep = model_preprocessing(native.signature, options.saved_model, options.preprocessing)
    counts = (options.calib_samples, options.validate_samples)
    whole = int8 and options.fallback
    wanted = [
        (count + SEARCH_SAMPLES if spec == RANDOM else None) if whole else count for count in counts
    ]
    read: dict[str, Any] = {"saved_model": options.saved_model, "preprocessing": prep}
    signature = native.signature.with_shapes(options.input_shapes)
    calibration = None
    if int8 or calibrate:
        calibration = read_model_data(spec, signature, role=CALIBRATION, samples=wanted[0], **read)
    held_out = read_model_data(spec, signature, role=VALIDATION, samples=wanted[1], **read)
    contract = {"data_from": spec_from}
    contract.update(record_contract(spec, HELD_OUT, prep, held_out.raw_pixels))
    batch = signature.batch_for(CALIB_BATCH)
    return _split(spec, contract, held_out, calibration, counts, whole, batch)


def _split(
    spec: str,
    contract: dict[str, Any],
    held_out_part: ArraySet,
    calibration_part: ArraySet | None,
    counts: tuple[int, int],
    search: bool,
    batch: int,
) -> ConversionData:
    """The calibration (whole batches of `batch`) and held-out samples, and with `search` the
    int8 ladder's search slice: spare samples of either part (trtconv.quantize.search)."""
    held_out = held_out_part.head(counts[1])
    if calibration_part is None:
        return ConversionData(spec, contract, held_out, batch=batch)
    if not search:
        calibration = whole_batches(calibration_part.head(counts[0]), batch)
        return ConversionData(spec, contract, held_out, calibration, batch=batch)
    split = split_for_search(calibration_part, counts[0], held_out_part, counts[1])
    if split.drawn_from != HELD_OUT_SPARE:
        log.info(
            "int8 ladder: no held-out samples to spare beyond the %d validated on; it would "
            "score on %s (--validate-samples below %d leaves held-out samples to it)",
            len(held_out),
            split.drawn_from,
            len(held_out),
        )
    calibration = whole_batches(split.calibration, batch)
    return ConversionData(
        spec, contract, held_out, calibration, split.search, split.drawn_from, batch
    )
