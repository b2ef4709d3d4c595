"""The runner protocol (after Polygraphy's backend/base/runner.py).

A runner loads one model and runs it on dicts of numpy arrays keyed by input name. The public
methods own the protocol (state, input checks, timings); a backend fills in the `*_impl`:

    with open_runner(artifact) as runner:      # activate(): load, allocate
        outputs = runner.infer(feeds)            # check the feeds, then infer_impl()
    # deactivate(): free what activate() took

Runners are built by their backend's factory from (payload, manifest, options) and do no I/O
before `activate()`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from trtconv.core.errors import InputError, UsageError
from trtconv.core.model_io import (
    Feeds,
    ModelSignature,
    Outputs,
    collapse_scalars,
    dtype_fits,
    scalar_inputs,
)
from trtconv.options.shared import DEVICES

if TYPE_CHECKING:
    from trtconv.artifact.manifest import Manifest


@dataclass(frozen=True)
class CallTimings:
    """Where the last `infer` call spent its time on a device, in ms (trtexec's H2D/compute/D2H).

    Only runners that copy to and from a device report it; CPU runners leave it None.
    """

    host_to_device_ms: float
    compute_ms: float
    device_to_host_ms: float

    @property
    def transfer_ms(self) -> float:
        """Host-to-device plus device-to-host copies."""
        return self.host_to_device_ms + self.device_to_host_ms


@dataclass(frozen=True)
class RunOptions:
    """How to run a model, chosen at run time rather than at conversion."""

    threads: int | None = None  # intra-op threads; None: the library's default
    xla: bool = False  # native TensorFlow: compile the serving signature with XLA
    # Where an artifact runs: "auto" (what its conversion recorded), "cpu", "cuda" (ONNX
    # Runtime's CUDA provider) or "tensorrt" (TensorRT, or ONNX Runtime's TensorRT provider).
    device: str = "auto"
    # Backends with a throughput mode (`Backend.throughput_mode`) run in it: OpenVINO's
    # THROUGHPUT hint, each batch split across parallel streams.
    throughput: bool = False
    # SavedModels (native and TF-TRT): the signature to run; None: an artifact's recorded one,
    # else serving_default.
    signature: str | None = None
    # Whether idle intra-op threads spin waiting for the next call (ONNX Runtime's default:
    # lowest latency for calls back to back). Serving turns it off: between requests the
    # spinning threads took the cores Triton's own processes needed (measured on 2 cores: 8.9
    # ms of CPU per request in the serving process with spinning, 1.2 ms without).
    spin: bool = True


def check_device(backend: str, device: str, allowed: tuple[str, ...]) -> str:
    """`device` when `backend` runs there, "auto" resolved to allowed[0]. Raises UsageError."""
    if device not in DEVICES:
        raise UsageError(f"Unknown device '{device}'; choose one of {', '.join(DEVICES)}.")
    if device == "auto":
        return allowed[0]
    if device not in allowed:
        raise UsageError(
            f"A {backend} artifact cannot run on --device {device}; it runs on "
            f"{' or '.join(allowed)}."
        )
    return device


class Runner(ABC):
    """Loads one model (`activate`) and runs it on numpy feeds keyed by input name (`infer`)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._signature: ModelSignature | None = None
        # Set by runners that time device copies apart from compute, after each `infer`.
        self.last_timings: CallTimings | None = None
        # Where it runs ("cpu", "cuda", "tensorrt"), and what the user should know about that.
        self.device = "cpu"
        self.warnings: list[str] = []
        self._scalars: frozenset[str] = frozenset()

    @property
    def signature(self) -> ModelSignature:
        """The model's inputs and outputs (known after `activate`)."""
        if self._signature is None:
            raise RuntimeError(f"{type(self).__name__} for {self.path} used before activate().")
        return self._signature

    @property
    def is_active(self) -> bool:
        return self._signature is not None

    def __enter__(self) -> Runner:
        self.activate()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.deactivate()

    def activate(self) -> None:
        """Load the model (once); after this `signature` is known and `infer` may be called."""
        if self._signature is None:
            self._signature = self.activate_impl()
            self._scalars = scalar_inputs(self._signature)

    def deactivate(self) -> None:
        """Free what `activate` took (device memory, sessions); a no-op when not active."""
        if self._signature is None:
            return
        try:
            self.deactivate_impl()
        finally:
            self._signature = None
            self.last_timings = None

    def infer(self, feeds: Feeds, check_inputs: bool = True) -> Outputs:
        """Run one batch; returns outputs keyed by name.

        `check_inputs=False` skips the name/dtype/shape check, for callers that checked these
        very feeds once already (the bench's timed loop). A rank-0 input given one value per
        sample (as the data reader holds it) gets the one value. Raises InputError when the
        feeds do not fit and RuntimeError before `activate()`.
        """
        if self._signature is None:
            raise RuntimeError(f"{type(self).__name__} for {self.path} used before activate().")
        if self._scalars:
            feeds = collapse_scalars(feeds, self._scalars)
        if check_inputs:
            self.check_inputs(feeds)
        return self.infer_impl(feeds)

    def sync(self) -> None:  # noqa: B027 - a no-op by design for synchronous (CPU) backends
        """Block until the device has finished the last `infer` (no-op on CPU backends)."""

    def check_inputs(self, feeds: Feeds) -> None:
        """Raise InputError unless `feeds` has exactly the model's inputs, dtypes and ranks (a
        rank-0 input may come as one value per sample, as `infer` takes it)."""
        expected = {spec.name: spec for spec in self.signature.inputs}
        feeds = collapse_scalars(feeds, self._scalars)
        if set(feeds) != set(expected):
            raise InputError(
                f"{self.path}: inputs {sorted(feeds)} given, the model expects {sorted(expected)}."
            )
        for name, spec in expected.items():
            array = feeds[name]
            if not dtype_fits(array, spec.dtype):
                raise InputError(
                    f"{self.path}: input '{name}' expects dtype {spec.dtype}, found "
                    f"{array.dtype.name}."
                )
            fits = array.ndim == len(spec.shape) and all(
                want is None or want == got
                for want, got in zip(spec.shape, array.shape, strict=True)
            )
            if not fits:
                raise InputError(
                    f"{self.path}: input '{name}' expects shape {spec.describe()}, found "
                    f"{list(array.shape)}."
                )

    @abstractmethod
    def activate_impl(self) -> ModelSignature:
        """Load the model and return its signature."""

    def deactivate_impl(self) -> None:  # noqa: B027 - nothing to free unless a backend says so
        """Free what `activate_impl` took."""

    @abstractmethod
    def infer_impl(self, feeds: Feeds) -> Outputs:
        """Run one batch on checked feeds; return numpy outputs keyed by output name."""


# A backend's runner factory: (payload path, its artifact's manifest or None, run options).
RunnerFactory = Callable[[Path, "Manifest | None", RunOptions], Runner]
