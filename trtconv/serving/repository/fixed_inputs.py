"""Inputs an artifact was converted with set to one value (`--input-value`, a TF1 training
flag): the server sets them, so clients send only the others. Their values are the ones the
manifest's data contract records, the same that validate and bench apply."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Protocol

import numpy as np

from trtconv.artifact.manifest import Manifest, read_manifest
from trtconv.calib.fitting import set_values
from trtconv.core.model_io import Feeds, InputValue, ModelSignature, Outputs
from trtconv.model.paths import ARTIFACT, model_kind


class ServedModel(Protocol):
    """What the server runs: a signature and an inference call."""

    @property
    def signature(self) -> ModelSignature: ...

    def infer(self, feeds: Feeds) -> Outputs: ...


def recorded_input_values(model: Path) -> dict[str, InputValue]:
    """The inputs `model` (an artifact) was converted with set to one value; {} for a
    SavedModel or an artifact without them."""
    return input_values_of(read_manifest(model) if model_kind(model) == ARTIFACT else None)


def input_values_of(manifest: Manifest | None) -> dict[str, InputValue]:
    """The inputs an artifact (its `manifest`; None: a SavedModel) was converted with set to one
    value; {} without them."""
    contract = manifest.data_contract if manifest is not None else None
    return dict(contract.preprocessing.input_values) if contract is not None else {}


class WithInputValues:
    """`model` with the inputs `values` names set by the server: its signature leaves them out
    (Triton declares only what clients send), and each call adds them, one value per sample."""

    def __init__(self, model: ServedModel, values: dict[str, InputValue]) -> None:
        self.model = model
        whole = model.signature
        kept = tuple(spec for spec in whole.inputs if spec.name not in values)
        self.signature = replace(whole, inputs=kept)
        # One sample of each, checked and said once; a call repeats it for its samples.
        self.one = set_values(values, whole, 1, "trtconv serve")

    def infer(self, feeds: Feeds) -> Outputs:
        rows = len(next(iter(feeds.values()))) if feeds else 1
        fixed = {name: np.repeat(one, rows, axis=0) for name, one in self.one.items()}
        return self.model.infer({**feeds, **fixed})


def served(model: ServedModel, values: dict[str, InputValue]) -> ServedModel:
    """`model` as served: with the input `values` its artifact recorded set, if any."""
    return WithInputValues(model, values) if values else model
