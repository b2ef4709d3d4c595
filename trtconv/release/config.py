"""The release config: a TOML file read strictly into typed, frozen settings.

Every mistake is a UsageError (exit 2) whose message starts with the key path, e.g.
`bench.batch_sizes[1]: expected a positive integer, found "8"` (the checks are in values.py).
Unknown keys are errors too: a typo in a gate must never silently turn the gate off.

The settings echo the TOML (release.json's `config`, and the steps' resume keys); each command's
options object (trtconv.options) is built from them by `ReleaseConfig`, so a default left out of
the TOML is the command's own.

Relative paths in the config are resolved against the current working directory, like every
other trtconv argument (pipelines run from their repository root).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trtconv.backends.registry import BEST
from trtconv.bench.signature import read_signature
from trtconv.calib.contract import PreprocessingOptions
from trtconv.core.errors import UsageError
from trtconv.core.precision import PRECISIONS
from trtconv.options import (
    CALIB_METHODS,
    DEFAULT_BENCH_ROUNDS,
    DEFAULT_CALIB_METHOD,
    DEFAULT_CONFIDENCE,
    DEFAULT_FALLBACK_TIME_LIMIT_S,
    DEFAULT_RANK_DURATION_S,
    DEFAULT_RELEASE_BATCH_SIZES,
    DEFAULT_SPEED_TIME_LIMIT_S,
    DEFAULT_VALIDATE_SAMPLES,
    INT8_TARGETS,
    SPLITS,
    BenchOptions,
    Contest,
    ConvertOptions,
    SpeedGoal,
    TrainOptions,
    ValidateOptions,
)
from trtconv.outputs.roles import Judging
from trtconv.outputs.tolerance import tolerance_for
from trtconv.release.values import (
    Validator,
    backend_choice,
    boolean,
    choice,
    fail,
    fraction,
    level,
    list_of,
    non_negative_int,
    non_negative_number,
    number,
    numbers,
    positive_int,
    positive_number,
    role,
    string,
    table,
    table_of,
    unknown_key,
)
from trtconv.savedmodel import SERVING_KEY
from trtconv.train.amp import AMP_DTYPES
from trtconv.train.export import OUTPUT_NAME
from trtconv.zoo.registry import MODELS

DIGITS = "digits"


# --- the settings --------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSettings:
    """Exactly one of `path` (a SavedModel) and `zoo` (a model to train first); `signature`:
    the SavedModel's signature to release (as --signature; None: serving_default)."""

    path: Path | None = None
    zoo: str | None = None
    signature: str | None = None


@dataclass(frozen=True)
class TrainSettings:
    """`trtconv train` options for a zoo model; None means the model's default."""

    data: str | None = None
    epochs: int | None = None
    batch_size: int | None = None
    amp: bool = TrainOptions.amp
    amp_dtype: str = TrainOptions.amp_dtype
    xla: bool = TrainOptions.xla
    seed: int = TrainOptions.seed


@dataclass(frozen=True)
class Target:
    """One conversion to try; `roles` and `tolerances` (per output) refine [outputs]."""

    backend: str
    precision: str | None  # None: backend "best" over every precision
    tolerance: float | None = None
    roles: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, float] = field(default_factory=dict)

    @property
    def id(self) -> str:
        """Stable name: the artifact folder under artifacts/ and the key in release.json."""
        return "-".join(part for part in (self.backend, self.precision) if part)


@dataclass(frozen=True)
class CalibrationSettings:
    """INT8 calibration, as `convert --calib-data/--calib-method/--calib-samples/--int8-target`,
    and the int8 precision ladder (`--no-fallback`, `--fallback-time-limit`). `samples` None:
    convert's default."""

    data: str | None = None
    method: str = DEFAULT_CALIB_METHOD
    samples: int | None = None
    int8_target: str = ConvertOptions.int8_target
    fallback: bool = ConvertOptions.fallback
    fallback_time_limit_s: float = DEFAULT_FALLBACK_TIME_LIMIT_S


@dataclass(frozen=True)
class EvalSettings:
    """Labelled evaluation data for accuracy and agreement; None: the convert validation.
    `samples` None: validate's default. `split`: held-out (default) or all, for [eval] and the
    bench's evaluation alike. `confidence`: the level accuracy verdicts are decided at
    (convert's validation and [eval]'s; 0: point decisions); None: the commands' default."""

    data: str | None = None
    samples: int | None = None
    split: str | None = None
    confidence: float | None = None


