"""What a bench says about accuracy: every model's outputs on the evaluation data, judged
against the baseline's by each output's role (the same judging as validate), on the data the
models expect (their data contract), and which artifacts failed their own validation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trtconv.bench.models import BenchPlan, ModelEntry
from trtconv.calib.judged_data import judged_data, scale_warning
from trtconv.calib.sources import ArraySet, input_stats
from trtconv.core.data_contract import DataContract
from trtconv.core.judging_options import Judging
from trtconv.core.model_io import Outputs
from trtconv.measure.bench_result import ModelInfo
from trtconv.options.shared import PreprocessingOptions
from trtconv.outputs.compare import compare, output_roles
from trtconv.outputs.contract import resolve
from trtconv.outputs.roles import over_recorded
from trtconv.outputs.tolerance import Tolerance
from trtconv.outputs.validation_result import FAILED, NOT_JUDGED


@dataclass
class AccuracySet:
    """The evaluation set and how its models are judged: `judging` for models that recorded
    none (the native SavedModels), `by_model` (label -> judging) for artifacts, each by its own
    manifest's roles (an fp32 and an int8 artifact may have been given different roles), and
    `rules` (label -> tolerance) by the judging contract each artifact's manifest records."""

    data: ArraySet
    contract: DataContract
    judging: Judging = field(default_factory=Judging)
    by_model: dict[str, Judging] = field(default_factory=dict)
    rules: dict[str, Tolerance] = field(default_factory=dict)

    def judging_of(self, label: str) -> Judging:
        """How the model `label` is judged."""
        return self.by_model.get(label, self.judging)

    def rules_of(self, label: str, precision: str) -> Tolerance:
        """The rules the model `label` is judged by: its manifest's contract, else (a native
        model) `precision`'s defaults."""
        return self.rules.get(label) or resolve(precision).tolerance


def recorded_contract(plan: BenchPlan) -> DataContract | None:
    """The data contract the artifacts were converted with (the first that records one)."""
    return next((m.data_contract for m in plan.models if m.data_contract), None)


def contract_warnings(plan: BenchPlan) -> list[str]:
    """One line when artifacts were converted with different preprocessing."""
    recorded = {m.label: m.data_contract.summary for m in plan.models if m.data_contract}
    if len(set(recorded.values())) <= 1:
        return []
    seen = ", ".join(f"{label}: {summary}" for label, summary in recorded.items())
    first = next(iter(recorded))
    return [
        f"The artifacts were converted with different preprocessing ({seen}); every model is "
        f"fed {first}'s."
    ]


def validation_warnings(models: list[ModelEntry]) -> list[str]:
    """One line per artifact whose own validation (its manifest's verdict) did not pass."""
    return [
        f"{m.label}: its conversion's validation {m.validation.upper()} (manifest status): its "
        "speed is that of an artifact not shown to do what the native model does."
        for m in models
        if m.validation in (FAILED, NOT_JUDGED)
    ]


def scale_warnings(models: list[ModelEntry], data: ArraySet) -> list[str]:
    """validate's warning, per artifact: the evaluation data spread on another scale than the
    data it was calibrated on (a wrong preprocessing somewhere: its agreement means little)."""
    here = input_stats(data)
    found = (scale_warning(m.calibration, data, m.label, here) for m in models if m.calibration)
    return [warning for warning in found if warning]


def prepare(
    plan: BenchPlan,
    spec: str,
    source: Path | None,
    options: PreprocessingOptions | None,
    split: str | None,
    judging: Judging | None,
) -> AccuracySet:
    """The evaluation set (held-out unless `split` is "all"), read by the recorded contract,
    and the judging: `judging` over what each artifact's manifest recorded (over the first
    artifact's for the models that recorded none)."""
    evaluation = judged_data(
        plan.baseline.signature,
        source,
        spec,
        options,
        split,
        contract=recorded_contract(plan),
    )
    recorded = next((m.judging for m in plan.models if m.judging), None)
    names = plan.baseline.signature.output_names
    given = judging or Judging()
    merged = over_recorded(given, recorded)
    merged.check_names(names)
    by_model = {m.label: over_recorded(given, m.judging) for m in plan.models if m.judging}
    rules = {m.label: m.rules for m in plan.models if m.rules is not None}
    return AccuracySet(evaluation.data, evaluation.contract, merged, by_model, rules)


def judge_models(
    infos: list[ModelInfo],
    baseline: ModelInfo,
    outputs: dict[str, Outputs | None],
    evaluation: AccuracySet,
    source: Path | None,
) -> None:
    """Each model's accuracy (with labels) and decision agreement with the baseline, from its
    outputs judged by role (top-1 for class scores, the thresholded decision for binary ones)."""
    reference = outputs.get(baseline.label)
    if reference is None:
        return
    for info in infos:
        mine = outputs.get(info.label)
        if mine is None:
            continue
        judging = evaluation.judging_of(info.label)
        feeds = evaluation.data.inputs
        roles = output_roles(source, reference, judging, feeds=feeds)
        tolerance = evaluation.rules_of(info.label, info.precision)
        report = compare(reference, mine, tolerance, evaluation.data.labels, "", roles, feeds=feeds)
        info.eval_samples = report.samples
        info.accuracy = report.accuracy_candidate
        info.top1_agreement = report.top1_agreement


def load_outputs(path: str | None) -> Outputs | None:
    """A worker's evaluation outputs (None when it evaluated nothing)."""
    if not path:
        return None
    with np.load(path, allow_pickle=False) as archive:
        return {key: archive[key] for key in archive.files}
