"""What `convert` decides before any work: the backend (and why), the precision and the output.

Checks run cheapest first, each before anything is written: the options themselves
(trtconv.options.convert.ConvertOptions), the backend and the judging rules (here), the
SavedModel on disk, the output free, the backend able to run the precision here (exit 3).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from trtconv.backends import registry
from trtconv.backends.registry import Backend
from trtconv.core.errors import MissingDependencyError, UsageError
from trtconv.core.fsutil import dir_size_bytes
from trtconv.core.model_io import ModelSignature
from trtconv.core.precision import Precision
from trtconv.model.savedmodel import SERVING_KEY
from trtconv.model.savedmodel_pb.signature import read_signature
from trtconv.onnxlib import export
from trtconv.options.convert import DEFAULT_RANK_BATCH_SIZE, ConvertOptions
from trtconv.options.shared import DEFAULT_BATCH_SIZES, check_choice
from trtconv.outputs.contract import JudgingContract, Stated, resolve

log = logging.getLogger(__name__)


def stated_rules(options: ConvertOptions) -> Stated:
    """What convert's options state about the judging rules (--tolerance, the limits,
    --confidence)."""
    return Stated(
        options.tolerance,
        min_top1_agreement=options.min_top1_agreement,
        max_accuracy_drop=options.max_accuracy_drop,
        confidence=options.confidence,
    )


@dataclass(frozen=True)
class ConversionPlan:
    """A conversion decided: the options as given, the backend and precision it converts to, the
    output directory, one line on why this backend, the backends `auto` passed over, and the
    model the user named when it is not the SavedModel converted (a Keras file: `source`)."""

    options: ConvertOptions
    backend: Backend
    precision: str
    output: Path
    reason: str
    passed_over: tuple[str, ...] = ()
    source: Path | None = None

    @property
    def saved_model(self) -> Path:
        return self.options.saved_model

    @property
    def source_model(self) -> Path:
        """What the manifest records as the source: the user's model file or the SavedModel."""
        return self.source or self.saved_model

    @cached_property
    def contract(self) -> JudgingContract:
        """The rules validation judges by (the precision's defaults under the options), resolved
        once per plan and written whole into the manifest."""
        return resolve(self.precision, stated_rules(self.options))

    @property
    def calibrated(self) -> bool:
        """True when the backend reads calibration data: int8, and fp16 from ONNX (the nodes
        to keep in float32 are measured on it: trtconv.onnxlib.fp16_model)."""
        onnx_fp16 = self.precision == Precision.FP16 and self.backend.needs_onnx
        return self.precision == Precision.INT8 or onnx_fp16

    def for_candidate(self, backend: Backend, precision: str) -> ConversionPlan:
        """This plan with another backend and precision (a `--backend best` candidate)."""
        return replace(self, backend=backend, precision=precision, reason="--backend best")


def check_options(options: ConvertOptions) -> None:
    """The checks ConvertOptions cannot make alone: the backend is registered, a precision is
    given unless the backend is `best`, and the budget's limits are valid. Raises UsageError."""
    if options.precision is None and options.backend != registry.BEST:
        raise UsageError(f"--precision is required unless --backend is {registry.BEST}.")
    check_choice("--backend", options.backend, registry.backend_choices())
    resolve(options.precision or Precision.FP32, stated_rules(options))


def fit_to_model(options: ConvertOptions) -> tuple[ConvertOptions, ModelSignature]:
    """(the options fitted to the SavedModel's signature, that signature), read from
    saved_model.pb (no TensorFlow): with a fixed batch the default batch sizes become it (said
    once, in the log). Raises UsageError when the signature is missing (naming those there are),
    when --batch-sizes or --rank-batch-size asks for a batch the model cannot take, or when
    --input-shape does not fit an input."""
    model = options.saved_model
    signature = read_signature(model, options.signature or SERVING_KEY)
    signature.with_shapes(options.input_shapes)  # checked here, applied to random data
    fixed = signature.fixed_batch
    if fixed is None:
        return options, signature
    sizes = signature.accepted_batch_sizes(
        options.batch_sizes, DEFAULT_BATCH_SIZES, model, "--batch-sizes"
    )
    rank = signature.accepted_batch_sizes(
        (options.contest.batch_size,), (DEFAULT_RANK_BATCH_SIZE,), model, "--rank-batch-size"
    )
    log.info(
        "%s takes batch size %d only (input %s): calibrating, validating, building and timing "
        "at batch %d",
        model,
        fixed,
        signature.fixed_input().describe(),
        fixed,
    )
    contest = replace(options.contest, batch_size=rank[0])
    return replace(options, batch_sizes=sizes, contest=contest), signature


