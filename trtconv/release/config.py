"""The release config: a TOML file read strictly into typed, frozen settings.

Every mistake is a UsageError (exit 2) whose message starts with the key path, e.g.
`bench.batch_sizes[1]: expected a positive integer, found "8"`. Unknown keys are errors too: a
typo in a gate must never silently turn the gate off.

Relative paths in the config are resolved against the current working directory, like every
other trtconv argument (pipelines run from their repository root).
"""

from __future__ import annotations

import difflib
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trtconv.backends.registry import BEST
from trtconv.core.errors import UsageError
from trtconv.core.precision import PRECISIONS
from trtconv.options import (
    CALIB_METHODS,
    DEFAULT_CALIB_METHOD,
    DEFAULT_FALLBACK_TIME_LIMIT_S,
    INT8_TARGETS,
)

AMP_DTYPES = ("auto", "float16", "bfloat16")
DIGITS = "digits"
DEFAULT_BATCH_SIZES = (1, 8)

Validator = Callable[[str, Any], Any]


# --- value validators: each takes (key path, raw value) and returns the clean value ------------


def _found(value: Any) -> str:
    """How a wrong value is quoted back: TOML-like (strings in double quotes, true/false)."""
    return json.dumps(value, default=str)


def _fail(path: str, expected: str, value: Any) -> UsageError:
    return UsageError(f"{path}: expected {expected}, found {_found(value)}.")


def _is_number(value: Any) -> bool:
    # bool is an int subclass in Python; in TOML `true` is never a number.
    return isinstance(value, int | float) and not isinstance(value, bool)