@dataclass(frozen=True)
class PreprocessingSettings:
    """How raw pixels become inputs, as convert/validate/bench --image-scale/-offset/-mean/-std;
    None: the model card's, else 1/255."""

    scale: float | None = None
    offset: float | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def options(self) -> PreprocessingOptions:
        """As the commands take them."""
        return PreprocessingOptions(self.scale, self.offset, self.mean, self.std)


@dataclass(frozen=True)
class OutputSettings:
    """How outputs are judged, for every target: roles, per-output tolerances, and whether an
    output nothing can judge may pass (as --output-role, --tolerance NAME=X, --allow-unjudged)."""

    roles: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, float] = field(default_factory=dict)
    allow_unjudged: bool = False
    labels_output: str | None = None  # the output the labels score (as --labels-output)

    def judging(self, target: Target | None = None) -> Judging:
        """The target's roles and tolerances over these (all of them were checked when read)."""
        roles = {**self.roles, **(target.roles if target else {})}
        tolerances = {**self.tolerances, **(target.tolerances if target else {})}
        return Judging.build(
            roles, tolerances, self.allow_unjudged, "release config", self.labels_output
        )


@dataclass(frozen=True)
class BenchSettings:
    """How each model is timed; `iterations` and `duration_s` exclude each other, `rounds` is
    how many interleaved rounds they are split into. None: the bench's own defaults."""

    batch_sizes: tuple[int, ...] = DEFAULT_RELEASE_BATCH_SIZES
    iterations: int | None = None
    duration_s: float | None = None
    warmup: int | None = None
    threads: int | None = None
    data: str | None = None
    rounds: int = DEFAULT_BENCH_ROUNDS


@dataclass(frozen=True)
class GateSettings:
    """Thresholds every target must meet; None: gate not applied. While a speed gate's interval
    straddles its threshold the bench adds rounds for up to `speed_time_limit_s` seconds."""

    max_accuracy_drop: float | None = None
    min_top1_agreement: float | None = None
    min_speedup: float | None = None
    max_latency_ms_p99: float | None = None
    gate_batch_size: int = max(DEFAULT_RELEASE_BATCH_SIZES)
    speed_time_limit_s: float = DEFAULT_SPEED_TIME_LIMIT_S


