"""What a serving command serves, read once: the artifact (or SavedModel) folder and its manifest.

`serve` used to open an artifact's manifest four times on the way in (its runner, the inputs it
sets, the batch cap, the summary's backend): now `ServedFrom.read` reads it once and the object
is handed down: what one reading decides, every step after it uses, and none reads it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trtconv.artifact.manifest import Manifest, read_manifest
from trtconv.backends.registry import native, open_runner
from trtconv.core.model_io import InputValue
from trtconv.model.paths import ARTIFACT, model_kind, saved_model_in
from trtconv.protocol.runner import Runner, RunOptions
from trtconv.serving.repository.fixed_inputs import input_values_of


@dataclass(frozen=True)
class ServedFrom:
    """The folder served (an artifact, or a SavedModel run natively) and the artifact's
    manifest (None for a SavedModel)."""

    path: Path
    manifest: Manifest | None

    @classmethod
    def read(cls, model: Path) -> ServedFrom:
        """`model` (an artifact, a SavedModel or a train output holding one) with its manifest.
        Raises UsageError when it does not exist and InputError when it is neither or its
        manifest is bad."""
        path = saved_model_in(Path(model))
        manifest = read_manifest(path) if model_kind(path) == ARTIFACT else None
        return cls(path, manifest)

    @property
    def kind(self) -> tuple[str, str]:
        """(backend, precision) of what is served (a SavedModel: the native runner, fp32)."""
        if self.manifest is None:
            return native().name, "fp32"
        return self.manifest.backend, self.manifest.precision

    @property
    def input_values(self) -> dict[str, InputValue]:
        """The inputs the artifact was converted with set to one value ({} for none)."""
        return input_values_of(self.manifest)

    def batch_cap(self) -> tuple[int | None, str]:
        """The largest batch the artifact was built for (its manifest's batch range), and the
        words that say so; (None, "") when it runs any batch."""
        found = self.manifest.batch_range if self.manifest is not None else None
        if not found:
            return None, ""
        return found[1], f" (the artifact's batch range is {found[0]}-{found[1]})"

    def open_runner(self, options: RunOptions) -> Runner:
        """Its runner (not yet activated), from the manifest already read."""
        return open_runner(self.path, options, self.manifest)


def served_kind(model: Path) -> tuple[str, str]:
    """(backend, precision) of `model` as served (see ServedFrom.kind)."""
    return ServedFrom.read(model).kind
