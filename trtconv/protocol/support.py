"""Whether a backend can run a precision on a machine: the verdict type and the rules backends
share (GPU compute capability, the ONNX export's libraries). Each backend's own rules live in its
package (`rules.py`); they read `trtconv.facts.Facts` and never probe."""

from __future__ import annotations

from dataclasses import dataclass

from trtconv.core.errors import MissingDependencyError
from trtconv.core.precision import Precision
from trtconv.facts import Facts
from trtconv.facts.hardware import MIN_COMPUTE_CAPABILITY

NO_GPU = "no NVIDIA GPU is visible (nvidia-smi lists none)"
GPU_FIX = "run on a machine with an NVIDIA GPU and driver (nvidia-smi must list it)"
AMPERE_FIX = (
    "run on an Ampere-or-newer GPU (compute capability >= 8.0: A100, A10, L4, H100, RTX 30xx+) "
    "or choose --precision fp32 or fp16"
)
EXPORT_FIX = "pip install onnx==1.18.0 tf2onnx==1.17.0"


@dataclass(frozen=True)
class Support:
    """Whether one backend can convert and run one precision on a machine; why; the fix if not.

    `runs_here` is False for an artifact that converts here for another machine's device and is
    validated here by emulation (ort fp16 without a GPU provider): `--backend auto` and `best`
    pass it over, an explicit `--backend` converts it.
    """

    backend: str
    precision: str
    ok: bool
    reason: str
    fix: str = ""
    runs_here: bool = True

    def require(self) -> None:
        """Raise MissingDependencyError (exit 3) naming the reason and the fix unless ok."""
        if not self.ok:
            raise MissingDependencyError(
                f"--backend {self.backend} --precision {self.precision} cannot run on this "
                f"machine: {self.reason}; fix: {self.fix}."
            )


def verdict(
    backend: str, precision: str, reason: str, fix: str = "", runs_here: bool = True
) -> Support:
    """A Support from a rule's (reason, fix): refused exactly when there is a fix to give."""
    return Support(
        backend=backend,
        precision=precision,
        ok=not fix,
        reason=reason,
        fix=fix,
        runs_here=runs_here,
    )


def gpu_too_old(precision: str, facts: Facts) -> tuple[str, str] | None:
    """(reason, fix) when the best GPU's compute capability is too low for `precision`."""
    gpu = facts.best_gpu
    need = MIN_COMPUTE_CAPABILITY[precision]
    if gpu is None or gpu.supports(precision) or need is None:
        return None
    fix = (
        AMPERE_FIX
        if precision == Precision.TF32
        else "run on a newer GPU or choose --precision fp32"
    )
    return (
        f"{precision} needs a GPU of compute capability >= {need[0]}.{need[1]}, "
        f"found {gpu.name} ({gpu.capability})",
        fix,
    )


def gpu_text(facts: Facts) -> str:
    """'NAME (compute capability X.Y)' of the best GPU, or 'no GPU'."""
    gpu = facts.best_gpu
    return f"{gpu.name} (compute capability {gpu.capability})" if gpu else "no GPU"


def onnx_export_missing(facts: Facts) -> bool:
    """True when the ONNX export's libraries (onnx, tf2onnx) are not installed."""
    return facts.version("onnx") is None or facts.version("tf2onnx") is None