@dataclass(frozen=True)
class ReleaseConfig:
    """A whole release config, checked; `source` is the TOML file it came from."""

    source: Path
    model: ModelSettings
    targets: tuple[Target, ...]
    train: TrainSettings | None = None
    calibration: CalibrationSettings = field(default_factory=CalibrationSettings)
    eval: EvalSettings = field(default_factory=EvalSettings)
    bench: BenchSettings = field(default_factory=BenchSettings)
    gates: GateSettings = field(default_factory=GateSettings)
    preprocessing: PreprocessingSettings = field(default_factory=PreprocessingSettings)
    outputs: OutputSettings = field(default_factory=OutputSettings)

    def to_dict(self) -> dict[str, Any]:
        """The config echo for release.json: JSON-ready, paths as strings."""
        data = asdict(self)
        data["source"] = str(self.source)
        data["model"]["path"] = None if self.model.path is None else str(self.model.path)
        data["targets"] = [{**asdict(t), "id": t.id} for t in self.targets]
        data["bench"]["batch_sizes"] = list(self.bench.batch_sizes)
        return data

    # --- the commands' options ---------------------------------------------------------------

    def train_options(self, output: Path) -> TrainOptions:
        """`trtconv train` of the zoo model into `output` (replacing what is there)."""
        assert self.model.zoo is not None and self.train is not None  # parse_config: both or none
        return TrainOptions(model=self.model.zoo, output=output, force=True, **asdict(self.train))

    def convert_options(self, target: Target, source: Path, output: Path) -> ConvertOptions:
        """`trtconv convert` of `source` to `target` into `output` (replacing what is there),
        validated on [eval]'s data (whole, unless the model trained on it) and sample count,
        and limited by the accuracy gates (`budget`)."""
        calibration, budget = self.calibration, self.budget(target)
        return ConvertOptions(
            saved_model=source,
            precision=target.precision,
            backend=target.backend,
            output=output,
            calib_data=calibration.data,
            calib_samples=calibration.samples,
            calib_method=calibration.method,
            batch_sizes=self.bench.batch_sizes,
            validate_samples=self.eval.samples or DEFAULT_VALIDATE_SAMPLES,
            tolerance=target.tolerance,
            force=True,
            preprocessing=self.preprocessing.options(),
            int8_target=calibration.int8_target,
            fallback=calibration.fallback,
            fallback_time_limit_s=calibration.fallback_time_limit_s,
            min_top1_agreement=budget.get("min_top1_agreement"),
            max_accuracy_drop=budget.get("max_accuracy_drop"),
            judging=self.outputs.judging(target),
            contest=self.contest(),
            confidence=DEFAULT_CONFIDENCE if self.eval.confidence is None else self.eval.confidence,
            signature=self.model.signature,
            validate_data=self.eval.data,
            split=self.eval.split,
        )

    def contest(self) -> Contest:
        """How a `best` target times its candidates: at the gate batch size, as [bench] says."""
        bench = self.bench
        return Contest(
            batch_size=self.gates.gate_batch_size,
            duration_s=bench.duration_s or DEFAULT_RANK_DURATION_S,
            threads=bench.threads,
            iterations=bench.iterations,
        )

    def budget(self, target: Target) -> dict[str, float]:
        """The accuracy gates as convert's limits, where stricter than the precision's own: the
        int8 ladder climbs until they hold, and validation judges them."""
        limits: dict[str, float] = {}
        if target.precision is None:
            # `best` without a precision: each candidate is judged by its own precision's
            # tolerance (a gate over all of them would loosen int8 or tighten fp32); the release
            # gates then judge the winner.
            return limits
        gates, own = self.gates, tolerance_for(target.precision)
        if own.values_decide:
            # fp32/tf32 conversions are decided by their values; the accuracy gates judge the
            # rates on the [eval] data (or the conversion's) as they do for every target.
            return limits
        if gates.min_top1_agreement is not None:
            limits["min_top1_agreement"] = max(gates.min_top1_agreement, own.min_top1_agreement)
        if gates.max_accuracy_drop is not None:
            limits["max_accuracy_drop"] = min(gates.max_accuracy_drop, own.max_accuracy_drop)
        return limits

    def validate_options(self, target: Target, artifact: Path, reference: Path) -> ValidateOptions:
        """`trtconv validate` of a target's artifact against `reference` on the [eval] data."""
        return ValidateOptions(
            artifact=artifact,
            reference=reference,
            data=self.eval.data,
            samples=self.eval.samples,
            tolerance=target.tolerance,
            judging=self.outputs.judging(target),
            preprocessing=self.preprocessing.options(),
            split=self.eval.split,
            confidence=self.eval.confidence,
            signature=self.model.signature,
        )

    @property
    def bench_data(self) -> str | None:
        """What the bench feeds the models: [bench] data, else [eval]'s, else calibration's."""
        return self.bench.data or self.eval.data or self.calibration.data

    def bench_options(self, models: Sequence[Path], report: Path) -> BenchOptions:
        """`trtconv bench` of `models` (native first) with its report written to `report`."""
        bench = self.bench
        return BenchOptions(
            models=tuple(models),
            batch_sizes=bench.batch_sizes,
            warmup=bench.warmup,
            iterations=bench.iterations,
            duration_s=bench.duration_s,
            threads=bench.threads,
            data=self.bench_data,
            eval_data=self.eval.data,
            report=report,
            force=True,
            judging=self.outputs.judging(),
            preprocessing=self.preprocessing.options(),
            split=self.eval.split,
            signature=self.model.signature,
            rounds=bench.rounds,
            goal=self.speed_goal(),
        )

    def speed_goal(self) -> SpeedGoal | None:
        """What the bench keeps timing for: the speed gates at the gate batch size (None when
        no speed gate is set)."""
        gates = self.gates
        if gates.min_speedup is None and gates.max_latency_ms_p99 is None:
            return None
        return SpeedGoal(
            batch_size=gates.gate_batch_size,
            min_speedup=gates.min_speedup,
            max_latency_ms_p99=gates.max_latency_ms_p99,
            time_limit_s=gates.speed_time_limit_s,
        )


MODEL_FIELDS: dict[str, Validator] = {"path": string, "zoo": string, "signature": string}
TRAIN_FIELDS: dict[str, Validator] = {
    "data": string,
    "epochs": positive_int,
    "batch_size": positive_int,
    "amp": boolean,
    "amp_dtype": choice(*AMP_DTYPES),
    "xla": boolean,
    "seed": non_negative_int,
}


