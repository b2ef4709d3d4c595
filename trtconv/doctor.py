"""`doctor`: what this machine has and which conversions it can run, as one DoctorReport.

A report, not a check: it never raises for a missing library or device; each absence is a row
with the reason and the fix. Every registered backend adds its row of conversions and its own
sections (TF-TRT's linkage, ONNX Runtime's providers, ...).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from trtconv.backends import registry
from trtconv.core.results import JsonResult, to_jsonable
from trtconv.environment import git_commit
from trtconv.facts import Facts
from trtconv.quantize.isa import cpu_int8_class, int8_note
from trtconv.serving.status import doctor_section as serving_section

DOCTOR_SCHEMA_VERSION = 1
# The report's keys after the backends' sections, in the document's order.
TAIL_KEYS = ("gpus", "cpu", "conversions", "libraries", "commit")


@dataclass(kw_only=True)
class DoctorReport(JsonResult):
    """`trtconv doctor`'s report: Python, TensorFlow, ONNX and tf2onnx, each backend's own
    sections (`sections`, keyed as in the document: tf_trt, tensorrt, onnxruntime, openvino),
    the GPUs, the CPU with its int8 class, one verdict per backend and precision
    (`conversions`), every library's version and trtconv's commit.

    The document carries each section as a top-level key between tf2onnx and gpus; `from_json`
    reads every key it does not declare back as a section.
    """

    schema_version: int = DOCTOR_SCHEMA_VERSION
    python: dict[str, Any]
    tensorflow: dict[str, Any]
    onnx: dict[str, Any]
    tf2onnx: dict[str, Any]
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    gpus: list[dict[str, Any]]
    cpu: dict[str, Any]
    conversions: list[dict[str, Any]]
    libraries: dict[str, Any]
    commit: str | None

    def to_json(self) -> dict[str, Any]:
        """The `trtconv doctor --json` document."""
        document = super().to_json()
        sections = document.pop("sections")
        tail = {key: document.pop(key) for key in TAIL_KEYS}
        return {**document, **to_jsonable(sections), **tail}

    @classmethod
    def from_json(cls, document: Mapping[str, Any]) -> DoctorReport:
        """The report a `to_json` document describes (its undeclared keys are sections)."""
        declared = {spec.name for spec in fields(cls)}
        sections = {key: value for key, value in document.items() if key not in declared}
        return super().from_json({**document, "sections": sections})


def doctor(deep: bool = True) -> DoctorReport:
    """Probe this machine and return the doctor report.

    `deep=True` also asks TensorFlow, in a subprocess, which TensorRT it links and loads and
    whether it sees a GPU (a few seconds); `deep=False` uses only the fast checks.
    """
    facts = registry.facts_here(deep)
    sections: dict[str, dict[str, Any]] = {}
    for backend in registry.backends():
        if backend.doctor is not None:
            sections.update(backend.doctor(facts))
    sections.update(serving_section())
    return DoctorReport(
        python={"version": facts.python, "executable": sys.executable},
        tensorflow=facts.tensorflow.to_dict(),
        onnx={"version": facts.version("onnx")},
        tf2onnx={"version": facts.version("tf2onnx")},
        sections=sections,
        gpus=[gpu.to_dict() for gpu in facts.gpus],
        cpu=_cpu(facts),
        conversions=[verdict.to_dict() for verdict in registry.support_matrix(facts)],
        libraries=dict(facts.libraries),
        commit=git_commit(),
    )


def _cpu(facts: Facts) -> dict[str, Any]:
    """The CPU with its int8 class: which int8 artifacts run on it exactly."""
    cpu = facts.cpu.to_dict()
    int8_class = cpu_int8_class(cpu)
    return {**cpu, "int8_class": int8_class, "int8_note": int8_note(int8_class)}
