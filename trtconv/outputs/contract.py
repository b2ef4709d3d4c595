"""The judging contract: the one place where the rules an artifact is judged by are resolved.

A contract is every rule a verdict depends on (each bound, the confidence, which rule decides)
with where each value came from: this trtconv's defaults for the precision (the table in
trtconv.outputs.tolerance), the user's options, a release config, or an artifact's manifest.
`resolve` makes one from those, in that order of precedence, lowest first: defaults, then
what a manifest recorded, then what is stated now. `convert` resolves it before validating
and writes it whole into the manifest (`ContractRecord`, with each output's role); `validate`,
`bench`, a release's gates and `serve --shadow` read it back, so an artifact is judged by the
rules it was converted under whatever trtconv judges it later. An artifact whose manifest holds
no contract (made by an earlier trtconv) is judged by what its manifest does record (per-output
tolerances and minimum shares, the bounds and confidence of its validation) and today's
defaults for the rest: `from_earlier` says which in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from trtconv import __version__
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import OPTION, RELEASE_CONFIG, Roles, ToleranceOptions
from trtconv.core.precision import Precision
from trtconv.core.results import JsonResult, optional_key
from trtconv.options.shared import check_confidence
from trtconv.outputs.roles import JudgingRecord
from trtconv.outputs.tolerance import TOLERANCES, Tolerance
from trtconv.outputs.validation_result import ValidationReport

# The precision whose budget a decision output falls back to at fp32 and tf32 when float32 is
# not reproduced (trtconv.outputs.values), and whose atol says "not reproduced" from "beyond".
LOSSY = Precision.FP16.value


class RuleSource(str, Enum):
    """Where a rule's value came from."""

    DEFAULT = "default"  # this trtconv's table for the precision
    OPTION = OPTION  # a command-line option (or the API's options)
    RELEASE = RELEASE_CONFIG
    MANIFEST = "manifest"  # the contract the artifact's conversion recorded

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Stated:
    """What a command states about the rules (its options, or a release config's: the
    tolerance's `source` says which); None and empty maps state nothing. `tolerance` is
    --tolerance, whole: every output's and each output's."""

    tolerance: ToleranceOptions = field(default_factory=ToleranceOptions)
    min_top1_agreement: float | None = None
    max_accuracy_drop: float | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class Rule:
    """One rule's value and where it came from."""

    value: float | None
    source: str


@dataclass
class OutputRules(JsonResult):
    """What one output is judged by: its role (with its source) and, each with its source, its
    atol, rtol, the share of samples that must lie within them, its decisions' budget."""

    role: str | None
    role_source: str | None
    atol: Rule
    rtol: Rule
    min_within: Rule
    min_top1_agreement: Rule
    max_accuracy_drop: Rule
    threshold: float | None = optional_key()  # binary: the threshold; embedding: the cosine


@dataclass
class ContractRecord(JsonResult):
    """The manifest's `contract` block: the rules whole, as `resolve` made them (`rules`: the
    Tolerance's fields, read back exactly), where each came from (`sources`), each output's
    rules spelled out (`outputs`, for readers), and the trtconv that resolved them."""

    precision: str
    trtconv_version: str
    rules: dict[str, object]
    sources: dict[str, str]
    outputs: dict[str, OutputRules] = field(default_factory=dict)


@dataclass(frozen=True)
class JudgingContract:
    """The rules resolved: `tolerance` is what the comparison reads; `sources` says where each
    of its values came from (keys as in the record: `atol`, `output_atol.NAME`, ...); `note`,
    when set, is the one line an artifact from an earlier trtconv is judged with."""

    precision: str
    tolerance: Tolerance
    sources: Mapping[str, str]
    trtconv_version: str = __version__
    note: str | None = None

    def record(self, roles: Roles | None = None) -> ContractRecord:
        """The manifest's `contract` block, with each output's role from `roles`."""
        rules = _rules_of(self.tolerance)
        outputs = {name: self._output_rules(name, roles or {}) for name in sorted(roles or {})}
        return ContractRecord(
            self.precision, self.trtconv_version, rules, dict(self.sources), outputs
        )

    def source_of(self, key: str) -> str:
        return self.sources.get(key, RuleSource.DEFAULT.value)

    def _output_rules(self, name: str, roles: Roles) -> OutputRules:
        t, role = self.tolerance, roles.get(name)

        def own(key: str, mapping: Mapping[str, float], value: float | None) -> Rule:
            overall = key.removeprefix("output_")
            return Rule(value, self.source_of(f"{key}.{name}" if name in mapping else overall))

        return OutputRules(
            role=role.role if role else None,
            role_source=role.source if role else None,
            atol=own("output_atol", t.output_atol, t.atol_for(name)),
            rtol=own("output_rtol", t.output_rtol, t.rtol_for(name)),
            min_within=own("output_min_within", t.output_min_within, t.min_within_for(name)),
            min_top1_agreement=Rule(t.min_top1_agreement, self.source_of("min_top1_agreement")),
            max_accuracy_drop=Rule(t.max_accuracy_drop, self.source_of("max_accuracy_drop")),
            threshold=role.threshold if role else None,
        )


