"""What a user states about a model's outputs: each output's role (`--output-role NAME=ROLE`)
and the `Judging` settings they make up, and its tolerances (`--tolerance`, whole:
`ToleranceOptions`).

The role names and their parsing live here, at the bottom of the layers, so that every command's
options (trtconv.options) can hold a `Judging` without importing the comparison code; inferring a
role from a model's outputs, and recording one in a manifest, is trtconv.outputs.roles'.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from trtconv.core.errors import UsageError

# Who states a rule or a role: the user on the command line (or the API), or a release config.
OPTION, RELEASE_CONFIG = "option", "release config"
CLASSES, BINARY, REGRESSION, TENSOR = "classes", "binary", "regression", "tensor"
CLASS_MAP, EMBEDDING = "class_map", "embedding"
ROLES = (CLASSES, BINARY, CLASS_MAP, EMBEDDING, REGRESSION, TENSOR)
DECISIONS = (CLASSES, BINARY, CLASS_MAP)  # roles judged by what the model decides
# Roles judged by how often the converted model agrees with the native one, not by their
# values: what they decide, or (an embedding) the direction of their vectors.
AGREEING = (*DECISIONS, EMBEDDING)
# Roles judged over the positions a padding mask marks valid (a sequence's tokens).
MASKED = (CLASS_MAP, EMBEDDING)
# `mask=none`: every position counts, whatever input looks like a mask.
NO_MASK = "none"


@dataclass(frozen=True)
class OutputRole:
    """One output's role, where it came from, (binary) the decision threshold or (embedding)
    the cosine a sample must reach, (regression) the score output that says where an object is
    (`where`), and (class_map, embedding) the input whose nonzero values mark the valid
    positions (`mask`: NO_MASK for none; None: found by trtconv.outputs.tokens' rule)."""

    role: str
    source: str  # "option", "release config", "manifest" or "inferred: WHY"
    threshold: float | None = None
    # The output the labels score (--labels-output); recorded as the judging block's
    # `labels_output`, not per role.
    labels: bool = False
    where: str | None = None  # regression judged only where this score output says so
    mask: str | None = None

    def to_dict(self) -> dict[str, object]:
        found: dict[str, object] = {
            "role": self.role,
            "source": self.source,
            "threshold": self.threshold,
        }
        # Each only when set: manifests written before read the same.
        if self.where is not None:
            found["where"] = self.where
        if self.mask is not None:
            found["mask"] = self.mask
        return found


Roles = dict[str, OutputRole]

ROLE_SPELLINGS = (
    "binary:THRESHOLD for another decision threshold, embedding:COSINE for another cosine "
    "bound, regression:where=SCORE to judge only where the output SCORE says an object is "
    "there, class_map:mask=INPUT or embedding:mask=INPUT for the input that marks valid tokens"
)


def parse_role(text: str, where: str, source: str) -> OutputRole:
    """`classes`, `binary[:THRESHOLD]`, `class_map[:mask=INPUT]`,
    `embedding[:COSINE][:mask=INPUT]`, `regression[:where=SCORE]` or `tensor`. Raises
    UsageError."""
    role, *options = (part.strip() for part in text.strip().split(":"))
    options = [option for option in options if option]
    if any(o.startswith("where=") for o in options) and role != REGRESSION:
        raise UsageError(
            f"{where}: where=SCORE gates a regression output (a box or landmark head), found "
            f"'{text}'; spell it NAME=regression:where=SCORE."
        )
    if any(o.startswith("mask=") for o in options) and role not in MASKED:
        raise UsageError(
            f"{where}: mask=INPUT marks the valid tokens of a class_map or embedding output, "
            f"found '{text}'."
        )
    if role not in ROLES or not _options_fit(role, options):
        raise UsageError(
            f"{where}: expected one of {', '.join(ROLES)} ({ROLE_SPELLINGS}), found '{text}'."
        )
    named = {
        key: value.strip() for key, _, value in (o.partition("=") for o in options if "=" in o)
    }
    for key in ("where", "mask"):
        if key in named and not named[key]:
            raise UsageError(f"{where}: '{key}=' in '{text}' names no {_NAMED[key]}.")
    numbers = [o for o in options if "=" not in o]
    threshold = _number(numbers[0], text, where, role) if numbers else None
    return OutputRole(role, source, threshold, where=named.get("where"), mask=named.get("mask"))


_NAMED = {"where": "output", "mask": "input"}


def _options_fit(role: str, options: list[str]) -> bool:
    """Whether `options` (after the role's colon) are ones `role` takes, each at most once."""
    kinds = [o.partition("=")[0] if "=" in o else "number" for o in options]
    allowed = {
        BINARY: {"number"},
        EMBEDDING: {"number", "mask"},
        CLASS_MAP: {"mask"},
        REGRESSION: {"where"},
    }.get(role, set())
    return set(kinds) <= allowed and len(kinds) == len(set(kinds))


def _number(text: str, whole: str, where: str, role: str) -> float:
    """A binary threshold, or an embedding's cosine bound in (0, 1]. Raises UsageError."""
    try:
        value = float(text)
    except ValueError:
        what = "cosine bound" if role == EMBEDDING else "threshold"
        raise UsageError(f"{where}: the {what} in '{whole}' is not a number.") from None
    if role == EMBEDDING and not 0.0 < value <= 1.0:
        raise UsageError(
            f"{where}: the cosine bound in '{whole}' must be in (0, 1], found {value:g}."
        )
    return value


def parse_assignments(items: Sequence[str], flag: str) -> dict[str, str]:
    """`NAME=VALUE` items of a repeated option as a dict. Raises UsageError naming the flag."""
    parsed: dict[str, str] = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name.strip() or not value.strip():
            raise UsageError(f"{flag} takes NAME=VALUE (an output name), found '{item}'.")
        parsed[name.strip()] = value.strip()
    return parsed


def parse_role_options(items: Sequence[str] | None, source: str = "option") -> Roles:
    """`--output-role NAME=ROLE` (repeatable) as roles keyed by output name."""
    assignments = parse_assignments(items or [], "--output-role")
    return {
        name: parse_role(text, f"--output-role {name}", source)
        for name, text in assignments.items()
    }


@dataclass(frozen=True)
class ToleranceOptions:
    """What `--tolerance` items say: the bound for every output (`atol`, and `rtol`: a value
    is also within at rtol x |reference|), each output's own (`atols`, `rtols`), and the share
    of an output's samples that must lie within it (`min_within`), and who states them."""

    atol: float | None = None
    rtol: float | None = None
    atols: dict[str, float] = field(default_factory=dict)
    rtols: dict[str, float] = field(default_factory=dict)
    min_within: dict[str, float] = field(default_factory=dict)
    source: str = OPTION  # who states them: OPTION or RELEASE_CONFIG

    @classmethod
    def build(
        cls,
        atols: Mapping[str, float] | None = None,
        rtols: Mapping[str, float] | None = None,
        min_within: Mapping[str, float] | None = None,
        *,
        atol: float | None = None,
        rtol: float | None = None,
        source: str = OPTION,
    ) -> ToleranceOptions:
        """From values read elsewhere (a release config): checked as --tolerance's are. Raises
        UsageError for an atol that is not positive, an rtol below 0 or a share outside
        (0, 1]."""
        for name, value in [("", atol), *(atols or {}).items()]:
            if value is not None:
                _positive(str(value), f"--tolerance {name + '=' if name else ''}{value}")
        for name, value in [("", rtol), *(rtols or {}).items()]:
            if value is not None:
                check_rtol(value, f"--tolerance {name + '=' if name else ''}X,{value}")
        for name, value in (min_within or {}).items():
            check_share(value, f"--tolerance {name}=X:{value}")
        return cls(atol, rtol, dict(atols or {}), dict(rtols or {}), dict(min_within or {}), source)

    def check_names(self, outputs: Sequence[str]) -> None:
        """Raise UsageError when a per-output tolerance names an output the model lacks."""
        check_output_names(self.atols, outputs, "--tolerance NAME=X")
        check_output_names(self.rtols, outputs, "--tolerance NAME=X,R")
        check_output_names(self.min_within, outputs, "--tolerance NAME=X:MIN")


def parse_tolerance_options(items: Sequence[str] | None) -> ToleranceOptions:
    """`--tolerance ATOL[,RTOL]` and `--tolerance NAME=ATOL[,RTOL][:MIN]` (repeatable).

    Raises UsageError for an atol that is not a positive number, an rtol below 0, a minimum
    share outside (0, 1], a global one given twice, or a minimum share given for every output.
    """
    found = ToleranceOptions()
    overall = False
    for item in items or []:
        name, equals, text = item.rpartition("=")
        if not equals:
            if ":" in text:
                raise UsageError(
                    f"--tolerance {item}: a minimum share of samples is set per output "
                    "(--tolerance NAME=X:MIN); --min-top1-agreement sets it for every output."
                )
            if overall:
                raise UsageError("--tolerance X (for every output) is given twice.")
            overall = True
            atol, rtol, _ = parse_tolerance_value(text, f"--tolerance {item}")
            found = replace(found, atol=atol, rtol=rtol)
        elif not name.strip():
            raise UsageError(f"--tolerance takes X[,R] or NAME=X[,R][:MIN], found '{item}'.")
        else:
            atol, rtol, minimum = parse_tolerance_value(text, f"--tolerance {item}")
            found.atols[name.strip()] = atol
            if rtol is not None:
                found.rtols[name.strip()] = rtol
            if minimum is not None:
                found.min_within[name.strip()] = minimum
    return found


def parse_tolerance_value(text: str, where: str) -> tuple[float, float | None, float | None]:
    """`ATOL`, `ATOL,RTOL`, `ATOL:MIN` or `ATOL,RTOL:MIN` (an atol, a relative tolerance, and
    the share of samples that must lie within) as (atol, RTOL or None, MIN or None). Raises
    UsageError naming `where`."""
    bounds, colon, minimum_text = str(text).partition(":")
    atol_text, comma, rtol_text = bounds.partition(",")
    atol = _positive(atol_text, where)
    rtol = check_rtol(rtol_text, where) if comma else None
    return atol, rtol, check_share(minimum_text, where) if colon else None


def check_rtol(text: str | float, where: str) -> float:
    """A relative tolerance: a number >= 0 (0: the absolute bound alone). Raises UsageError
    naming `where`."""
    try:
        rtol = float(text)
    except ValueError:
        rtol = math.nan
    if not rtol >= 0:
        raise UsageError(
            f"{where}: the relative tolerance (after the comma) must be a number of 0 or more, "
            f"found '{text}'."
        )
    return rtol


def check_share(text: str | float, where: str) -> float:
    """A minimum share of samples: a number in (0, 1]. Raises UsageError naming `where`."""
    try:
        share = float(text)
    except ValueError:
        share = math.nan
    if not 0.0 < share <= 1.0:
        raise UsageError(
            f"{where}: the minimum share of samples within tolerance must be a number in "
            f"(0, 1], found '{text}'."
        )
    return share


def _positive(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{where}: expected a positive number.") from None
    if not value > 0:
        raise UsageError(f"{where}: expected a positive number, found {text}.")
    return value


def check_output_names(names: Iterable[str], outputs: Sequence[str], what: str) -> None:
    """Raise UsageError when `what` names an output the model does not have."""
    unknown = sorted(set(names) - set(outputs))
    if unknown:
        raise UsageError(
            f"{what} names output(s) {', '.join(unknown)}; the model's outputs are "
            f"{', '.join(outputs)}."
        )


@dataclass(frozen=True)
class Judging:
    """What a user says about a model's outputs besides their tolerances (`ToleranceOptions`):
    roles, the output labels score, and whether an output that nothing can judge may pass
    ("not judged" is exit 4 otherwise)."""

    roles: Mapping[str, OutputRole] = field(default_factory=dict)
    allow_unjudged: bool = False
    labels_output: str | None = None  # the output labels score (--labels-output); None: found

    @classmethod
    def build(
        cls,
        roles: Mapping[str, str] | None = None,
        *,
        allow_unjudged: bool = False,
        source: str = OPTION,
        labels_output: str | None = None,
    ) -> Judging:
        """From `{output: "classes" | "binary[:T]" | ...}` and the output labels score. Raises
        UsageError for an unknown role."""
        parsed = {
            name: parse_role(text, f"--output-role {name}", source)
            for name, text in (roles or {}).items()
        }
        return cls(parsed, allow_unjudged, labels_output)

    def check_names(self, outputs: Sequence[str]) -> None:
        """Raise UsageError when a role names an output the model lacks."""
        check_output_names(self.roles, outputs, "--output-role")
        gates = [role.where for role in self.roles.values() if role.where]
        check_output_names(gates, outputs, "--output-role NAME=regression:where=SCORE")
        if self.labels_output:
            check_output_names([self.labels_output], outputs, "--labels-output")

    def mark_labelled(self, roles: Roles) -> Roles:
        """`roles` with the output `labels_output` names marked as the one labels score."""
        if self.labels_output is None or self.labels_output not in roles:
            return roles
        role = roles[self.labels_output]
        return {**roles, self.labels_output: replace(role, labels=True)}
