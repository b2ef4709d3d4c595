"""`doctor`: what this machine has and which conversions it can run, as one dict.

A report, not a check: it never raises for a missing library or device; each absence is a row
with the reason and the fix. Every registered backend adds its row of conversions and its own
sections (TF-TRT's linkage, ONNX Runtime's providers, ...).
"""

from __future__ import annotations

import sys
from typing import Any

from trtconv.backends import registry
from trtconv.environment import git_commit
from trtconv.facts import Facts

DOCTOR_SCHEMA_VERSION = 1


def doctor(deep: bool = True) -> dict[str, Any]:
    """Probe this machine and return the doctor report.

    `deep=True` also asks TensorFlow, in a subprocess, which TensorRT it links and loads and
    whether it sees a GPU (a few seconds); `deep=False` uses only the fast checks.
    """
    facts = registry.facts_here(deep)
    report: dict[str, Any] = {
        "schema_version": DOCTOR_SCHEMA_VERSION,
        "python": {"version": facts.python, "executable": sys.executable},
        "tensorflow": facts.tensorflow.to_dict(),
        "onnx": {"version": facts.version("onnx")},
        "tf2onnx": {"version": facts.version("tf2onnx")},
    }
    for backend in registry.backends():
        if backend.doctor is not None:
            report.update(backend.doctor(facts))
    report.update(
        gpus=[gpu.to_dict() for gpu in facts.gpus],
        cpu=_cpu(facts),
        conversions=[verdict.to_dict() for verdict in registry.support_matrix(facts)],
        libraries=dict(facts.libraries),
        commit=git_commit(),
    )
    return report


def _cpu(facts: Facts) -> dict[str, Any]:
    """The CPU with its int8 class: which int8 artifacts run on it exactly."""
    from trtconv.quantize.isa import cpu_int8_class, int8_note

    cpu = facts.cpu.to_dict()
    int8_class = cpu_int8_class(cpu)
    return {**cpu, "int8_class": int8_class, "int8_note": int8_note(int8_class)}