def resolve(
    precision: str,
    stated: Stated | None = None,
    recorded: JudgingContract | None = None,
) -> JudgingContract:
    """The contract for `precision`: this trtconv's defaults, under the `recorded` contract
    (an artifact's), under what is `stated` now. Raises UsageError for an unknown precision,
    an atol that is not positive, an rtol below 0, a limit outside [0, 1] or a confidence
    outside [0, 1)."""
    stated = stated or Stated()
    _check(stated)
    if recorded is not None:
        base, sources = recorded.tolerance, dict(recorded.sources)
        note = recorded.note
    else:
        base, sources, note = _defaults(precision), {}, None
    given = stated.tolerance
    where = given.source
    changes: dict[str, object] = {}
    for key, value in (
        ("atol", given.atol),
        ("rtol", given.rtol),
        ("min_top1_agreement", stated.min_top1_agreement),
        ("max_accuracy_drop", stated.max_accuracy_drop),
        ("confidence", stated.confidence),
    ):
        if value is not None:
            changes[key], sources[key] = value, where
    for key, mapping in (
        ("output_atol", given.atols),
        ("output_rtol", given.rtols),
        ("output_min_within", given.min_within),
    ):
        merged = dict(getattr(base, key))
        if key == "output_rtol":  # an output given its own atol now takes its rtol from now too
            merged = {n: v for n, v in merged.items() if n not in given.atols}
        merged.update(mapping)
        changes[key] = merged
        sources.update({f"{key}.{name}": where for name in mapping})
    limits_stated = stated.min_top1_agreement is not None or stated.max_accuracy_drop is not None
    tolerance = replace(
        base,
        **changes,  # type: ignore[arg-type]
        atol_stated=base.atol_stated or given.atol is not None,
        # fp32 and tf32 are decided by their values unless the user set the rates' limits.
        values_decide=base.values_decide and not limits_stated,
    )
    return JudgingContract(precision, _with_fallback(tolerance), sources, __version__, note)


def export_rules(stated: Stated | None = None) -> Tolerance:
    """What the ONNX export check judges by: fp32's contract, loosened (never tightened) by
    what is stated (--tolerance X[,R] / NAME=X[,R]). A tighter bound is the artifact's to meet
    in validation (exit 4 with the artifact kept), not a reason to refuse the export."""
    fp32 = _defaults(Precision.FP32.value)
    atol, rtol = fp32.atol or 0.0, fp32.rtol or 0.0
    given = (stated or Stated()).tolerance
    loosened = ToleranceOptions(
        atol=None if given.atol is None else max(given.atol, atol),
        rtol=None if given.rtol is None else max(given.rtol, rtol),
        atols={name: max(value, atol) for name, value in given.atols.items()},
        rtols={name: max(value, rtol) for name, value in given.rtols.items()},
    )
    return resolve(Precision.FP32.value, Stated(loosened)).tolerance


def from_record(record: ContractRecord) -> JudgingContract:
    """The contract a manifest recorded, exactly; its sources say "manifest (WHERE)"."""
    known = {name for name in Tolerance.__dataclass_fields__}
    rules = {key: value for key, value in record.rules.items() if key in known}
    tolerance = Tolerance(**rules)  # type: ignore[arg-type]
    sources = {key: f"{RuleSource.MANIFEST} ({where})" for key, where in record.sources.items()}
    return JudgingContract(record.precision, tolerance, sources, record.trtconv_version)