TARGET_FIELDS: dict[str, Validator] = {
    "backend": backend_choice,
    "precision": choice(*PRECISIONS),
    "tolerance": positive_number,
    "roles": table_of(role),
    "tolerances": table_of(positive_number),
}
CALIBRATION_FIELDS: dict[str, Validator] = {
    "data": string,
    "method": choice(*CALIB_METHODS),
    "samples": positive_int,
    "int8_target": choice(*INT8_TARGETS),
    "fallback": boolean,
    "fallback_time_limit_s": positive_number,
}
EVAL_FIELDS: dict[str, Validator] = {
    "data": string,
    "samples": positive_int,
    "split": choice(*SPLITS),
    "confidence": level,
}
PREPROCESSING_FIELDS: dict[str, Validator] = {
    "scale": positive_number,
    "offset": number,
    "mean": numbers,
    "std": numbers,
}
OUTPUT_FIELDS: dict[str, Validator] = {
    "roles": table_of(role),
    "tolerances": table_of(positive_number),
    "allow_unjudged": boolean,
    "labels_output": string,
}
BENCH_FIELDS: dict[str, Validator] = {
    "batch_sizes": list_of(positive_int),
    "iterations": positive_int,
    "duration_s": positive_number,
    "warmup": non_negative_int,
    "threads": positive_int,
    "data": string,
    "rounds": positive_int,
}
GATE_FIELDS: dict[str, Validator] = {
    "max_accuracy_drop": fraction,
    "min_top1_agreement": fraction,
    "min_speedup": positive_number,
    "max_latency_ms_p99": positive_number,
    "gate_batch_size": positive_int,
    "speed_time_limit_s": non_negative_number,
}
TOP_LEVEL = (
    "model", "train", "targets", "calibration", "eval", "bench", "gates", "preprocessing",
    "outputs",
)  # fmt: skip


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    if not path.is_file():
        raise UsageError(f"Release config {path} does not exist.")
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"Release config {path} is not valid TOML ({exc}).") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"Release config {path} is not UTF-8 text ({exc}).") from exc
    return data


def load_config(path: Path) -> ReleaseConfig:
    """Read and check a release config. Raises UsageError naming the key path of any mistake."""
    path = Path(path)
    return parse_config(_read_toml(path), path)


def parse_config(raw: dict[str, Any], source: Path) -> ReleaseConfig:
    """Check an already-parsed TOML document (see `load_config`)."""
    for key in raw:
        if key not in TOP_LEVEL:
            raise unknown_key("", key, TOP_LEVEL)
    model = _model(raw)
    train = _train(raw, model)
    targets = _targets(raw)
    calibration = CalibrationSettings(
        **table("calibration", raw.get("calibration", {}), CALIBRATION_FIELDS)
    )
    evaluation = EvalSettings(**table("eval", raw.get("eval", {}), EVAL_FIELDS))
    bench = _bench(raw)
    gates = _gates(raw, bench)
    preprocessing = _preprocessing(raw)
    outputs = OutputSettings(**table("outputs", raw.get("outputs", {}), OUTPUT_FIELDS))
    config = ReleaseConfig(
        source=source,
        model=model,
        targets=targets,
        train=train,
        calibration=calibration,
        eval=evaluation,
        bench=bench,
        gates=gates,
        preprocessing=preprocessing,
        outputs=outputs,
    )
    _check_cross_references(config)
    return config


def _model(raw: dict[str, Any]) -> ModelSettings:
    if "model" not in raw:
        raise UsageError(
            'model: missing; give [model] path = "SAVED_MODEL", or zoo = "NAME" and [train].'
        )
    values = table("model", raw["model"], MODEL_FIELDS)
    if ("path" in values) == ("zoo" in values):
        raise UsageError(
            "model: give exactly one of model.path (a SavedModel) and model.zoo (a model to train)."
        )
    if "zoo" in values:
        if values["zoo"] not in MODELS:
            raise fail("model.zoo", "one of " + ", ".join(f'"{m}"' for m in MODELS), values["zoo"])
        if "signature" in values:
            raise UsageError("model.signature: only with model.path (a zoo model serves one).")
        return ModelSettings(zoo=values["zoo"])
    model_path = Path(values["path"])
    if not (model_path / "saved_model.pb").is_file():
        what = "does not exist" if not model_path.exists() else "holds no saved_model.pb"
        raise UsageError(f"model.path: SavedModel {model_path} {what}.")
    signature = values.get("signature")
    if signature is not None:
        try:  # a missing signature fails here, in a second, not after a conversion
            read_signature(model_path, signature)
        except UsageError as exc:
            raise UsageError(f"model.signature: {exc}") from exc
    return ModelSettings(path=model_path, signature=signature)


def _train(raw: dict[str, Any], model: ModelSettings) -> TrainSettings | None:
    if "train" not in raw:
        return TrainSettings() if model.zoo else None
    if model.zoo is None:
        raise UsageError("train: only allowed with model.zoo (model.path is already trained).")
    return TrainSettings(**table("train", raw["train"], TRAIN_FIELDS))


