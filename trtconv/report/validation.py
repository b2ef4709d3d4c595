"""The validation report: every check of a converted model against its native one, typed.

Serialised once, by `to_dict`, into the `validation` block of convert's result, the manifest and
validate's result (keys unchanged: README documents them). Derived figures (`accuracy_drop`,
`passed`) are computed from the measured ones, never stored beside them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Check:
    """One ✓/✗ line: what was checked, whether it passed, the figures that decided."""

    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class OutputComparison:
    """One output: its errors against the reference (None when the shapes differ)."""

    max_abs_error: float | None
    max_rel_error: float | None
    atol: float | None
    passed: bool
    shape_matches: bool


@dataclass
class ValidationReport:
    """All checks of one comparison, plus the bounds they were judged by."""

    samples: int
    data_source: str
    min_top1_agreement: float
    max_accuracy_drop: float
    outputs: dict[str, OutputComparison] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    top1_agreement: float | None = None
    accuracy_reference: float | None = None
    accuracy_candidate: float | None = None
    precision: str | None = None
    machine: dict[str, Any] | None = None  # the CPU it ran on (int8 verdicts hold per CPU class)
    batch_size: int | None = None  # the converted model's batches (inside its engines' profile)
    device: str | None = None  # where the converted model ran: cpu, cuda or tensorrt

    @property
    def accuracy_drop(self) -> float | None:
        """Reference accuracy minus converted accuracy (None without labels)."""
        if self.accuracy_reference is None or self.accuracy_candidate is None:
            return None
        return self.accuracy_reference - self.accuracy_candidate

    @property
    def passed(self) -> bool:
        """True when checks ran and every one passed."""
        return bool(self.checks) and all(check.passed for check in self.checks)

    def failures(self) -> str:
        """'name: detail; ...' of every failed check ('no checks ran' when there were none)."""
        failed = [f"{c.name}: {c.detail}" for c in self.checks if not c.passed]
        return "; ".join(failed) or "no checks ran"

    def to_dict(self) -> dict[str, Any]:
        """The JSON `validation` block."""
        data: dict[str, Any] = {
            "samples": self.samples,
            "data_source": self.data_source,
            "outputs": {name: asdict(output) for name, output in self.outputs.items()},
            "top1_agreement": self.top1_agreement,
            "min_top1_agreement": self.min_top1_agreement,
            "accuracy_reference": self.accuracy_reference,
            "accuracy_candidate": self.accuracy_candidate,
            "accuracy_drop": self.accuracy_drop,
            "max_accuracy_drop": self.max_accuracy_drop,
            "checks": [asdict(check) for check in self.checks],
            "passed": self.passed,
        }
        if self.precision is not None:
            data["precision"] = self.precision
        if self.machine is not None:
            data["machine"] = self.machine
        if self.batch_size is not None:
            data["batch_size"] = self.batch_size
        if self.device is not None:
            data["device"] = self.device
        return data
