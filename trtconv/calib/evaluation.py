"""The data a model is judged on by validate, bench and release, read by its data contract.

Which data (option, else the manifest's, else its calibration source, else the model card's,
else random), which split (`--split`, else held-out for the model's training data, else all;
never the samples a conversion was fitted to), and how raw pixels become inputs
(trtconv.calib.contract) are each resolved here, once, and recorded with where they came from.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtconv.calib.contract import DEFAULT, MANIFEST, MODEL_CARD, OPTION, Preprocessing, check_split
from trtconv.calib.purposes import HELD_OUT_PART, drop_fitted, trained_on
from trtconv.calib.readers import ALL, VALIDATION, card_preprocessing, read_model_data
from trtconv.calib.sources import ArraySet, input_stats, recorded_spec
from trtconv.core.model_io import ModelSignature
from trtconv.options import ALL as ALL_SPLIT
from trtconv.options import HELD_OUT, PreprocessingOptions
from trtconv.savedmodel import read_model_card

if TYPE_CHECKING:
    from trtconv.manifest import CalibrationRecord, Manifest

log = logging.getLogger(__name__)

RANDOM = "random"
# Calibration and evaluation data whose inputs' spread differs by more than this factor are on
# different scales (a missing 1/255, a wrong --image-scale): int8 ranges fit one of them only.
SCALE_RATIO = 10.0


@dataclass
class Evaluation:
    """The data read, and the contract it was read by (for the result)."""

    data: ArraySet
    contract: dict[str, Any]


def data_spec(
    given: str | None, saved_model: Path | None, manifest: Manifest | None = None
) -> tuple[str, str]:
    """(spec, where it came from): `given`, else the data the artifact was validated on (its
    manifest's data contract), else its calibration source, else the model card's data, else
    random."""
    if given:
        return given, OPTION
    contract = (manifest.data_contract if manifest else None) or {}
    if contract.get("data") and contract["data"] != RANDOM:
        return str(contract["data"]), MANIFEST
    calibration = manifest.calibration if manifest else None
    if calibration is not None and calibration.source and calibration.source != RANDOM:
        return calibration.source, f"{MANIFEST} (calibration)"
    card = read_model_card(saved_model) if saved_model is not None else None
    source = ((card or {}).get("data") or {}).get("source")
    if source:
        return str(source), MODEL_CARD
    log.warning("no data named, recorded or in a model card: evaluating on random inputs")
    return RANDOM, DEFAULT


def model_preprocessing(
    signature: ModelSignature,
    saved_model: Path | None,
    options: PreprocessingOptions | None = None,
    contract: dict[str, Any] | None = None,
) -> Preprocessing:
    """How raw pixels become this model's input: options, else a manifest's data `contract`,
    else the model card beside `saved_model`, else the defaults."""
    recorded = (contract or {}).get("preprocessing")
    return card_preprocessing(signature, saved_model, options, recorded)


def evaluation_data(
    signature: ModelSignature,
    saved_model: Path | None,
    manifest: Manifest | None,
    spec: str | None,
    options: PreprocessingOptions | None = None,
    split: str | None = None,
    samples: int | None = None,
    contract: dict[str, Any] | None = None,
) -> Evaluation:
    """The evaluation data of a model (`split`, else `default_split`'s), without the samples
    its conversion was fitted to (the purposes the contract records), read by its data
    contract (`contract`, else the manifest's), with the contract it was read by. Raises
    UsageError for an unknown split or spec and InputError for data that does not fit."""
    spec, spec_from = data_spec(spec, saved_model, manifest)
    recorded = contract or (manifest.data_contract if manifest else None)
    chosen_split, split_from = default_split(split, spec, saved_model, recorded)
    prep = model_preprocessing(signature, saved_model, options, recorded)
    role = VALIDATION if chosen_split == HELD_OUT else ALL
    purposes = list((recorded or {}).get("purposes") or [])
    whole = None if purposes else samples  # fitted samples are dropped before counting
    data = read_model_data(
        spec, signature, role=role, samples=whole, saved_model=saved_model, preprocessing=prep
    )
    data, dropped = drop_fitted(data, spec, HELD_OUT_PART if role == VALIDATION else None,
                                purposes)  # fmt: skip
    if samples is not None and samples < len(data):
        data = data.head(samples)
    contract = record_contract(spec, chosen_split, prep, data.raw_pixels)
    contract.update(data_from=spec_from, split_from=split_from)
    if dropped:
        contract["fitted_samples_excluded"] = dropped
        log.info("%s: %d samples the conversion was fitted to left out", spec, dropped)
    return Evaluation(data, contract)


def default_split(
    split: str | None, spec: str, saved_model: Path | None, recorded: dict[str, Any] | None
) -> tuple[str, str]:
    """(the split, where it came from): `split`, else the recorded contract's when it records
    no purposes (a conversion that calibrated on the rest of the source), else held-out when
    the model trained on `spec` (trtconv.calib.purposes.trained_on), else all: samples nothing
    was trained or fitted on count whole."""
    if split is not None:
        return check_split(split), OPTION
    if recorded and recorded.get("split") and "purposes" not in recorded:
        return check_split(str(recorded["split"])), MANIFEST
    why = trained_on(spec, saved_model)
    if why or spec == RANDOM:
        return HELD_OUT, f"{DEFAULT} ({why or 'random data'})"
    return ALL_SPLIT, f"{DEFAULT} (not the model's training data)"


def record_contract(
    spec: str, split: str, prep: Preprocessing, applied: bool = True
) -> dict[str, Any]:
    """A data contract block (manifest, results): the data, its split, the preprocessing of raw
    pixels, and whether this data had any (`applied`: float and integer arrays are fed as given,
    and the block then says so rather than show a scale nothing used)."""
    block = prep.to_dict()
    if not applied:
        block["summary"] = (
            f"none applied (arrays fed as given; raw pixels would be {block['summary']})"
        )
    return {
        "data": recorded_spec(spec),
        "split": split,
        "preprocessing": block,
        "preprocessing_applied": applied,
    }


def scale_warning(
    calibration: CalibrationRecord | None,
    data: ArraySet,
    what: str,
    here: dict[str, dict[str, float]] | None = None,
) -> str | None:
    """A warning when `data`'s inputs spread SCALE_RATIO times more or less than the
    calibration data's (recorded in a manifest's calibration block), else None. `here`:
    `input_stats(data)` when the caller has it (one pass over the data for many artifacts)."""
    recorded = calibration.input_stats if calibration else {}
    here = input_stats(data) if here is None else here
    for name, stats in recorded.items():
        if name not in here or not stats.std or not here[name]["std"]:
            continue
        ratio = here[name]["std"] / stats.std
        if ratio > SCALE_RATIO or ratio < 1 / SCALE_RATIO:
            return (
                f"{what} was calibrated on input '{name}' values with spread {stats.std:.3g}; "
                f"{data.source} spreads {here[name]['std']:.3g} ({ratio:.3g}x): the two are on "
                "different scales, and the int8 ranges fit the calibration data only (check the "
                "calibration data and --image-scale/--image-offset)."
            )
    return None