def _targets(raw: dict[str, Any]) -> tuple[Target, ...]:
    entries = raw.get("targets")
    if entries is None:
        raise UsageError(
            "targets: missing; add at least one [[targets]] with backend and precision."
        )
    if not isinstance(entries, list) or not entries:
        raise fail("targets", "an array of tables ([[targets]])", entries)
    targets: list[Target] = []
    for index, entry in enumerate(entries):
        where = f"targets[{index}]"
        values = table(where, entry, TARGET_FIELDS)
        for required in ("backend", "precision"):
            if required not in values and (required, values.get("backend")) != ("precision", BEST):
                raise UsageError(f"{where}.{required}: missing.")
        target = Target(**{"precision": None, **values})
        for other_index, other in enumerate(targets):
            if other.id == target.id:
                raise UsageError(
                    f"{where}: duplicates targets[{other_index}] ({target.backend} "
                    f"{target.precision})."
                )
        targets.append(target)
    return tuple(targets)


def _bench(raw: dict[str, Any]) -> BenchSettings:
    values = table("bench", raw.get("bench", {}), BENCH_FIELDS)
    if "iterations" in values and "duration_s" in values:
        raise UsageError("bench: give iterations or duration_s, not both.")
    if "batch_sizes" in values:
        sizes = values["batch_sizes"]
        for index, size in enumerate(sizes):
            if size in sizes[:index]:
                raise UsageError(f"bench.batch_sizes[{index}]: {size} is listed twice.")
    return BenchSettings(**values)


def _gates(raw: dict[str, Any], bench: BenchSettings) -> GateSettings:
    values = table("gates", raw.get("gates", {}), GATE_FIELDS)
    values.setdefault("gate_batch_size", max(bench.batch_sizes))
    if values["gate_batch_size"] not in bench.batch_sizes:
        sizes = ", ".join(map(str, bench.batch_sizes))
        raise UsageError(
            f"gates.gate_batch_size: {values['gate_batch_size']} is not one of "
            f"bench.batch_sizes ({sizes})."
        )
    return GateSettings(**values)


def _preprocessing(raw: dict[str, Any]) -> PreprocessingSettings:
    values = table("preprocessing", raw.get("preprocessing", {}), PREPROCESSING_FIELDS)
    mean, std = values.get("mean"), values.get("std")
    if mean is not None and std is not None and len(mean) != len(std):
        raise UsageError(
            f"preprocessing.std: {len(std)} values for the {len(mean)} of preprocessing.mean."
        )
    return PreprocessingSettings(**values)


def _check_output_names(config: ReleaseConfig) -> None:
    """Roles and tolerances must name outputs the model has (read without TensorFlow; a zoo
    model's output is known)."""
    labelled = config.outputs.labels_output
    named = [("outputs", config.outputs.roles, config.outputs.tolerances)]
    named += [(f"targets[{i}]", t.roles, t.tolerances) for i, t in enumerate(config.targets)]
    if not labelled and not any(roles or tolerances for _, roles, tolerances in named):
        return
    path = config.model.path
    signature = config.model.signature or SERVING_KEY
    outputs = read_signature(path, signature).output_names if path is not None else [OUTPUT_NAME]
    if labelled and labelled not in outputs:
        raise UsageError(
            f"outputs.labels_output: the model has no output '{labelled}' "
            f"(its outputs: {', '.join(outputs)})."
        )
    for where, roles, tolerances in named:
        for key, names in (("roles", roles), ("tolerances", tolerances)):
            unknown = sorted(set(names) - set(outputs))
            if unknown:
                raise UsageError(
                    f"{where}.{key}.{unknown[0]}: the model has no output '{unknown[0]}' "
                    f"(its outputs: {', '.join(outputs)})."
                )


def _check_data(key: str, spec: str | None) -> None:
    """Cheap existence check so a release fails in a second, not after training."""
    if spec is None or spec in (DIGITS, "random"):
        return
    if not Path(spec).exists():
        raise UsageError(f'{key}: data source {spec} does not exist (nor is it "digits").')


def _check_cross_references(config: ReleaseConfig) -> None:
    int8 = [i for i, t in enumerate(config.targets) if t.precision == "int8"]
    if int8 and config.calibration.data is None:
        raise UsageError(
            f"calibration.data: required by targets[{int8[0]}] (int8 needs calibration data: "
            '"digits", PATH.npz or an image folder).'
        )
    _check_data("calibration.data", config.calibration.data)
    _check_data("eval.data", config.eval.data)
    _check_data("bench.data", config.bench.data)
    if config.train is not None:
        _check_data("train.data", config.train.data)
    _check_output_names(config)
