"""What `convert` decides before any work: the backend (and why), the precision and the output.

Checks run cheapest first, each before anything is written: the options themselves
(trtconv.options.ConvertOptions), the backend and budget (here), the SavedModel on disk, the output
free, the backend able to run the precision here (exit 3).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from trtconv.backends import registry
from trtconv.backends.registry import Backend
from trtconv.core.errors import MissingDependencyError, UsageError
from trtconv.core.precision import Precision
from trtconv.options import ConvertOptions, check_choice
from trtconv.outputs.tolerance import Tolerance, budget_for


@dataclass(frozen=True)
class Plan:
    """A conversion decided: the options as given, the backend and precision it converts to, the
    output directory, one line on why this backend, and the backends `auto` passed over."""

    options: ConvertOptions
    backend: Backend
    precision: str
    output: Path
    reason: str
    passed_over: tuple[str, ...] = ()

    @property
    def saved_model(self) -> Path:
        return self.options.saved_model

    @property
    def budget(self) -> Tolerance:
        """The precision's tolerance with the options' overrides: what validation must meet, and
        the confidence it is decided at."""
        options = self.options
        return budget_for(
            self.precision,
            options.tolerance,
            options.min_top1_agreement,
            options.max_accuracy_drop,
            options.judging.tolerances,
            options.confidence,
        )

    @property
    def calibrated(self) -> bool:
        """True when the backend reads calibration data: int8, and fp16 from ONNX (the nodes
        to keep in float32 are measured on it: trtconv.onnxlib.fp16_model)."""
        onnx_fp16 = self.precision == Precision.FP16 and self.backend.needs_onnx
        return self.precision == Precision.INT8 or onnx_fp16

    def for_candidate(self, backend: Backend, precision: str) -> Plan:
        """This plan with another backend and precision (a `--backend best` candidate)."""
        return replace(self, backend=backend, precision=precision, reason="--backend best")


def check_options(options: ConvertOptions) -> None:
    """The checks ConvertOptions cannot make alone: the backend is registered, a precision is
    given unless the backend is `best`, and the budget's limits are valid. Raises UsageError."""
    if options.precision is None and options.backend != registry.BEST:
        raise UsageError(f"--precision is required unless --backend is {registry.BEST}.")
    check_choice("--backend", options.backend, registry.backend_choices())
    budget_for(
        options.precision or Precision.FP32,
        options.tolerance,
        options.min_top1_agreement,
        options.max_accuracy_drop,
        options.judging.tolerances,
    )


def plan_single(options: ConvertOptions) -> Plan:
    """The plan for one backend (`auto` chooses it): raises MissingDependencyError (exit 3) here,
    before any work, when it cannot convert the precision on this machine, or when `auto` found
    only a backend that converts it for another machine."""
    assert options.precision is not None  # check_options
    if options.backend == registry.AUTO:
        choice = registry.auto_choice(options.precision)
    else:
        choice = registry.Choice(options.backend, "requested with --backend")
    verdict = registry.support(choice.backend, options.precision)
    verdict.require()
    if options.backend == registry.AUTO and not verdict.runs_here:
        raise MissingDependencyError(
            f"no backend can run {options.precision} on this machine ({choice.details}); fix: "
            f"run on a machine with a GPU, or pass --backend {choice.backend} to make the "
            f"artifact for one here ({verdict.reason})."
        )
    output = options.output or default_output(
        options.saved_model, choice.backend, options.precision
    )
    return Plan(
        options,
        registry.get(choice.backend),
        options.precision,
        Path(output),
        choice.reason,
        choice.passed_over,
    )


def default_output(saved_model: Path, backend: str, precision: str | None) -> Path:
    """models/<name>-<backend>-<precision> (models/<name>-best without a precision); <name> is
    the folder holding `saved_model/`."""
    resolved = saved_model.resolve()
    name = resolved.parent.name if resolved.name == "saved_model" else resolved.name
    return Path("models") / "-".join(part for part in (name, backend, precision) if part)


def step_count(backend: Backend) -> int:
    """Progress steps of one conversion: load, read data, (export ONNX), convert, validate."""
    return 4 + int(backend.needs_onnx)