def positive_int(path: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _fail(path, "a positive integer", value)
    return value


def non_negative_int(path: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _fail(path, "a non-negative integer", value)
    return value


def number(path: str, value: Any) -> float:
    if not _is_number(value):
        raise _fail(path, "a number", value)
    return float(value)


def positive_number(path: str, value: Any) -> float:
    if not _is_number(value) or value <= 0:
        raise _fail(path, "a positive number", value)
    return float(value)


def fraction(path: str, value: Any) -> float:
    if not _is_number(value) or not 0 <= value <= 1:
        raise _fail(path, "a number between 0 and 1", value)
    return float(value)


def boolean(path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, "true or false", value)
    return value


def string(path: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(path, "a non-empty string", value)
    return value


def choice(*options: str) -> Validator:
    def check(path: str, value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise _fail(path, "one of " + ", ".join(f'"{o}"' for o in options), value)
        return value

    return check


def list_of(item: Validator) -> Validator:
    def check(path: str, value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list) or not value:
            raise _fail(path, "a non-empty array", value)
        return tuple(item(f"{path}[{index}]", element) for index, element in enumerate(value))

    return check


def table_of(value: Validator) -> Validator:
    """An inline table keyed by the user's names (output names), each value checked."""

    def check(path: str, raw: Any) -> dict[str, Any]:
        if not isinstance(raw, dict):
            raise _fail(path, "a table of output names", raw)
        return {str(key): value(f"{path}.{key}", item) for key, item in raw.items()}

    return check


def role(path: str, value: Any) -> str:
    """An output role: classes, binary (or binary:THRESHOLD), regression or tensor."""
    from trtconv.outputs.roles import parse_role

    text = string(path, value)
    parse_role(text, path, "release config")
    return text


def numbers(path: str, value: Any) -> tuple[float, ...]:
    """One number, or an array of numbers (one per channel)."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(_is_number(item) for item in items):
        raise _fail(path, "a number or an array of numbers", value)
    return tuple(float(item) for item in items)


def _table(path: str, raw: Any, fields: Mapping[str, Validator]) -> dict[str, Any]:
    """Check a TOML table: it is a table, has no unknown keys, and each value passes."""
    if not isinstance(raw, dict):
        raise _fail(path, "a table", raw)
    for key in raw:
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f'did you mean "{close[0]}"? ' if close else ""
            known = ", ".join(fields)
            raise UsageError(f"{path}.{key}: unknown key ({hint}known keys: {known}).")
    return {key: fields[key](f"{path}.{key}", value) for key, value in raw.items()}


# --- the settings --------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSettings:
    """Exactly one of `path` (a SavedModel) and `zoo` (a model to train first)."""

    path: Path | None = None
    zoo: str | None = None


@dataclass(frozen=True)
class TrainSettings:
    """`trtconv train` options for a zoo model; None means the model's default."""

    data: str | None = None
    epochs: int | None = None
    batch_size: int | None = None
    amp: bool = True
    amp_dtype: str = "auto"
    xla: bool = False
    seed: int = 0


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
    and the int8 precision ladder (`--no-fallback`, `--fallback-time-limit`)."""

    data: str | None = None
    method: str = DEFAULT_CALIB_METHOD
    samples: int | None = None
    int8_target: str = "auto"
    fallback: bool = True
    fallback_time_limit_s: float = DEFAULT_FALLBACK_TIME_LIMIT_S


@dataclass(frozen=True)
class EvalSettings:
    """Labelled evaluation data for accuracy and agreement; None: the convert validation.
    `split`: held-out (default) or all, for [eval] and the bench's evaluation alike."""

    data: str | None = None
    samples: int | None = None
    split: str | None = None


@dataclass(frozen=True)
class PreprocessingSettings:
    """How raw pixels become inputs, as convert/validate/bench --image-scale/-offset/-mean/-std;
    None: the model card's, else 1/255."""

    scale: float | None = None
    offset: float | None = None
    mean: tuple[float, ...] | None = None
    std: tuple[float, ...] | None = None

    def options(self) -> Any:
        """As trtconv.calib.contract.PreprocessingOptions."""
        from trtconv.calib.contract import PreprocessingOptions

        return PreprocessingOptions(self.scale, self.offset, self.mean, self.std)


@dataclass(frozen=True)
class OutputSettings:
    """How outputs are judged, for every target: roles, per-output tolerances, and whether an
    output nothing can judge may pass (as --output-role, --tolerance NAME=X, --allow-unjudged)."""

    roles: dict[str, str] = field(default_factory=dict)
    tolerances: dict[str, float] = field(default_factory=dict)
    allow_unjudged: bool = False

    def judging(self, target: Target | None = None) -> Any:
        """trtconv.outputs.roles.Judging, the target's roles and tolerances over these."""
        from trtconv.outputs.roles import Judging

        roles = {**self.roles, **(target.roles if target else {})}
        tolerances = {**self.tolerances, **(target.tolerances if target else {})}
        return Judging.build(roles, tolerances, self.allow_unjudged, source="release config")


@dataclass(frozen=True)
class BenchSettings:
    """How each model is timed; `iterations` and `duration_s` exclude each other."""

    batch_sizes: tuple[int, ...] = DEFAULT_BATCH_SIZES
    iterations: int | None = None
    duration_s: float | None = None
    warmup: int | None = None
    threads: int | None = None
    data: str | None = None


@dataclass(frozen=True)
class GateSettings:
    """Thresholds every target must meet; None: gate not applied."""

    max_accuracy_drop: float | None = None
    min_top1_agreement: float | None = None
    min_speedup: float | None = None
    max_latency_ms_p99: float | None = None
    gate_batch_size: int = DEFAULT_BATCH_SIZES[-1]


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


MODEL_FIELDS: dict[str, Validator] = {"path": string, "zoo": string}
TRAIN_FIELDS: dict[str, Validator] = {
    "data": string,
    "epochs": positive_int,
    "batch_size": positive_int,
    "amp": boolean,
    "amp_dtype": choice(*AMP_DTYPES),
    "xla": boolean,
    "seed": non_negative_int,
}


def backend_choice(path: str, value: Any) -> str:
    """A registered converter's name, or "auto" (the registry decides what is known)."""
    from trtconv.backends.registry import backend_choices

    return str(choice(*backend_choices())(path, value))


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
    "split": choice("held-out", "all"),
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
}
BENCH_FIELDS: dict[str, Validator] = {
    "batch_sizes": list_of(positive_int),
    "iterations": positive_int,
    "duration_s": positive_number,
    "warmup": non_negative_int,
    "threads": positive_int,
    "data": string,
}
GATE_FIELDS: dict[str, Validator] = {
    "max_accuracy_drop": fraction,
    "min_top1_agreement": fraction,
    "min_speedup": positive_number,
    "max_latency_ms_p99": positive_number,
    "gate_batch_size": positive_int,
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
            close = difflib.get_close_matches(key, TOP_LEVEL, n=1)
            hint = f'did you mean "{close[0]}"? ' if close else ""
            raise UsageError(f"{key}: unknown key ({hint}known keys: {', '.join(TOP_LEVEL)}).")
    model = _model(raw)
    train = _train(raw, model)
    targets = _targets(raw)
    calibration = CalibrationSettings(
        **_table("calibration", raw.get("calibration", {}), CALIBRATION_FIELDS)
    )
    evaluation = EvalSettings(**_table("eval", raw.get("eval", {}), EVAL_FIELDS))
    bench = _bench(raw)
    gates = _gates(raw, bench)
    preprocessing = _preprocessing(raw)
    outputs = OutputSettings(**_table("outputs", raw.get("outputs", {}), OUTPUT_FIELDS))
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
    values = _table("model", raw["model"], MODEL_FIELDS)
    if ("path" in values) == ("zoo" in values):
        raise UsageError(
            "model: give exactly one of model.path (a SavedModel) and model.zoo (a model to train)."
        )
    if "zoo" in values:
        from trtconv.zoo.registry import MODELS

        if values["zoo"] not in MODELS:
            raise _fail("model.zoo", "one of " + ", ".join(f'"{m}"' for m in MODELS), values["zoo"])
        return ModelSettings(zoo=values["zoo"])
    model_path = Path(values["path"])
    if not (model_path / "saved_model.pb").is_file():
        what = "does not exist" if not model_path.exists() else "holds no saved_model.pb"
        raise UsageError(f"model.path: SavedModel {model_path} {what}.")
    return ModelSettings(path=model_path)


def _train(raw: dict[str, Any], model: ModelSettings) -> TrainSettings | None:
    if "train" not in raw:
        return TrainSettings() if model.zoo else None
    if model.zoo is None:
        raise UsageError("train: only allowed with model.zoo (model.path is already trained).")
    return TrainSettings(**_table("train", raw["train"], TRAIN_FIELDS))


def _targets(raw: dict[str, Any]) -> tuple[Target, ...]:
    entries = raw.get("targets")
    if entries is None:
        raise UsageError(
            "targets: missing; add at least one [[targets]] with backend and precision."
        )
    if not isinstance(entries, list) or not entries:
        raise _fail("targets", "an array of tables ([[targets]])", entries)
    targets: list[Target] = []
    for index, entry in enumerate(entries):
        where = f"targets[{index}]"
        values = _table(where, entry, TARGET_FIELDS)
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
    values = _table("bench", raw.get("bench", {}), BENCH_FIELDS)
    if "iterations" in values and "duration_s" in values:
        raise UsageError("bench: give iterations or duration_s, not both.")
    if "batch_sizes" in values:
        sizes = values["batch_sizes"]
        for index, size in enumerate(sizes):
            if size in sizes[:index]:
                raise UsageError(f"bench.batch_sizes[{index}]: {size} is listed twice.")
    return BenchSettings(**values)


def _gates(raw: dict[str, Any], bench: BenchSettings) -> GateSettings:
    values = _table("gates", raw.get("gates", {}), GATE_FIELDS)
    values.setdefault("gate_batch_size", max(bench.batch_sizes))
    if values["gate_batch_size"] not in bench.batch_sizes:
        sizes = ", ".join(map(str, bench.batch_sizes))
        raise UsageError(
            f"gates.gate_batch_size: {values['gate_batch_size']} is not one of "
            f"bench.batch_sizes ({sizes})."
        )
    return GateSettings(**values)


def _preprocessing(raw: dict[str, Any]) -> PreprocessingSettings:
    values = _table("preprocessing", raw.get("preprocessing", {}), PREPROCESSING_FIELDS)
    mean, std = values.get("mean"), values.get("std")
    if mean is not None and std is not None and len(mean) != len(std):
        raise UsageError(
            f"preprocessing.std: {len(std)} values for the {len(mean)} of preprocessing.mean."
        )
    return PreprocessingSettings(**values)


def _check_output_names(config: ReleaseConfig) -> None:
    """Roles and tolerances must name outputs the model has (read without TensorFlow; a zoo
    model's output is known)."""
    from trtconv.bench.signature import read_signature
    from trtconv.train.export import OUTPUT_NAME

    named = [("outputs", config.outputs.roles, config.outputs.tolerances)]
    named += [(f"targets[{i}]", t.roles, t.tolerances) for i, t in enumerate(config.targets)]
    if not any(roles or tolerances for _, roles, tolerances in named):
        return
    path = config.model.path
    outputs = read_signature(path).output_names if path is not None else [OUTPUT_NAME]
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
