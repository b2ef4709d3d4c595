"""trtconv's served model with its tensors crossing by the Python backend's own NumPy
conversion (`Tensor.as_numpy()`, `pb_utils.Tensor(name, array)`), as `serve` moved them before
DLPack: under NumPy 2 the stub's pybind11 gives inputs whose every element equals the first and
sends 0-byte outputs. A test serves through one (`model_py(CLASS)` in place of serve's own
model.py) to show the start check catches that. Imported by Triton's backend stub, where
`tests` is importable (serve puts the repository on its PYTHONPATH)."""

from __future__ import annotations

from trtconv.serving.server.tensor_crossing import numpy_input, numpy_output
from trtconv.serving.server.triton_model import TritonPythonModel


def model_py(name: str) -> str:
    """A repository's model.py serving through class `name` of this module."""
    return f"""from pathlib import Path

from tests.helpers.as_numpy_model import {name} as Model


class TritonPythonModel(Model):
    settings_file = str(Path(__file__).with_name("settings.json"))
"""


class AsNumpyModel(TritonPythonModel):
    """serve's model, its inputs read by `as_numpy()` and its outputs made by `pb_utils.Tensor`."""

    def initialize(self, args: dict[str, str]) -> None:
        super().initialize(args)
        self.readers = dict.fromkeys(self.readers, numpy_input)
        self.makers = dict.fromkeys(self.makers, numpy_output)


class AsNumpyInputs(TritonPythonModel):
    """serve's model, its inputs read by `as_numpy()` (its outputs by DLPack): the corruption
    that is silent, each answer well formed and wrong."""

    def initialize(self, args: dict[str, str]) -> None:
        super().initialize(args)
        self.readers = dict.fromkeys(self.readers, numpy_input)
