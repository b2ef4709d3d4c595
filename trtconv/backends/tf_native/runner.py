"""Native TensorFlow: run a SavedModel's serving signature as it is (optionally under XLA)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtconv.backends import registry
from trtconv.core.lazy import require
from trtconv.core.model_io import Feeds, ModelSignature, Outputs
from trtconv.core.tf32 import tf32_policy
from trtconv.model.savedmodel import SERVING_KEY, LoadedSavedModel, load_saved_model
from trtconv.protocol.runner import Runner, RunOptions

if TYPE_CHECKING:
    from trtconv.artifact.manifest import Manifest

log = logging.getLogger(__name__)


class SavedModelRunner(Runner):
    """Runs one signature (a concrete graph function; `serving_default` unless `signature`
    names another), optionally compiled with XLA.

    `tf32=False` (the default, what a reference needs): float32 matmuls and convolutions run in
    full float32 on an Ampere-or-newer GPU, where TensorFlow would otherwise use TF32. The switch
    is set around each call and restored after it (it is process-wide).
    """

    def __init__(
        self,
        path: Path,
        xla: bool = False,
        threads: int | None = None,
        tf32: bool = False,
        signature: str = SERVING_KEY,
    ) -> None:
        super().__init__(path)
        self.signature_key = signature
        self.xla = xla
        self.threads = threads
        self.tf32 = tf32
        self._model: LoadedSavedModel | None = None
        self._call: Any = None
        self._tensor: Any = None  # tf.convert_to_tensor
        self._on_gpu = False

    def activate_impl(self) -> ModelSignature:
        tf = require("tensorflow")
        if self.threads is not None:
            set_threads(tf, self.threads)
        self._model = load_saved_model(self.path, self.signature_key)
        self._tensor = tf.convert_to_tensor
        self._on_gpu = (
            registry.facts_here().has_gpu
        )  # TF32 exists only there: no switching on a CPU
        self.device = "cuda" if self._on_gpu else "cpu"
        function = self._model.function
        if self.xla:
            self._call = tf.function(lambda **feeds: function(**feeds), jit_compile=True)
        else:
            self._call = function
        return self._model.signature

    def deactivate_impl(self) -> None:
        self._model, self._call = None, None

    def infer_impl(self, feeds: Feeds) -> Outputs:
        if not self._on_gpu:
            return self._run(feeds)
        with tf32_policy(self.tf32):
            return self._run(feeds)

    def _run(self, feeds: Feeds) -> Outputs:
        # Tensors, not arrays: a v1 graph's function (a SavedModel loaded as its signature
        # graphs) takes nothing else; a revived one converts arrays itself just the same.
        outputs = self._call(**{name: self._tensor(value) for name, value in feeds.items()})
        # .numpy() copies device results to host: this is also the synchronisation point.
        return {name: tensor.numpy() for name, tensor in outputs.items()}


def set_threads(tf: Any, threads: int) -> None:
    """TensorFlow's intra- and inter-op pools: process-wide, fixed once TensorFlow has run."""
    config = tf.config.threading
    if config.get_intra_op_parallelism_threads() == threads:
        return
    try:
        config.set_intra_op_parallelism_threads(threads)
        config.set_inter_op_parallelism_threads(threads)
    except RuntimeError as exc:  # TensorFlow's runtime already started in this process
        log.warning("TensorFlow threads stay as they are (%s)", exc)


def signature_key(manifest: Manifest | None, options: RunOptions) -> str:
    """The signature a SavedModel runner runs: the options', else the one the artifact was
    converted from (its manifest), else serving_default."""
    recorded = manifest.model_signature.name if manifest is not None else None
    return options.signature or recorded or SERVING_KEY


def saved_model_runner(payload: Path, manifest: Manifest | None, options: RunOptions) -> Runner:
    """The runner factory: a SavedModel (or a tf-native artifact's payload) as it is."""
    return SavedModelRunner(
        payload,
        xla=options.xla,
        threads=options.threads,
        signature=signature_key(manifest, options),
    )
