"""What a shadowed sample is judged by, and the counts trtconv's own judging gives.

The rules are the ones `validate` judges the artifact by: the judging contract its manifest
records (`Manifest.judging_contract`; an earlier trtconv's manifest: what it records and today's
defaults for the rest); the roles are the manifest's (else inferred once, as validation infers
them, from the native graph and the first reference outputs). A regression output judged
without an atol (int8) keeps the bound its validation derived from the reference's spread: a
share of one batch's spread would move with every batch.

Counts come from `trtconv.outputs.compare` itself, never from a second implementation: each
output's comparison carries the figures its role gates on (decision agreement, the samples
within tolerance, the values rule's samples within atol), which become the live verdict's
counts. The batch is compared at confidence 0: its own intervals are not used (the live verdict
decides on the counts accumulated), and deciding them costs milliseconds per call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from trtconv.artifact.manifest import Manifest
from trtconv.core.judging_options import (
    AGREEING,
    BINARY,
    CLASS_MAP,
    CLASSES,
    EMBEDDING,
    REGRESSION,
    Judging,
    Roles,
)
from trtconv.core.model_io import Feeds, Outputs
from trtconv.options.shared import DEFAULT_CONFIDENCE
from trtconv.outputs.compare import compare, output_roles
from trtconv.outputs.maps import MIN_SAMPLE_F1, is_decision_map
from trtconv.outputs.roles import over_recorded
from trtconv.outputs.tolerance import Tolerance
from trtconv.outputs.validation_result import OutputComparison, ValidationReport
from trtconv.serving.server.shadow.verdict import VALUES_FIGURE, Count

# What each decision role's agreement counts (a binary map: the share of samples with F1 >= 0.9).
AGREEMENT_WORDS = {
    CLASSES: "top-1 agreement",
    CLASS_MAP: "per-element top-1 agreement",
    BINARY: "decision agreement",
}
# An embedding's agreement: the samples whose cosine reaches its bound.
COSINE_WORDS = "samples with cosine >= {bound:g}"
DECISION_MAP_WORDS = f"samples with F1 >= {MIN_SAMPLE_F1:g}"
WITHIN_FIGURE = "samples within tolerance"


def validated_bounds(manifest: Manifest, tolerance: Tolerance) -> dict[str, float]:
    """{output: the per-value bound its validation derived} for regression outputs judged
    without an atol (int8: a share of the reference's spread), so that every batch keeps it."""
    report = manifest.validation
    if report is None:
        return {}
    return {
        name: output.tolerance
        for name, output in report.outputs.items()
        if output.role == REGRESSION
        and output.atol is None
        and output.tolerance is not None
        and name not in tolerance.output_atol
    }


class ShadowJudge:
    """Judges a served batch (`candidate`) against the native model's (`reference`) by the
    artifact's manifest; the roles are fixed at the first batch."""

    def __init__(self, manifest: Manifest, saved_model: Path | None = None) -> None:
        judging = over_recorded(Judging(), manifest.judging)
        contract = manifest.judging_contract()
        tolerance = contract.tolerance
        # An earlier trtconv's manifest: the one line saying what the verdict is judged by.
        self.note = contract.note
        bounds = validated_bounds(manifest, tolerance)
        # A point rule (confidence 0) would flip the live verdict with every sample near the
        # bound: a stream is decided on an interval, the default one when none was recorded.
        self.confidence = tolerance.confidence or DEFAULT_CONFIDENCE
        self.tolerance = replace(
            tolerance, output_atol={**tolerance.output_atol, **bounds}, confidence=0.0
        )
        self.judging = judging
        # The graph is read for the roles the manifest does not record (an older manifest) only.
        recorded = set(judging.roles) >= set(manifest.model_signature.output_names)
        self.saved_model = None if recorded else saved_model
        self.roles: Roles | None = None
        self.unjudged: list[str] = []

    def report(
        self, reference: Outputs, candidate: Outputs, feeds: Feeds | None = None
    ) -> ValidationReport:
        """trtconv's comparison of the two, run on `feeds` (which hold the masks of outputs
        judged per token)."""
        if self.roles is None:
            self.roles = output_roles(self.saved_model, reference, self.judging, feeds=feeds)
        return compare(
            reference,
            candidate,
            self.tolerance,
            roles=self.roles,
            allow_unjudged=True,
            feeds=feeds,
        )

    def counts(
        self, reference: Outputs, candidate: Outputs, feeds: Feeds | None = None
    ) -> list[Count]:
        """The figures each output gates on, counted on these samples (run on `feeds`)."""
        report = self.report(reference, candidate, feeds)
        self.unjudged = report.unjudged
        found: list[Count] = []
        assert self.roles is not None  # fixed by report()
        for name, output in sorted(report.outputs.items()):
            dense = is_decision_map(self.roles[name], np.asarray(reference[name]))
            found += figures(name, output, report, self.tolerance.values_decide, dense)
        return found

    def disagreeing(
        self, reference: Outputs, candidate: Outputs, feeds: Feeds | None = None
    ) -> list[int]:
        """The samples (indices) some figure does not count as agreeing or within: halves
        compared until each is one sample (a few comparisons for a few such samples)."""
        rows = len(next(iter(reference.values())))
        return self._outside((reference, candidate, feeds or {}), np.arange(rows))

    def _outside(self, batch: tuple[Outputs, Outputs, Feeds], rows: np.ndarray) -> list[int]:
        reference, candidate, feeds = batch
        part = {name: array[rows] for name, array in reference.items()}
        mine = {name: array[rows] for name, array in candidate.items()}
        fed = {name: array[rows] for name, array in feeds.items()}
        if all(count.all_within for count in self.counts(part, mine, fed)):
            return []
        if len(rows) == 1:
            return [int(rows[0])]
        half = len(rows) // 2
        return [*self._outside(batch, rows[:half]), *self._outside(batch, rows[half:])]


def figures(
    name: str,
    output: OutputComparison,
    report: ValidationReport,
    values_decide: bool,
    decision_map: bool = False,
) -> Sequence[Count]:
    """The counts output `name` gates on: the values rule's samples within atol (fp32, tf32),
    the decisions' agreement (unless the values decide them; a `decision_map`'s: its samples
    with a high F1), and the samples within tolerance where that share gates (regression; a
    tensor or, with a tolerance of its own, a decision output at a lossy precision)."""
    within = output.within
    found: list[Count] = []
    values_rule = within is not None and within.minimum is None
    if values_rule and within is not None:
        found.append(Count(name, VALUES_FIGURE, None, within.samples_within, within.samples))
    agreement = output.agreement
    if output.role in AGREEING and agreement is not None and not (values_decide and values_rule):
        found.append(_agreement_count(name, output, report, decision_map))
    if within is not None and within.gating and within.minimum is not None:
        found.append(
            Count(name, WITHIN_FIGURE, within.minimum, within.samples_within, within.samples)
        )
    return found


def _agreement_count(
    name: str, output: OutputComparison, report: ValidationReport, decision_map: bool
) -> Count:
    """The count of an output's agreement: its decisions', a decision map's samples with a high
    F1, or an embedding's samples reaching its cosine bound, against its own minimum (else the
    report's), over the samples it counted (a sequence's with a valid token)."""
    if output.role == EMBEDDING:
        words = COSINE_WORDS.format(bound=output.threshold)
    else:
        words = DECISION_MAP_WORDS if decision_map else AGREEMENT_WORDS[output.role]
    samples = output.agreement_samples or report.samples
    minimum = output.agreement_minimum or report.min_top1_agreement
    return Count(name, words, minimum, (output.agreement or 0.0) * samples, samples)
