"""Manifests the shadow check's unit tests judge by: built in memory, no model behind them."""

from __future__ import annotations

from pathlib import Path

from trtconv.artifact.manifest import Manifest
from trtconv.core.judging_options import parse_role
from trtconv.core.model_io import ModelSignature, TensorSpec
from trtconv.outputs.contract import Stated, resolve
from trtconv.outputs.roles import JudgingRecord, RoleRecord
from trtconv.outputs.tolerance import TOLERANCES
from trtconv.outputs.validation_result import OutputComparison, ValidationReport


def shadow_manifest(
    precision: str = "int8",
    roles: dict[str, str] | None = None,
    minimum: float | None = None,
    confidence: float = 0.95,
    outputs: dict[str, OutputComparison] | None = None,
    source: Path | str = "models/digits/saved_model",
    contract: bool = True,
) -> Manifest:
    """An artifact's manifest whose outputs (`roles`: {name: role, as --output-role spells it},
    default one `probabilities` of class scores) were validated at `minimum` and
    `confidence`; `outputs` are the recorded comparisons (where a regression output's derived
    bound lives). `minimum` None: the precision's own (TOLERANCES); its maximum accuracy drop
    is always the table's. `contract`: the judging contract recorded whole, as convert records
    it (False: a manifest an earlier trtconv wrote)."""
    roles = roles or {"probabilities": "classes"}
    signature = ModelSignature(
        inputs=(TensorSpec("image", (None, 4), "float32"),),
        outputs=tuple(TensorSpec(name, (None, 10), "float32") for name in roles),
    )
    table = TOLERANCES[precision]
    bound = table.min_top1_agreement if minimum is None else minimum
    report = ValidationReport(
        200, "digits", bound, table.max_accuracy_drop, outputs or {}, confidence=confidence
    )
    stated = Stated(min_top1_agreement=minimum, confidence=confidence)
    parsed = {name: parse_role(text, "role", "option") for name, text in roles.items()}
    return Manifest(
        backend="ort",
        precision=precision,
        payload="model.onnx",
        source_model={"path": str(source), "sha256": "ab" * 32},
        signature=signature.to_dict(),
        device={"type": "cpu"},
        tools={},
        conversion_seconds=1.0,
        validation=report,
        status="passed",
        judging=JudgingRecord(roles={name: _record(text) for name, text in roles.items()}),
        contract=resolve(precision, stated).record(parsed) if contract else None,
    )


def _record(text: str) -> RoleRecord:
    """A recorded role as --output-role spells it (`class_map:mask=padding_mask`)."""
    role = parse_role(text, "role", "option")
    return RoleRecord(role.role, role.source, role.threshold, role.where, role.mask)
