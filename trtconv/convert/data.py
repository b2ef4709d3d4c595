"""The data a conversion reads once: the validation samples (and the export check), the
calibration samples (int8, and fp16 from ONNX's keep-float32 ranges) and the int8 ladder's search
slice, each checked against the signature and read by the model's data contract (recorded in the
manifest with which samples served which purpose: trtconv.calib.purposes).

Where they come from:

- `--validate-data SOURCE`: validation on that source, whole (its held-out part when the model
  trained on it); calibration on the `--calib-data` source, whole.
- one source the model did not train on: shared by purpose. Only int8 (calibration, the ladder's
  search) and fp16 from ONNX (its ranges) fit anything; the first samples of the seeded order
  fit, the rest validate (SHARED_CALIB_SAMPLES and FP16_RANGE_SAMPLES: docs/int8.md, fp16.md).
- one source the model trained on (model card, `digits`), or `random`: its fixed hold-out, as
  `trtconv train` split it: calibration part and held-out part."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import numpy as np

from trtconv.calib.judged_data import (
    data_spec,
    has_image_input,
    model_preprocessing,
    record_contract,
)
from trtconv.calib.preprocessing import Preprocessing
from trtconv.calib.purposes import CALIBRATION as CALIBRATING
from trtconv.calib.purposes import (
    CALIBRATION_PART,
    FP16_RANGES,
    HELD_OUT_PART,
    SHUFFLED,
    entry,
    same_source,
    shuffled,
    trained_on,
)
from trtconv.calib.purposes import SEARCH as SEARCHING
from trtconv.calib.purposes import VALIDATION as VALIDATING
from trtconv.calib.readers import (
    ALL,
    CALIBRATION,
    RANDOM,
    VALIDATION,
    batches,
    calibration_feed,
    read_model_data,
    whole_batches,
)
from trtconv.calib.sources import ArraySet
from trtconv.core.data_contract import DataContract, Purpose
from trtconv.core.errors import UsageError
from trtconv.core.model_io import CalibrationFeed, Feeds, ModelSignature
from trtconv.options.convert import (
    DEFAULT_CALIB_SAMPLES,
    FP16_RANGE_SAMPLES,
    SHARED_CALIB_SAMPLES,
    ConvertOptions,
)
from trtconv.options.shared import ALL as ALL_SPLIT
from trtconv.options.shared import HELD_OUT
from trtconv.protocol.runner import Runner
from trtconv.quantize.search import (
    CALIBRATION_SAMPLES,
    CALIBRATION_SPARE,
    HELD_OUT_SPARE,
    SEARCH_SAMPLES,
    DataSplit,
    split_for_search,
)

log = logging.getLogger(__name__)

CALIB_BATCH = 32


@dataclass(frozen=True)
class ConversionData:
    """The data spec and where it came from (in `contract`), the held-out samples, and for int8
    the calibration samples (whole batches) and, with the ladder on, its search slice."""

    spec: str
    contract: DataContract
    held_out: ArraySet
    calibration: ArraySet | None = None
    search: ArraySet | None = None
    search_drawn_from: str = ""
    batch: int = CALIB_BATCH  # calibration batches: the model's fixed batch, if it has one
    # Which samples served which purpose (trtconv.calib.purposes.entry), for the manifest.
    purposes: tuple[Purpose, ...] = ()
    # The samples validation could have had (nothing fitted to them), at least.
    pool: int = 0

    def contract_for(self, fitted: bool) -> DataContract:
        """The data contract a manifest records: with the purposes, the fitted ones only when
        this artifact was `fitted` to them (an fp32 candidate of `--backend best` was not)."""
        used = tuple(p for p in self.purposes if fitted or p.purpose == VALIDATING)
        return self.contract.with_purposes(used)

    def calibration_feed(self) -> CalibrationFeed | None:
        """A fresh iterator over calibration batches, None without calibration data."""
        return None if self.calibration is None else calibration_feed(self.calibration, self.batch)

    def sample(self) -> Feeds:
        """One batch of held-out inputs (what engine builds take shapes and strings from)."""
        return next(batches(self.held_out, self.batch))

    def fixed_inputs(self) -> dict[str, bool | int | float]:
        """The rank-0 inputs (a TF1 `is_training` flag) that hold one value in every part this
        conversion reads (held out, calibration, search), by name: what the ONNX export folds
        into the graph. An input whose parts disagree is left out (fed at run time)."""
        parts = [p for p in (self.held_out, self.calibration, self.search) if p is not None]
        fixed: dict[str, bool | int | float] = {}
        for name in sorted(self.held_out.scalars):
            arrays = [part.inputs[name] for part in parts if len(part)]
            values = {array[:1].reshape(()).item() for array in arrays}
            if len(values) == 1 and all(array.dtype.kind in "biuf" for array in arrays):
                fixed[name] = values.pop()
        return fixed


def read_data(
    options: ConvertOptions, native: Runner, int8: bool, calibrate: bool = False
) -> ConversionData:
    """The data `options` name (default: the model card's) as the native model's signature and
    data contract read it; `int8` (or `calibrate`: fp16 from ONNX) fits calibration samples too,
    and with the int8 ladder on a search slice (see the module's docstring for which samples).

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
    reading = _Reading(options, spec, native.signature.with_shapes(options.input_shapes), prep)
    fits, search = int8 or calibrate, int8 and options.fallback
    validate_data = options.validate_data
    if validate_data and same_source(validate_data, spec):
        validate_data = None  # one source named twice: shared by purpose, never overlapping
    if validate_data:
        data, split = reading.separate(validate_data, fits, search, int8), ALL_SPLIT
    elif spec == RANDOM or _held_out(options, spec):
        data, split = reading.held_out(fits, search), HELD_OUT
    else:
        data, split = reading.shared(fits, search, int8), ALL_SPLIT
    images = has_image_input(native.signature)
    contract = record_contract(validate_data or spec, split, prep, data.held_out.raw_pixels, images)
    return replace(data, contract=replace(contract, data_from=spec_from))


def _held_out(options: ConvertOptions, spec: str) -> bool:
    """Whether `spec` keeps its fixed hold-out: `--split held-out` says the model trained on
    the rest, `--split all` that it did not; else the model card (or `digits`) decides."""
    if options.split is not None:
        return options.split == HELD_OUT
    return trained_on(spec, options.saved_model) is not None


@dataclass(frozen=True)
class _Reading:
    """What each way of reading the data shares: the options, the calibration spec, the
    signature (dynamic dimensions fixed) and the preprocessing."""

    options: ConvertOptions
    spec: str
    signature: ModelSignature
    prep: Preprocessing

    @property
    def batch(self) -> int:
        return self.signature.batch_for(CALIB_BATCH)

    def read(self, spec: str, role: str, samples: int | None = None) -> ArraySet:
        return read_model_data(
            spec,
            self.signature,
            role=role,
            samples=samples,
            saved_model=self.options.saved_model,
            preprocessing=self.prep,
        )

    def source_part(self, spec: str) -> tuple[ArraySet, str]:
        """`spec` as validation reads it whole: its held-out part when the model trained on
        it, else every sample in the seeded order."""
        if _held_out(self.options, spec):
            return self.read(spec, VALIDATION), HELD_OUT_PART
        return shuffled(self.read(spec, ALL)), SHUFFLED

    def held_out(self, fits: bool, search: bool) -> ConversionData:
        """The source's fixed hold-out: its calibration part fits, its held-out part validates
        (the model trained on the rest); the held-out part is read whole (what it spares is
        what more validation could use), and with the ladder the calibration part too (random
        data: SEARCH_SAMPLES more than asked) for the search slice."""
        options, spec = self.options, self.spec
        counts = (options.calib_samples or DEFAULT_CALIB_SAMPLES, options.validate_samples)
        wanted = [
            (count + SEARCH_SAMPLES if spec == RANDOM else None) if search else count
            for count in counts
        ]
        calibration = self.read(spec, CALIBRATION, wanted[0]) if fits else None
        held = self.read(spec, VALIDATION, wanted[1] if spec == RANDOM else None)
        total = None if calibration is None or search is False else len(calibration) + len(held)
        parts = (CALIBRATION_PART, HELD_OUT_PART)
        empty = ConversionData(spec, DataContract(), held, batch=self.batch)
        data = _fit(empty, calibration, counts, search, parts, total)
        return data if spec != RANDOM else replace(data, purposes=())

    def shared(self, fits: bool, search: bool, int8: bool) -> ConversionData:
        """One source the model did not train on, by purpose: the first samples of its seeded
        order fit (int8: SHARED_CALIB_SAMPLES at most, fp16: FP16_RANGE_SAMPLES), the rest
        validate; the ladder searches on spare samples beyond those validated on, else on the
        calibration samples."""
        options = self.options
        every = shuffled(self.read(self.spec, ALL))
        fitted = fitted_count(len(every), options.calib_samples, int8) if fits else 0
        fitted -= fitted % min(self.batch, fitted or 1)  # whole calibration batches
        calibration = every.head(fitted) if fitted else None
        rest = every.take(np.arange(fitted, len(every)))
        rest.source = f"{every.source}[{fitted}:]" if fitted else every.source
        counts = (fitted, options.validate_samples)
        data = ConversionData(self.spec, DataContract(), rest, batch=self.batch)
        if calibration is not None and not int8:
            held = rest.head(options.validate_samples)
            data = replace(data, held_out=held, calibration=calibration, pool=len(rest))
            return _recorded(
                data, [(FP16_RANGES, SHUFFLED, 0, fitted)], [(SHUFFLED, fitted)], len(every)
            )
        return _fit(data, calibration, counts, search, (SHUFFLED, SHUFFLED), len(every), fitted)

    def separate(self, validate_data: str, fits: bool, search: bool, int8: bool) -> ConversionData:
        """`--validate-data`: that source validates, whole; the calibration source fits."""
        options = self.options
        held, held_part = self.source_part(validate_data)
        # Calibration may take any sample of its source, training samples included.
        calibration = shuffled(self.read(self.spec, ALL)) if fits else None
        calibration_part = SHUFFLED
        counts = (options.calib_samples or DEFAULT_CALIB_SAMPLES, options.validate_samples)
        data = ConversionData(self.spec, DataContract(), held, batch=self.batch)
        if calibration is not None and not int8:
            fitted = whole_batches(calibration.head(counts[0]), self.batch)
            data = replace(data, held_out=held.head(counts[1]), calibration=fitted, pool=len(held))
            return _recorded(
                data,
                [(FP16_RANGES, calibration_part, 0, len(fitted))],
                [(held_part, 0)],
                len(calibration),
                validate_data,
            )
        total = len(calibration) if calibration is not None else None
        return _fit(
            data,
            calibration,
            counts,
            search,
            (calibration_part, held_part),
            total,
            validate_data=validate_data,
        )


def fitted_count(total: int, calib_samples: int | None, int8: bool) -> int:
    """How many samples of a `total`-sample shared source fit: int8 calibration
    (`calib_samples`, default SHARED_CALIB_SAMPLES), fp16's ranges (FP16_RANGE_SAMPLES); never
    more than half the source, so validation keeps the other half."""
    wanted = (calib_samples or SHARED_CALIB_SAMPLES) if int8 else FP16_RANGE_SAMPLES
    return max(1, min(wanted, total // 2))


def _fit(
    data: ConversionData,
    calibration_part: ArraySet | None,
    counts: tuple[int, int],
    search: bool,
    parts: tuple[str, str],
    total: int | None,
    offset: int = 0,
    validate_data: str | None = None,
) -> ConversionData:
    """`data` with its calibration (whole batches), validation and search samples: the first
    `counts` of `calibration_part` and of its held-out samples (`data.held_out`), and with
    `search` the int8 ladder's search slice (trtconv.quantize.search). `parts` name the parts
    they come from, `offset` where the held-out samples start in theirs."""
    held_out_part = data.held_out
    held_out = held_out_part.head(counts[1])
    spans = [(parts[1], offset)]
    data = replace(data, pool=len(held_out_part))
    if calibration_part is None:
        return _recorded(replace(data, held_out=held_out), [], spans, total, validate_data)
    if not search:
        calibration = whole_batches(calibration_part.head(counts[0]), data.batch)
        fitted = [(CALIBRATING, parts[0], 0, len(calibration))]
        data = replace(data, held_out=held_out, calibration=calibration)
        return _recorded(data, fitted, spans, total, validate_data)
    split = split_for_search(calibration_part, counts[0], held_out_part, counts[1])
    if split.drawn_from != HELD_OUT_SPARE:
        log.info(
            "int8 ladder: no held-out samples to spare beyond the %d validated on; it scores "
            "on %s (--validate-samples below %d leaves held-out samples to it)",
            len(split.held_out),
            split.drawn_from,
            len(split.held_out),
        )
    calibration = whole_batches(split.calibration, data.batch)
    spared = len(split.search) if split.drawn_from == HELD_OUT_SPARE else 0
    data = replace(
        data,
        held_out=split.held_out,
        calibration=calibration,
        search=split.search,
        search_drawn_from=split.drawn_from,
        pool=data.pool - spared,
    )
    fitted = [(CALIBRATING, parts[0], 0, len(calibration))]
    span = _search_span(split, parts, offset)
    if split.drawn_from == HELD_OUT_SPARE and validate_data:
        # Spare samples of the --validate-data source: recorded as that source's, so validate
        # leaves them out there too.
        data = _recorded(data, fitted, spans, total, validate_data)
        whole = len(held_out_part) if parts[1] == SHUFFLED else None
        searched = entry(span[0], validate_data, span[1], (span[2], span[3]), whole)
        return replace(data, purposes=(*data.purposes, searched))
    return _recorded(data, [*fitted, span], spans, total, validate_data)


def _search_span(
    split: DataSplit, parts: tuple[str, str], offset: int
) -> tuple[str, str, int, int]:
    """Where the ladder's search slice lies: spare held-out samples beyond those validated
    on, spare calibration samples, or the calibration samples themselves."""
    used, searched = len(split.calibration), len(split.search)
    if split.drawn_from == HELD_OUT_SPARE:
        start = offset + len(split.held_out)
        return (SEARCHING, parts[1], start, start + searched)
    if split.drawn_from == CALIBRATION_SPARE:
        return (SEARCHING, parts[0], used, used + searched)
    assert split.drawn_from == CALIBRATION_SAMPLES
    return (SEARCHING, parts[0], 0, searched)


def _recorded(
    data: ConversionData,
    fitted: list[tuple[str, str, int, int]],
    validated: list[tuple[str, int]],
    total: int | None,
    validate_data: str | None = None,
) -> ConversionData:
    """`data` with its purposes recorded: the `fitted` spans of the calibration source and the
    validation samples (`validated`: part and offset) of its own source."""
    spec = data.spec
    purposes = [
        entry(purpose, spec, part, (start, stop), total) for purpose, part, start, stop in fitted
    ]
    for part, offset in validated:
        held_total = None if validate_data else total
        span = (offset, offset + len(data.held_out))
        purposes.append(entry(VALIDATING, validate_data or spec, part, span, held_total))
    return replace(data, purposes=tuple(purposes))


def deciding_data(data: ConversionData, needed: int) -> str:
    """Which data would decide a verdict that needs about `needed` validation samples: the
    unused samples of the user's source first (--validate-samples), else more data."""
    validated, source = len(data.held_out), data.held_out.source
    if needed <= validated:
        return f"about {needed} samples would decide it"
    if data.pool > validated:
        usable = min(needed, data.pool)
        more = "" if usable >= needed else f", then {needed - usable} more from another source"
        return (
            f"about {needed} samples would decide it: {source} has {data.pool - validated} more "
            f"that nothing was fitted to (--validate-samples {usable}{more})"
        )
    return (
        f"about {needed} samples would decide it, {needed - validated} more than {source} "
        f"spares: give a separate source with --validate-data (at least {needed} samples the "
        "model did not train on)"
    )
