"""Each command's options object (trtconv.options) built from a release config: what the
release's train, convert, validate and bench steps run, so a default left out of the TOML is the
command's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from trtconv.core.results import optional_key
from trtconv.options.bench import BenchOptions, SpeedGoal
from trtconv.options.convert import DEFAULT_RANK_DURATION_S, Contest, ConvertOptions
from trtconv.options.shared import DEFAULT_VALIDATE_SAMPLES
from trtconv.options.train import TrainOptions
from trtconv.options.validate import ValidateOptions
from trtconv.outputs.contract import resolve
from trtconv.release.settings import ReleaseConfig, Target


def train_options(config: ReleaseConfig, output: Path) -> TrainOptions:
    """`trtconv train` of the zoo model into `output` (replacing what is there)."""
    assert config.model.zoo is not None and config.train is not None  # parse_config: both or none
    return TrainOptions(model=config.model.zoo, output=output, force=True, **asdict(config.train))


def convert_options(
    config: ReleaseConfig, target: Target, source: Path, output: Path
) -> ConvertOptions:
    """`trtconv convert` of `source` to `target` into `output` (replacing what is there),
    validated on [eval]'s data (whole, unless the model trained on it) and sample count,
    and limited by the accuracy gates (`budget`)."""
    calibration, limits = config.calibration, budget(config, target)
    return ConvertOptions(
        saved_model=source,
        precision=target.precision,
        backend=target.backend,
        output=output,
        calib_data=calibration.data,
        calib_samples=calibration.samples,
        calib_method=calibration.method,
        batch_sizes=config.bench.batch_sizes,
        validate_samples=config.eval.samples or DEFAULT_VALIDATE_SAMPLES,
        tolerance=config.outputs.tolerance(target),
        force=True,
        preprocessing=config.preprocessing.options(),
        custom_objects=config.model.custom_objects,
        int8_target=calibration.int8_target,
        fallback=calibration.fallback,
        fallback_time_limit_s=calibration.fallback_time_limit_s,
        min_top1_agreement=limits.min_top1_agreement,
        max_accuracy_drop=limits.max_accuracy_drop,
        judging=config.outputs.judging(target),
        contest=contest(config),
        confidence=config.eval.confidence,
        signature=config.model.signature,
        validate_data=config.eval.data,
        split=config.eval.split,
    )


def contest(config: ReleaseConfig) -> Contest:
    """How a `best` target times its candidates: at the gate batch size, as [bench] says."""
    bench = config.bench
    return Contest(
        batch_size=config.gates.gate_batch_size,
        duration_s=bench.duration_s or DEFAULT_RANK_DURATION_S,
        threads=bench.threads,
        iterations=bench.iterations,
    )


@dataclass(frozen=True)
class AccuracyLimits:
    """The accuracy limits a target's conversion is given (None: the precision's own); part of
    its step key, where only the limits set appear."""

    min_top1_agreement: float | None = optional_key()
    max_accuracy_drop: float | None = optional_key()


def budget(config: ReleaseConfig, target: Target) -> AccuracyLimits:
    """The accuracy gates as convert's limits, where stricter than the precision's own: the
    int8 ladder climbs until they hold, and validation judges them."""
    limits = AccuracyLimits()
    if target.precision is None:
        # `best` without a precision: each candidate is judged by its own precision's
        # tolerance (a gate over all of them would loosen int8 or tighten fp32); the release
        # gates then judge the winner.
        return limits
    gates, own = config.gates, resolve(target.precision).tolerance
    if own.values_decide:
        # fp32/tf32 conversions are decided by their values; the accuracy gates judge the
        # rates on the [eval] data (or the conversion's) as they do for every target.
        return limits
    agreement, drop = gates.min_top1_agreement, gates.max_accuracy_drop
    return AccuracyLimits(
        None if agreement is None else max(agreement, own.min_top1_agreement),
        None if drop is None else min(drop, own.max_accuracy_drop),
    )


def validate_options(
    config: ReleaseConfig, target: Target, artifact: Path, reference: Path
) -> ValidateOptions:
    """`trtconv validate` of a target's artifact against `reference` on the [eval] data."""
    return ValidateOptions(
        artifact=artifact,
        reference=reference,
        data=config.eval.data,
        samples=config.eval.samples,
        tolerance=config.outputs.tolerance(target),
        judging=config.outputs.judging(target),
        preprocessing=config.preprocessing.options(),
        split=config.eval.split,
        confidence=config.eval.confidence,
        signature=config.model.signature,
    )


def bench_data(config: ReleaseConfig) -> str | None:
    """What the bench feeds the models: [bench] data, else [eval]'s, else calibration's."""
    return config.bench.data or config.eval.data or config.calibration.data


def bench_options(config: ReleaseConfig, models: Sequence[Path], report: Path) -> BenchOptions:
    """`trtconv bench` of `models` (native first) with its report written to `report`."""
    bench = config.bench
    return BenchOptions(
        models=tuple(models),
        batch_sizes=bench.batch_sizes,
        warmup=bench.warmup,
        iterations=bench.iterations,
        duration_s=bench.duration_s,
        threads=bench.threads,
        data=bench_data(config),
        eval_data=config.eval.data,
        report=report,
        force=True,
        judging=config.outputs.judging(),
        preprocessing=config.preprocessing.options(),
        custom_objects=config.model.custom_objects,
        split=config.eval.split,
        signature=config.model.signature,
        rounds=bench.rounds,
        goal=speed_goal(config),
    )


def speed_goal(config: ReleaseConfig) -> SpeedGoal | None:
    """What the bench keeps timing for: the speed gates at the gate batch size (None when
    no speed gate is set)."""
    gates = config.gates
    if gates.min_speedup is None and gates.max_latency_ms_p99 is None:
        return None
    return SpeedGoal(
        batch_size=gates.gate_batch_size,
        min_speedup=gates.min_speedup,
        max_latency_ms_p99=gates.max_latency_ms_p99,
        time_limit_s=gates.speed_time_limit_s,
    )