def from_earlier(
    precision: str, judging: JudgingRecord | None, validation: ValidationReport | None
) -> JudgingContract:
    """The contract of an artifact an earlier trtconv made (no `contract` block): what its
    manifest records (per-output tolerances and minimum shares, the atol and rtol each output
    was validated at, the bounds and confidence of that validation), today's defaults for the
    rest, with the one line that says so (`note`)."""
    table = _defaults(precision)
    judging = judging or JudgingRecord()
    atols = dict(judging.tolerances or {})
    rtols = dict(judging.rtols or {})
    minimums = dict(judging.min_within or {})
    for name, output in (validation.outputs if validation else {}).items():
        if output.atol is None:  # a bound derived from the data: not a rule
            continue
        if output.atol != table.atol:
            atols.setdefault(name, output.atol)
        if (output.rtol or 0.0) != (table.rtol or 0.0):
            rtols.setdefault(name, output.rtol or 0.0)
    tolerance = replace(table, output_atol=atols, output_rtol=rtols, output_min_within=minimums)
    keys = [f"output_atol.{n}" for n in atols] + [f"output_rtol.{n}" for n in rtols]
    keys += [f"output_min_within.{n}" for n in minimums]
    if validation is not None:
        limits = (validation.min_top1_agreement, validation.max_accuracy_drop)
        tolerance = replace(
            tolerance,
            confidence=validation.confidence,
            min_top1_agreement=limits[0],
            max_accuracy_drop=limits[1],
            # The conversion's own limits (--min-top1-agreement): its rates then gated.
            values_decide=table.values_decide
            and limits == (table.min_top1_agreement, table.max_accuracy_drop),
        )
        keys += ["confidence", "min_top1_agreement", "max_accuracy_drop"]
    sources = {key: RuleSource.MANIFEST.value for key in keys}
    said = sorted({key.split(".")[0] for key in keys})
    note = (
        "its manifest holds no judging contract (made by an earlier trtconv): judged by what it "
        f"records ({', '.join(said) or 'none of its rules'}) and this trtconv's {precision} "
        "defaults for the rest"
    )
    return JudgingContract(precision, _with_fallback(tolerance), sources, __version__, note)


def _defaults(precision: str) -> Tolerance:
    try:
        return TOLERANCES[precision]
    except KeyError:
        known = ", ".join(TOLERANCES)
        raise UsageError(f"Unknown precision '{precision}'; expected one of {known}.") from None


def _with_fallback(tolerance: Tolerance) -> Tolerance:
    """`tolerance` with what a decision output meets when fp32's values are not reproduced
    (fp16's budget, no stricter than the precision's own; the user's limits when set) and the
    atol that tells "not reproduced" from "beyond fp16" written into it: both rules of the
    contract, not of the table at judging time. A recorded contract keeps its own."""
    lossy = TOLERANCES[LOSSY]
    lossy_atol = lossy.atol if tolerance.lossy_atol is None else tolerance.lossy_atol
    if not tolerance.values_decide:
        agreement, drop = tolerance.min_top1_agreement, tolerance.max_accuracy_drop
    elif tolerance.fallback_min_top1_agreement is not None:
        return replace(tolerance, lossy_atol=lossy_atol)  # recorded: kept as it was
    else:
        agreement = min(tolerance.min_top1_agreement, lossy.min_top1_agreement)
        drop = max(tolerance.max_accuracy_drop, lossy.max_accuracy_drop)
    return replace(
        tolerance,
        fallback_min_top1_agreement=agreement,
        fallback_max_accuracy_drop=drop,
        lossy_atol=lossy_atol,
    )


def _check(stated: Stated) -> None:
    given = stated.tolerance
    for name, value in [("", given.atol), *given.atols.items()]:
        if value is not None and value <= 0:
            raise UsageError(f"--tolerance {name + '=' if name else ''}{value}: must be positive.")
    for name, value in [("", given.rtol), *given.rtols.items()]:
        if value is not None and not value >= 0:
            where = f"--tolerance {name + '=' if name else ''}ATOL,{value}"
            raise UsageError(f"{where}: the relative tolerance must be 0 or more.")
    for name, value in (
        ("--min-top1-agreement", stated.min_top1_agreement),
        ("--max-accuracy-drop", stated.max_accuracy_drop),
    ):
        if value is not None and not 0.0 <= value <= 1.0:
            raise UsageError(f"{name} must be between 0 and 1, found {value}.")
    if stated.confidence is not None:
        check_confidence(stated.confidence)


def _rules_of(tolerance: Tolerance) -> dict[str, object]:
    return {
        name: dict(value) if isinstance(value, Mapping) else value
        for name, value in vars(tolerance).items()
    }
