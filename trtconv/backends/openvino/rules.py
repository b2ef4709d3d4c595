"""When OpenVINO can run a precision here: fp32 on any CPU, int8 with NNCF installed, bf16 and fp16
only where the CPU computes them natively (OpenVINO's CPU plugin would otherwise emulate them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from trtconv.core.lazy import require
from trtconv.core.precision import Precision
from trtconv.core.results import optional_key
from trtconv.facts import Facts
from trtconv.protocol.doctor_section import DoctorSection, LibraryRow
from trtconv.protocol.support import Support, verdict

NAME = "openvino"
INSTALL_FIX = "pip install 'trtconv[openvino]' (openvino and nncf)"
# CPU features that give OpenVINO's CPU plugin native arithmetic in a reduced float precision.
NATIVE_BF16 = ("avx512_bf16", "amx_bf16")
NATIVE_FEATURES = {"bf16": NATIVE_BF16, "fp16": ("avx512_fp16", "amx_fp16")}


def support(facts: Facts, precision: str) -> Support:
    """Whether OpenVINO converts and runs `precision` on the machine `facts` describe."""
    version = facts.version("openvino")
    if version is None:
        return verdict(NAME, precision, "openvino is not installed", INSTALL_FIX)
    if precision == Precision.INT8 and facts.version("nncf") is None:
        return verdict(NAME, precision, "int8 needs NNCF, which is not installed", INSTALL_FIX)
    needs = NATIVE_FEATURES.get(precision)
    if needs and not facts.cpu.features & set(needs):
        return verdict(
            NAME,
            precision,
            f"{precision} needs a CPU with {' or '.join(needs)}; {facts.cpu.model} has neither",
            f"choose --precision fp32 or int8, or run on a CPU with {' or '.join(needs)}",
        )
    how = " (NNCF post-training quantisation)" if precision == Precision.INT8 else ""
    return verdict(NAME, precision, f"OpenVINO {version}{how} on the CPU")


# The inference precision every CPU computes alike: an int8 IR's float parts meant to be portable.
PORTABLE_FLOAT_PARTS = "f32"


def int8_float_parts(int8_target: str, features: frozenset[str] | set[str]) -> str:
    """OpenVINO's inference precision for an int8 IR's float parts (softmax, layer norms, the
    operations kept in float): bf16 when the artifact is meant for this CPU (`--int8-target
    auto`) and this CPU (of `features`) computes bf16 natively, as OpenVINO's own default does
    there; f32 otherwise, which every CPU computes alike. The artifact is validated and pinned
    at it."""
    native = set(NATIVE_BF16) & set(features)
    return "bf16" if int8_target == "auto" and native else PORTABLE_FLOAT_PARTS


@dataclass(frozen=True)
class OpenVinoDevice:
    """A device OpenVINO sees, what it computes natively (OPTIMIZATION_CAPABILITIES) and the
    inference precision it would pick by default (INFERENCE_PRECISION_HINT: bf16 on a CPU with
    AVX512-BF16 or AMX), which trtconv overrides with the artifact's recorded one."""

    name: str
    full_name: str
    capabilities: list[str]
    default_inference_precision: str | None = optional_key()

    def describe(self) -> str:
        default = self.default_inference_precision
        picks = f"; picks {default} unasked, trtconv pins each artifact's" if default else ""
        return f"{self.name}: {self.full_name} ({', '.join(self.capabilities)}{picks})"


@dataclass(frozen=True)
class OpenVinoSection(DoctorSection):
    """The doctor's `openvino` block: versions, the devices OpenVINO sees with what each computes
    natively (asked of OpenVINO itself), and its row of doctor's libraries table."""

    KEY: ClassVar[str] = NAME
    version: str | None
    nncf_version: str | None
    devices: list[OpenVinoDevice]
    notes: str
    row: LibraryRow

    def library_rows(self) -> list[LibraryRow]:
        return [self.row]


def doctor_section(facts: Facts) -> OpenVinoSection:
    """The doctor's `openvino` section for the machine `facts` describe."""
    version, nncf = facts.version("openvino"), facts.version("nncf")
    devices, notes = probe_devices() if version else ([], "not installed: " + INSTALL_FIX)
    described = "; ".join(device.describe() for device in devices)
    details = f"devices: {described or 'none'}; NNCF {nncf}" + (f"; {notes}" if notes else "")
    row = LibraryRow(component="OpenVINO", version=version, details=details)
    return OpenVinoSection(version, nncf, devices, notes, row)


def probe_devices() -> tuple[list[OpenVinoDevice], str]:
    """(every device OpenVINO sees, a note on failure)."""

    try:
        core = require("openvino").Core()
        return [
            OpenVinoDevice(
                name,
                str(core.get_property(name, "FULL_DEVICE_NAME")),
                list(core.get_property(name, "OPTIMIZATION_CAPABILITIES")),
                _default_precision(core, name),
            )
            for name in core.available_devices
        ], ""
    except Exception as exc:  # a broken install is a row in the report, not a crash
        return [], f"OpenVINO could not list its devices: {str(exc).splitlines()[0][:200]}"


def _default_precision(core: Any, device: str) -> str | None:
    """The inference precision `device` picks when nothing is asked (None: it has no such
    property)."""
    try:
        value = core.get_property(device, "INFERENCE_PRECISION_HINT")
    except Exception:  # a device without the property
        return None
    to_string = getattr(value, "to_string", None)
    return str(to_string() if callable(to_string) else value)
