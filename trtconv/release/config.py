"""The release config: a TOML file read strictly into typed, frozen settings.

Every mistake is a UsageError (exit 2) whose message starts with the key path, e.g.
`bench.batch_sizes[1]: expected a positive integer, found "8"` (the checks are in values.py).
Unknown keys are errors too: a typo in a gate must never silently turn the gate off.

The settings (trtconv.release.settings) echo the TOML (release.json's `config`, and the steps'
resume keys); each command's options object (trtconv.options) is built from them by
trtconv.release.command_options, so a default left out of the TOML is the command's own.

Parsing reads no file but the TOML itself; what the config names on disk (the model, the data,
the outputs roles name) is checked next, by trtconv.release.preflight. Relative paths in the
config are resolved against the current working directory, like every other trtconv argument
(pipelines run from their repository root).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from trtconv.backends.registry import BEST
from trtconv.core.errors import UsageError
from trtconv.core.precision import PRECISIONS, Precision
from trtconv.options.convert import CALIB_METHODS, INT8_TARGETS
from trtconv.options.shared import SPLITS
from trtconv.release.preflight import preflight
from trtconv.release.settings import (
    BenchSettings,
    CalibrationSettings,
    DeploySettings,
    EvalSettings,
    GateSettings,
    ModelSettings,
    OutputSettings,
    PreprocessingSettings,
    ReleaseConfig,
    ServingSettings,
    Target,
    TrainSettings,
)
from trtconv.release.values import (
    Validator,
    backend_choice,
    boolean,
    choice,
    fail,
    flag_or_number,
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
    share,
    string,
    table,
    table_of,
    unknown_key,
)
from trtconv.train.amp import AMP_DTYPES
from trtconv.zoo.registry import MODELS

T = TypeVar("T")


def a_path(path: str, value: Any) -> Path:
    """A path, given as a non-empty string."""
    return Path(string(path, value))


MODEL_FIELDS: dict[str, Validator] = {
    "path": a_path,
    "zoo": string,
    "signature": string,
    "custom_objects": list_of(string),  # MODULE:NAME, as convert --custom-objects
}
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
    "rtol": non_negative_number,
    "roles": table_of(role),
    "tolerances": table_of(positive_number),
    "rtols": table_of(non_negative_number),
    "min_within": table_of(share),
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
    "input_values": table_of(flag_or_number),
}
OUTPUT_FIELDS: dict[str, Validator] = {
    "roles": table_of(role),
    "tolerances": table_of(positive_number),
    "rtols": table_of(non_negative_number),
    "min_within": table_of(share),
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
    "min_qps_at_budget": positive_number,
}
SERVING_FIELDS: dict[str, Validator] = {
    "latency_budget_ms": positive_number,
    "duration_s": positive_number,
    "search_runs": positive_int,
}
DEPLOY_FIELDS: dict[str, Validator] = {"triton": boolean}
TOP_LEVEL = (
    "model",
    "train",
    "targets",
    "calibration",
    "eval",
    "bench",
    "gates",
    "preprocessing",
    "outputs",
    "serving",
    "deploy",
)


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
    """Read and check a release config, then what it names on disk (trtconv.release.preflight).
    Raises UsageError naming the key path of any mistake."""
    path = Path(path)
    config = parse_config(_read_toml(path), path)
    preflight(config)
    return config


def parse_config(raw: dict[str, Any], source: Path) -> ReleaseConfig:
    """Check an already-parsed TOML document (see `load_config`), reading no file."""
    for key in raw:
        if key not in TOP_LEVEL:
            raise unknown_key("", key, TOP_LEVEL)
    model = _model(raw)
    train = _train(raw, model)
    targets = _targets(raw)
    calibration = _settings(raw, "calibration", CALIBRATION_FIELDS, CalibrationSettings)
    evaluation = _settings(raw, "eval", EVAL_FIELDS, EvalSettings)
    bench = _bench(raw)
    gates = _gates(raw, bench)
    preprocessing = _preprocessing(raw)
    outputs = _settings(raw, "outputs", OUTPUT_FIELDS, OutputSettings)
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
        serving=_settings(raw, "serving", SERVING_FIELDS, ServingSettings),
        deploy=_settings(raw, "deploy", DEPLOY_FIELDS, DeploySettings),
    )
    _check_cross_references(config)
    if gates.min_qps_at_budget is not None and config.serving.latency_budget_ms is None:
        raise UsageError(
            "gates.min_qps_at_budget: needs [serving] latency_budget_ms (the p99 budget the "
            "queries/s are measured at)."
        )
    return config


def _settings(
    raw: Mapping[str, Any], name: str, fields: Mapping[str, Validator], kind: Callable[..., T]
) -> T:
    """The [name] table of `raw` (empty when absent), each value checked by `fields`, as the
    settings type `kind`."""
    return table(name, raw.get(name, {}), fields, kind)


def _model(raw: dict[str, Any]) -> ModelSettings:
    if "model" not in raw:
        raise UsageError(
            'model: missing; give [model] path = "SAVED_MODEL", or zoo = "NAME" and [train].'
        )
    model = _settings(raw, "model", MODEL_FIELDS, ModelSettings)
    if (model.path is None) == (model.zoo is None):
        raise UsageError(
            "model: give exactly one of model.path (a SavedModel) and model.zoo (a model to train)."
        )
    if model.zoo is not None:
        if model.zoo not in MODELS:
            raise fail("model.zoo", "one of " + ", ".join(f'"{m}"' for m in MODELS), model.zoo)
        if model.signature is not None:
            raise UsageError("model.signature: only with model.path (a zoo model serves one).")
    return model


def _train(raw: dict[str, Any], model: ModelSettings) -> TrainSettings | None:
    if "train" not in raw:
        return TrainSettings() if model.zoo else None
    if model.zoo is None:
        raise UsageError("train: only allowed with model.zoo (model.path is already trained).")
    return _settings(raw, "train", TRAIN_FIELDS, TrainSettings)


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
        target = table(where, entry, TARGET_FIELDS, partial(_target, where))
        for other_index, other in enumerate(targets):
            if other.id == target.id:
                raise UsageError(
                    f"{where}: duplicates targets[{other_index}] ({target.backend} "
                    f"{target.precision})."
                )
        targets.append(target)
    return tuple(targets)


def _target(where: str, **values: Any) -> Target:
    """A [[targets]] entry from its checked values: backend and precision are required (a
    `best` target may leave the precision out: it tries every one)."""
    for required in ("backend", "precision"):
        if required not in values and (required, values.get("backend")) != ("precision", BEST):
            raise UsageError(f"{where}.{required}: missing.")
    return Target(**{"precision": None, **values})


def _bench(raw: dict[str, Any]) -> BenchSettings:
    bench = _settings(raw, "bench", BENCH_FIELDS, BenchSettings)
    if bench.iterations is not None and bench.duration_s is not None:
        raise UsageError("bench: give iterations or duration_s, not both.")
    sizes = bench.batch_sizes
    for index, size in enumerate(sizes):
        if size in sizes[:index]:
            raise UsageError(f"bench.batch_sizes[{index}]: {size} is listed twice.")
    return bench


def _gates(raw: dict[str, Any], bench: BenchSettings) -> GateSettings:
    # gate_batch_size defaults to the largest batch size the bench times.
    largest = partial(GateSettings, gate_batch_size=max(bench.batch_sizes))
    gates = _settings(raw, "gates", GATE_FIELDS, largest)
    if gates.gate_batch_size not in bench.batch_sizes:
        sizes = ", ".join(map(str, bench.batch_sizes))
        raise UsageError(
            f"gates.gate_batch_size: {gates.gate_batch_size} is not one of "
            f"bench.batch_sizes ({sizes})."
        )
    return gates


def _preprocessing(raw: dict[str, Any]) -> PreprocessingSettings:
    settings = _settings(raw, "preprocessing", PREPROCESSING_FIELDS, PreprocessingSettings)
    mean, std = settings.mean, settings.std
    if mean is not None and std is not None and len(mean) != len(std):
        raise UsageError(
            f"preprocessing.std: {len(std)} values for the {len(mean)} of preprocessing.mean."
        )
    return settings


def _check_cross_references(config: ReleaseConfig) -> None:
    int8 = [i for i, t in enumerate(config.targets) if t.precision == Precision.INT8]
    if int8 and config.calibration.data is None:
        raise UsageError(
            f"calibration.data: required by targets[{int8[0]}] (int8 needs calibration data: "
            '"digits", PATH.npz or an image folder).'
        )
