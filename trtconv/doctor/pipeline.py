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
from trtconv.facts import Facts, TensorFlowFacts
from trtconv.facts.environment import git_commit
from trtconv.facts.hardware import GpuBlock
from trtconv.protocol.doctor_section import DoctorSection, read_section
from trtconv.protocol.support import Support
from trtconv.quantize.isa import cpu_int8_class, int8_note
from trtconv.serving.server.doctor_section import ServingSection
from trtconv.serving.server.doctor_section import doctor_section as serving_section

DOCTOR_SCHEMA_VERSION = 1
# The report's keys after the backends' sections, in the document's order.
TAIL_KEYS = ("gpus", "cpu", "conversions", "libraries", "commit")


@dataclass(frozen=True)
class PythonInfo:
    """The interpreter trtconv runs on."""

    version: str
    executable: str


@dataclass(frozen=True)
class Library:
    """A library's version (None: not installed)."""

    version: str | None


@dataclass(frozen=True)
class TensorFlowInfo:
    """TensorFlow's build (`reason`: why it could not be read) and the GPUs it sees (None: not
    asked)."""

    version: str | None
    is_cuda_build: bool
    is_tensorrt_build: bool
    cuda_version: str | None
    cudnn_version: str | None
    gpus_seen: int | None
    reason: str

    @classmethod
    def of(cls, tf: TensorFlowFacts) -> TensorFlowInfo:
        """What the facts say of TensorFlow's build (and the GPUs it saw, when asked)."""
        return cls(
            tf.version,
            tf.is_cuda_build,
            tf.is_tensorrt_build,
            tf.cuda_version,
            tf.cudnn_version,
            tf.asked.gpu_count if tf.asked else None,
            tf.reason,
        )


@dataclass(frozen=True)
class CpuInfo:
    """The CPU, its features of note (name: present) and its int8 class with what it means."""

    model: str
    arch: str
    logical_cores: int
    features: dict[str, bool]
    int8_class: str
    int8_note: str


@dataclass(kw_only=True)
class DoctorReport(JsonResult):
    """`trtconv doctor`'s report: Python, TensorFlow, ONNX and tf2onnx, each backend's own
    sections (`sections`, keyed as in the document: tf_trt, tensorrt, onnxruntime, openvino),
    the GPUs, the CPU with its int8 class, one verdict per backend and precision
    (`conversions`), every library's version and trtconv's commit.

    The document carries each section as a top-level key between tf2onnx and gpus; `from_json`
    reads every key it does not declare back as a section (trtconv.protocol.doctor_section).
    """

    schema_version: int = DOCTOR_SCHEMA_VERSION
    python: PythonInfo
    tensorflow: TensorFlowInfo
    onnx: Library
    tf2onnx: Library
    sections: dict[str, DoctorSection] = field(default_factory=dict)
    gpus: list[GpuBlock]
    cpu: CpuInfo
    conversions: list[Support]
    libraries: dict[str, str | None]
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
        registry.backends()  # every registered backend's section type known
        declared = {spec.name for spec in fields(cls)}
        sections = {k: read_section(k, block) for k, block in document.items() if k not in declared}
        rest = {key: value for key, value in document.items() if key in declared}
        report = super().from_json(rest)
        report.sections.update(sections)
        return report


def doctor(deep: bool = True) -> DoctorReport:
    """Probe this machine and return the doctor report.

    `deep=True` also asks TensorFlow, in a subprocess, which TensorRT it links and loads and
    whether it sees a GPU (a few seconds); `deep=False` uses only the fast checks.
    """
    facts = registry.facts_here(deep)
    sections: dict[str, DoctorSection] = {}
    for backend in registry.backends():
        if backend.doctor is not None:
            section = backend.doctor(facts)
            sections[section.KEY] = section
    sections[ServingSection.KEY] = serving_section()
    return DoctorReport(
        python=PythonInfo(facts.python, sys.executable),
        tensorflow=TensorFlowInfo.of(facts.tensorflow),
        onnx=Library(facts.version("onnx")),
        tf2onnx=Library(facts.version("tf2onnx")),
        sections=sections,
        gpus=[gpu.block() for gpu in facts.gpus],
        cpu=_cpu(facts),
        conversions=registry.support_matrix(facts),
        libraries=dict(facts.libraries),
        commit=git_commit(),
    )


def _cpu(facts: Facts) -> CpuInfo:
    """The CPU with its int8 class: which int8 artifacts run on it exactly."""
    cpu = facts.cpu.block()
    int8_class = cpu_int8_class(cpu)
    return CpuInfo(
        model=cpu.model or "",
        arch=cpu.arch or "",
        logical_cores=cpu.logical_cores or 0,
        features=cpu.features,
        int8_class=int8_class,
        int8_note=int8_note(int8_class),
    )
