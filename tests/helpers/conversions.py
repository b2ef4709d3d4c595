"""Typed step results for release tests that judge targets without converting anything."""

from __future__ import annotations

from typing import Any

from trtconv.convert.convert_result import ConvertResult
from trtconv.measure.bench_result import BenchRow
from trtconv.outputs.validation_result import Check, OutputComparison, ValidationReport
from trtconv.release.document import CONVERTED, Conversion


def passing_validation(samples: int = 100) -> ValidationReport:
    """A report of one class-score output that agrees fully and loses no accuracy: passed."""
    output = OutputComparison(
        max_abs_error=0.0,
        max_rel_error=0.0,
        atol=1e-3,
        passed=True,
        shape_matches=True,
        role="classes",
        judged=True,
        agreement=1.0,
        accuracy_reference=0.9,
        accuracy_candidate=0.9,
    )
    return ValidationReport(
        samples=samples,
        data_source="random",
        min_top1_agreement=0.99,
        max_accuracy_drop=0.01,
        outputs={"probs": output},
        checks=[Check("top1_agreement", True, "1.0 >= 0.99", "probs")],
        labels_output="probs",
    )


def converted(backend: str, precision: str) -> Conversion:
    """A convert step that wrote an artifact which passed its validation."""
    result = ConvertResult(backend=backend, precision=precision, validation=passing_validation())
    return Conversion(CONVERTED, result)


def bench_row(**figures: Any) -> BenchRow:
    """A bench row of `figures` (batch_size, throughput_per_s, ...); the rest zero."""
    figures_ = (
        "timed_s latency_ms_min latency_ms_mean latency_ms_trimmed_mean latency_ms_p50 "
        "latency_ms_p90 latency_ms_p95 latency_ms_p99 latency_ms_max latency_ms_std "
        "cv_percent cv_trimmed_percent throughput_per_s"
    )
    zeros = dict.fromkeys(figures_.split(), 0.0)
    base = {"model": "m", "label": "m", "backend": "ort", "precision": "fp32", "xla": False}
    base |= {"throughput_mode": False, "is_baseline": False, "iterations": 1}
    base |= {"warmup_iterations": 0}
    return BenchRow(**{**base, **zeros, **figures})
