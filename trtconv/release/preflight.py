"""What a release config names on disk, checked before any work: the model (a SavedModel or a
Keras file, and its signature), the data sources, and the outputs its roles and tolerances name
(read without TensorFlow). The config itself is parsed without reading a file
(trtconv.release.config); these checks make a release fail in a second, not after training."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from trtconv.calib.sources import DIGITS
from trtconv.core.errors import UsageError
from trtconv.core.judging_options import parse_role
from trtconv.model.savedmodel import SERVING_KEY, is_keras_file
from trtconv.model.savedmodel_pb.signature import read_signature
from trtconv.release.settings import ModelSettings, OutputSettings, ReleaseConfig, Target
from trtconv.train.export import OUTPUT_NAME


def preflight(config: ReleaseConfig) -> None:
    """Check what `config` names on disk. Raises UsageError naming the key path of a mistake."""
    _check_model(config.model)
    _check_data("calibration.data", config.calibration.data)
    _check_data("eval.data", config.eval.data)
    _check_data("bench.data", config.bench.data)
    if config.train is not None:
        _check_data("train.data", config.train.data)
    _check_output_names(config)


def _check_model(model: ModelSettings) -> None:
    """model.path must be a SavedModel or a Keras file, holding model.signature when given."""
    if model.path is None:
        return  # a zoo model, trained by the release
    model_path, signature = model.path, model.signature
    keras = is_keras_file(model_path)  # exported to a SavedModel by each step, as convert does
    if not keras and not (model_path / "saved_model.pb").is_file():
        what = "does not exist" if not model_path.exists() else "holds no saved_model.pb"
        raise UsageError(
            f"model.path: SavedModel {model_path} {what} (a Keras file ends .keras, .h5 or .hdf5)."
        )
    if signature is not None and not keras:
        try:  # a missing signature fails here, in a second, not after a conversion
            read_signature(model_path, signature)
        except UsageError as exc:
            raise UsageError(f"model.signature: {exc}") from exc


def _check_output_names(config: ReleaseConfig) -> None:
    """Roles and tolerances must name outputs the model has (read without TensorFlow; a zoo
    model's output is known)."""
    labelled = config.outputs.labels_output
    named = [(f"targets[{i}]", t.roles, _named_keys(t)) for i, t in enumerate(config.targets)]
    named.insert(0, ("outputs", config.outputs.roles, _named_keys(config.outputs)))
    if not labelled and not any(roles or any(keys.values()) for _, roles, keys in named):
        return
    path = config.model.path
    if path is not None and is_keras_file(path):
        return  # read when convert exports it: its names are checked there, before any work
    signature = config.model.signature or SERVING_KEY
    outputs = read_signature(path, signature).output_names if path is not None else [OUTPUT_NAME]
    if labelled and labelled not in outputs:
        raise UsageError(
            f"outputs.labels_output: the model has no output '{labelled}' "
            f"(its outputs: {', '.join(outputs)})."
        )
    for where, roles, keys in named:
        for key, names in keys.items():
            unknown = sorted(set(names) - set(outputs))
            if unknown:
                raise UsageError(
                    f"{where}.{key}.{unknown[0]}: the model has no output '{unknown[0]}' "
                    f"(its outputs: {', '.join(outputs)})."
                )
        _check_gates(where, roles, outputs)


def _named_keys(settings: OutputSettings | Target) -> dict[str, Iterable[str]]:
    """The keys of a section that name outputs: {key: the names}."""
    return {
        "roles": settings.roles,
        "tolerances": settings.tolerances,
        "rtols": settings.rtols,
        "min_within": settings.min_within,
    }


def _check_gates(where: str, roles: dict[str, str], outputs: list[str]) -> None:
    """A role's `where=SCORE` must name an output the model has."""
    for name, text in roles.items():
        gate = parse_role(text, f"{where}.roles.{name}", "release config").where
        if gate is not None and gate not in outputs:
            raise UsageError(
                f"{where}.roles.{name}: where={gate}: the model has no output '{gate}' "
                f"(its outputs: {', '.join(outputs)})."
            )


def _check_data(key: str, spec: str | None) -> None:
    """Cheap existence check so a release fails in a second, not after training."""
    if spec is None or spec in (DIGITS, "random"):
        return
    if not Path(spec).exists():
        raise UsageError(f'{key}: data source {spec} does not exist (nor is it "digits").')
