"""The data a model is judged on by validate, bench and release, read by its data contract.

Which data (option, else the manifest's, else its calibration source, else the model card's,
else random), which split (`--split`, else held-out for the model's training data, else all;
never the samples a conversion was fitted to), and how raw pixels become inputs
(trtconv.calib.preprocessing) are each resolved here, once, and recorded with where they came from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from pathlib import Path

from trtconv.calib.calibration_result import CalibrationRecord, InputStats
from trtconv.calib.preprocessing import (
    DEFAULT,
    MANIFEST,
    MODEL_CARD,
    OPTION,
    Preprocessing,
    check_split,
    input_layout,
)
from trtconv.calib.purposes import HELD_OUT_PART, card_data, drop_fitted, trained_on
from trtconv.calib.readers import ALL, VALIDATION, card_preprocessing, read_model_data
from trtconv.calib.sources import ArraySet, input_stats, recorded_spec
from trtconv.core.data_contract import DataContract
from trtconv.core.model_io import ModelSignature
from trtconv.options.shared import ALL as ALL_SPLIT
from trtconv.options.shared import HELD_OUT, PreprocessingOptions

log = logging.getLogger(__name__)

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")

RANDOM = "random"
# Calibration and evaluation data whose inputs' spread differs by more than this factor are on
# different scales (a missing 1/255, a wrong --image-scale): int8 ranges fit one of them only.
SCALE_RATIO = 10.0


@dataclass
class JudgedData:
    """The data read, and the contract it was read by (for the result)."""

    data: ArraySet
    contract: DataContract


def data_spec(
    given: str | None,
    saved_model: Path | None,
    contract: DataContract | None = None,
    calibration: CalibrationRecord | None = None,
) -> tuple[str, str]:
    """(spec, where it came from): `given`, else the data the artifact was validated on (its
    manifest's data `contract`), else its `calibration` source, else the model card's data,
    else random."""
    if given:
        return given, OPTION
    if contract is not None and contract.data and contract.data != RANDOM:
        return contract.data, MANIFEST
    if calibration is not None and calibration.source and calibration.source != RANDOM:
        return calibration.source, f"{MANIFEST} (calibration)"
    source = card_data(saved_model)
    if source:
        return source, MODEL_CARD
    log.warning("no data named, recorded or in a model card: evaluating on random inputs")
    return RANDOM, DEFAULT


def model_preprocessing(
    signature: ModelSignature,
    saved_model: Path | None,
    options: PreprocessingOptions | None = None,
    contract: DataContract | None = None,
) -> Preprocessing:
    """How raw pixels become this model's input: options, else a manifest's data `contract`,
    else the model card beside `saved_model`, else the defaults."""
    recorded = contract.preprocessing if contract is not None else None
    return card_preprocessing(signature, saved_model, options, recorded)


def judged_data(
    signature: ModelSignature,
    saved_model: Path | None,
    spec: str | None,
    options: PreprocessingOptions | None = None,
    split: str | None = None,
    samples: int | None = None,
    contract: DataContract | None = None,
    calibration: CalibrationRecord | None = None,
) -> JudgedData:
    """The evaluation data of a model (`split`, else `default_split`'s), without the samples
    its conversion was fitted to (the purposes the contract records), read by its recorded
    data `contract` (a manifest's: `calibration` is its calibration block), with the contract
    it was read by. Raises UsageError for an unknown split or spec and InputError for data
    that does not fit."""
    spec, spec_from = data_spec(spec, saved_model, contract, calibration)
    recorded = contract
    chosen_split, split_from = default_split(split, spec, saved_model, recorded)
    prep = model_preprocessing(signature, saved_model, options, recorded)
    role = VALIDATION if chosen_split == HELD_OUT else ALL
    purposes = (recorded.purposes if recorded is not None else None) or ()
    whole = None if purposes else samples  # fitted samples are dropped before counting
    data = read_model_data(
        spec, signature, role=role, samples=whole, saved_model=saved_model, preprocessing=prep
    )
    data, dropped = drop_fitted(data, spec, HELD_OUT_PART if role == VALIDATION else None, purposes)
    if samples is not None and samples < len(data):
        data = data.head(samples)
    if dropped:
        log.info("%s: %d samples the conversion was fitted to left out", spec, dropped)
    contract = replace(
        record_contract(spec, chosen_split, prep, data.raw_pixels, has_image_input(signature)),
        data_from=spec_from,
        split_from=split_from,
        fitted_samples_excluded=dropped or None,
    )
    return JudgedData(data, contract)


def default_split(
    split: str | None, spec: str, saved_model: Path | None, recorded: DataContract | None
) -> tuple[str, str]:
    """(the split, where it came from): `split`, else the recorded contract's when it records
    no purposes (a conversion that calibrated on the rest of the source), else held-out when
    the model trained on `spec` (trtconv.calib.purposes.trained_on), else all: samples nothing
    was trained or fitted on count whole."""
    if split is not None:
        return check_split(split), OPTION
    if recorded is not None and recorded.split and recorded.purposes is None:
        return check_split(recorded.split), MANIFEST
    why = trained_on(spec, saved_model)
    if why or spec == RANDOM:
        return HELD_OUT, f"{DEFAULT} ({why or 'random data'})"
    return ALL_SPLIT, f"{DEFAULT} (not the model's training data)"


def record_contract(
    spec: str, split: str, prep: Preprocessing, applied: bool = True, images: bool = True
) -> DataContract:
    """A data contract (manifest, results): the data, its split, the preprocessing of raw
    pixels, and whether this data had any (`applied`: float and integer arrays are fed as given,
    and the contract then says so rather than show a scale nothing used), and whether the model
    has an image input (`images`; a text model's contract speaks of no pixels)."""
    return DataContract(
        data=recorded_spec(spec),
        split=split,
        preprocessing=prep,
        preprocessing_applied=applied,
        image_inputs=None if images else False,
    )


def has_image_input(signature: ModelSignature) -> bool:
    """Whether some input of the model can take an image: a float input laid out NHWC or NCHW
    (trtconv.calib.preprocessing.input_layout). Token ids, feature vectors, audio frames and
    flags cannot."""
    return any(
        spec.dtype in FLOAT_DTYPES and input_layout(spec) is not None for spec in signature.inputs
    )


def scale_warning(
    calibration: CalibrationRecord | None,
    data: ArraySet,
    what: str,
    here: dict[str, InputStats] | None = None,
) -> str | None:
    """A warning when `data`'s inputs spread SCALE_RATIO times more or less than the
    calibration data's (recorded in a manifest's calibration block), else None. `here`:
    `input_stats(data)` when the caller has it (one pass over the data for many artifacts)."""
    recorded = calibration.input_stats if calibration else {}
    here = input_stats(data) if here is None else here
    for name, stats in recorded.items():
        spread = here[name].std if name in here else 0.0
        if not stats.std or not spread:
            continue
        ratio = spread / stats.std
        if ratio > SCALE_RATIO or ratio < 1 / SCALE_RATIO:
            return (
                f"{what} was calibrated on input '{name}' values with spread {stats.std:.3g}; "
                f"{data.source} spreads {spread:.3g} ({ratio:.3g}x): the two are on "
                "different scales, and the int8 ranges fit the calibration data only (check the "
                "calibration data and --image-scale/--image-offset)."
            )
    return None
