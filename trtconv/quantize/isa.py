"""Which int8 kernels a CPU runs, and what that means for a U8S8 Q/DQ model.

ONNX Runtime's MLAS runs U8S8 int8 GEMMs and convolutions with VNNI (`vpdpbusd`: AVX512-VNNI or
AVX-VNNI) or AMX where the CPU has them: products accumulate in int32, exactly. Without VNNI (AVX2,
or AVX-512BW alone) it uses `vpmaddubsw`, which adds each pair of u8 x s8 products into a
*saturating int16*: 255 * 127 * 2 = 64,770 > 32,767, so a full-range int8 weight can saturate and
the model's accuracy collapses (a MobileNetV2 fell from 0.977 to 0.69 top-1 agreement on an AVX2
EPYC). With 7-bit weights (ONNX Runtime's `reduce_range`: int8 weights in [-64, 64]) the largest
pair is 255 * 64 * 2 = 32,640: it cannot saturate, on any x86 CPU.

So the weight range is chosen for where the artifact will run (`--int8-target`), the CPU class
that validated an artifact is recorded, and running a full-range artifact on a CPU of another
class is warned about.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from trtconv.artifact.manifest import QuantizationBlock
from trtconv.core.choices import Choice
from trtconv.facts import environment
from trtconv.facts.hardware import CpuBlock
from trtconv.options.convert import INT8_TARGETS

log = logging.getLogger(__name__)

X86_VNNI = "x86-vnni"
X86_NO_VNNI = "x86-no-vnni"
ARM64 = "arm64"
OTHER = "other"
CPU_CLASSES = (X86_VNNI, X86_NO_VNNI, ARM64, OTHER)

# Where the int8 artifact will run: this CPU's class, VNNI/AMX x86 CPUs only, or any x86 CPU.
AUTO, VNNI, PORTABLE = INT8_TARGETS

# The int8 instructions that accumulate u8 x s8 products in int32 (no int16 saturation).
VNNI_FEATURES = ("avx512_vnni", "avx_vnni", "amx_int8")
X86_ARCHES = ("x86_64", "amd64", "i386", "i686")
ARM_ARCHES = ("aarch64", "arm64")


class QdqScheme(Choice):
    """A Q/DQ int8 scheme: U8S8 (uint8 activations, int8 weights: ONNX Runtime's CPU kernels) or
    S8S8 (int8, symmetric activations: what TensorRT reads)."""

    U8S8 = "u8s8"
    S8S8 = "s8s8"


# The only scheme whose speed and accuracy depend on the CPU's int8 instructions.
CPU_SCHEME = QdqScheme.U8S8


def cpu_int8_class(cpu: CpuBlock) -> str:
    """The int8 class of a CPU described as `environment.cpu_info()` does.

    `cpu` has `features` ({name: bool}) and optionally `arch` (platform.machine()); a description
    without `arch` is taken as x86 when it lists x86 features.
    """
    features = cpu.features
    arch = (cpu.arch or "").lower()
    if arch in ARM_ARCHES:
        return ARM64
    if arch and arch not in X86_ARCHES:
        return OTHER
    if not arch and not features:
        return OTHER
    return X86_VNNI if any(features.get(name) for name in VNNI_FEATURES) else X86_NO_VNNI


@dataclass(frozen=True)
class WeightRange:
    """The int8 weight range chosen for a U8S8 model, and why."""

    reduce_range: bool
    target: str
    reason: str

    @property
    def description(self) -> str:
        return "7-bit (reduce_range)" if self.reduce_range else "full 8-bit"


def weight_range(target: str, here: str) -> WeightRange:
    """7-bit weights for a U8S8 model that may run on x86 without VNNI; full range otherwise.

    `target` is one of INT8_TARGETS; `here` the int8 class of this CPU. Raises ValueError for an
    unknown target (callers check user input first).
    """
    if target == PORTABLE:
        return WeightRange(True, target, "portable: exact on every x86 CPU, VNNI or not")
    if target == VNNI:
        return WeightRange(False, target, "for VNNI/AMX CPUs only: saturates on x86 without VNNI")
    if target != AUTO:
        raise ValueError(f"unknown int8 target '{target}'")
    if here == X86_NO_VNNI:
        return WeightRange(
            True, target, "this CPU has no VNNI: full-range weights would saturate in int16"
        )
    return WeightRange(False, target, f"this CPU is {here}: int32 accumulation, no saturation")


def this_cpu_int8_class() -> str:
    """The int8 class of the CPU this process runs on."""
    return cpu_int8_class(environment.cpu_info())


@dataclass(frozen=True)
class WeightChoice:
    """The weight range of a CPU-scheme int8 model converted here, as its `quantization` block
    records it (`int8_target`, `weight_range_reason`, `converted_on_cpu_class`)."""

    reduce_range: bool  # 7-bit weights
    int8_target: str
    weight_range_reason: str
    converted_on_cpu_class: str


def cpu_weight_range(target: str) -> WeightChoice:
    """The weight range of a CPU-scheme int8 model meant for `target` (options.INT8_TARGETS),
    converted on this CPU."""
    here = this_cpu_int8_class()
    choice = weight_range(target, here)
    log.info("int8 weights: %s (%s)", choice.description, choice.reason)
    return WeightChoice(choice.reduce_range, choice.target, choice.reason, here)


def int8_note(here: str) -> str:
    """What `doctor` says about int8 on a CPU of class `here`."""
    if here == X86_VNNI:
        return (
            "VNNI/AMX: U8S8 int8 runs exactly; artifacts converted with the default "
            "--int8-target auto use full-range weights and saturate on x86 CPUs without VNNI "
            "(use --int8-target portable for those)"
        )
    if here == X86_NO_VNNI:
        return (
            "no VNNI: U8S8 int8 accumulates pairs in saturating int16; trtconv quantises weights "
            "to 7 bits here, and full-range artifacts made on VNNI CPUs can lose accuracy"
        )
    return "int8 kernels of this CPU class are not characterised by trtconv (unverified)"


def portability_warning(
    quantization: QuantizationBlock | None,
    validated_on: str | None,
    here: str,
    what: str,
    measured_here: bool = False,
) -> str | None:
    """A warning when a U8S8 int8 artifact runs on a CPU class other than the one it was
    validated on, or None.

    `quantization` is the manifest's `quantization` block; `validated_on` the class
    recorded with its validation (None for artifacts made before trtconv recorded it);
    `measured_here` says the caller measures accuracy on this CPU (validate, bench --eval-data).
    """
    if quantization is None or quantization.scheme != CPU_SCHEME or validated_on == here:
        return None
    saturates = here == X86_NO_VNNI and not quantization.reduce_range
    if validated_on is None and not saturates:
        return None
    origin = f"validated on an {validated_on} CPU" if validated_on else "of unknown origin"
    if measured_here:
        advice = "this run measures its accuracy here"
    elif saturates:
        advice = "check it with `trtconv validate` here, or re-convert with --int8-target portable"
    else:
        advice = "`trtconv validate` (or bench --eval-data) measures it here"
    if saturates:
        return (
            f"{what}: int8 artifact {origin} with full-range weights runs here on an {here} CPU, "
            f"where its U8S8 kernels can saturate and accuracy can collapse; {advice}."
        )
    return (
        f"{what}: int8 artifact {origin} runs here on an {here} CPU, where its accuracy was not "
        f"measured; {advice}."
    )
