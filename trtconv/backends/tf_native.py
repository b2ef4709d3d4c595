"""Native TensorFlow: run a SavedModel's serving signature as it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from trtconv.backends.base import Feeds, Runner
from trtconv.lazy import require
from trtconv.model_io import ModelSignature
from trtconv.savedmodel import LoadedSavedModel, load_saved_model


class SavedModelRunner(Runner):
    """Runs `serving_default` eagerly-called (a concrete graph function), optionally under XLA."""

    backend: ClassVar[str] = "tf"

    def __init__(self, path: Path, xla: bool = False) -> None:
        super().__init__(path)
        self.xla = xla
        self._model: LoadedSavedModel | None = None
        self._call: Any = None

    def activate_impl(self) -> ModelSignature:
        tf = require("tensorflow")
        self._model = load_saved_model(self.path)
        function = self._model.function
        if self.xla:
            self._call = tf.function(lambda **feeds: function(**feeds), jit_compile=True)
        else:
            self._call = function
        return self._model.signature

    def infer_impl(self, feeds: Feeds) -> dict[str, np.ndarray]:
        outputs = self._call(**feeds)
        # .numpy() copies device results to host: this is also the synchronisation point.
        return {name: tensor.numpy() for name, tensor in outputs.items()}