def refusal(backend: Backend, saved_model: Path, signature: ModelSignature) -> str | None:
    """Why `backend` cannot convert this model at all, whatever the machine (None when it can):
    a tf.string input it has no ops for, or a model too large for the ONNX export."""
    strings = [spec for spec in signature.inputs if spec.is_string]
    if strings and not backend.string_inputs:
        spec = strings[0]
        return (
            f"input '{spec.name}' is a tf.string ({spec.describe()}) and --backend "
            f"{backend.name} builds from a graph without TensorFlow's string ops (decoding, "
            "parsing), so it cannot convert this model; the native TensorFlow model (trtconv "
            "bench) and --backend tftrt (NVIDIA GPU) keep string preprocessing in TensorFlow, "
            "or export a signature that takes the decoded tensor"
        )
    if backend.needs_onnx:
        size = dir_size_bytes(saved_model)
        if size > export.ONNX_SIZE_LIMIT_BYTES:
            return (
                f"{saved_model} holds {size / 1e9:.1f} GB and --backend {backend.name} builds "
                f"from an ONNX export, which stops at {export.ONNX_SIZE_LIMIT_BYTES / 1e9:.1f} GB "
                "(protobuf's limit); --backend openvino reads the SavedModel itself and "
                "converts it"
            )
    return None


def plan_single(
    options: ConvertOptions,
    signature: ModelSignature,
    source: Path | None,
    cannot: tuple[str, ...] = (),
) -> ConversionPlan:
    """The plan for one backend (`auto` chooses it, leaving out the backends `cannot` names:
    they failed to take this model) converting a model of `signature` (from the user's file
    `source`, when not the SavedModel itself). Raises UsageError when the backend cannot
    convert such a model (`refusal`; `auto` then says why in one line and takes the next) and
    MissingDependencyError (exit 3) when it cannot convert the precision on this machine, or
    when `auto` found only a backend that converts it for another machine, before any work."""
    assert options.precision is not None  # check_options
    if options.backend == registry.AUTO:
        choice = _auto_choice(options, signature, cannot)
    else:
        choice = registry.Choice(options.backend, "requested with --backend")
    backend = registry.get(choice.backend)
    refused = refusal(backend, options.saved_model, signature)
    if refused:
        raise UsageError(refused[0].upper() + refused[1:] + ".")
    verdict = registry.support(choice.backend, options.precision)
    verdict.require()
    if options.backend == registry.AUTO and not verdict.runs_here:
        raise MissingDependencyError(
            f"no backend can run {options.precision} on this machine ({choice.details}); fix: "
            f"run on a machine with a GPU, or pass --backend {choice.backend} to make the "
            f"artifact for one here ({verdict.reason})."
        )
    named = source or options.saved_model
    output = options.output or default_output(named, choice.backend, options.precision)
    return ConversionPlan(
        options=options,
        backend=backend,
        precision=options.precision,
        output=Path(output),
        reason=choice.reason,
        passed_over=choice.passed_over,
        source=source,
    )


def _auto_choice(
    options: ConvertOptions, signature: ModelSignature, cannot: tuple[str, ...]
) -> registry.Choice:
    """`auto`'s backend for this model: the first the registry chooses that does not refuse
    the model (each refusal said in one line); the last refusal, as a UsageError, when none
    is left."""
    assert options.precision is not None
    precision = options.precision
    while True:
        choice = registry.auto_choice(precision, cannot=cannot)
        if not choice.backend:
            raise UsageError(f"No backend can convert {options.saved_model} here: {choice.reason}.")
        refused = refusal(registry.get(choice.backend), options.saved_model, signature)
        tried = (*cannot, choice.backend)
        if not refused or registry.next_auto(precision, tried) is None:
            return _with_untaken(choice, cannot)  # a refusal is then raised by plan_single
        log.warning("auto: %s cannot take this model (%s); trying the next", tried[-1], refused)
        cannot = tried


def _with_untaken(choice: registry.Choice, cannot: tuple[str, ...]) -> registry.Choice:
    """`choice` saying that the backends `cannot` names could not take this model (in its one
    line and among the backends passed over)."""
    if not cannot:
        return choice
    untaken = tuple(f"{name} (could not take this model)" for name in cannot)
    reason = f"{choice.reason}; {', '.join(cannot)} could not take this model"
    return replace(choice, reason=reason, passed_over=(*untaken, *choice.passed_over))


def default_output(saved_model: Path, backend: str, precision: str | None) -> Path:
    """models/<name>-<backend>-<precision> (models/<name>-best without a precision); <name> is
    the folder holding `saved_model/` (a model file's name without its suffix)."""
    resolved = saved_model.resolve()
    name = resolved.parent.name if resolved.name == "saved_model" else resolved.name
    if resolved.is_file():
        name = resolved.stem
    return Path("models") / "-".join(part for part in (name, backend, precision) if part)


def step_count(backend: Backend) -> int:
    """Progress steps of one conversion: load, read data, (export ONNX), convert, validate."""
    return 4 + int(backend.needs_onnx)
