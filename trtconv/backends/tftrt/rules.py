"""When TF-TRT can run, from the machine's facts: TensorFlow's build, the TensorRT libraries it
loads (of the major it was built with), a GPU.

TensorFlow 2.17 was built against TensorRT 8.6.1, and `TrtGraphConverterV2` refuses any other
loaded major, or an older 8 ("Incompatible TensorRT major version":
`_check_trt_version_compatibility` in tensorflow/python/compiler/tensorrt/trt_convert.py). So
TF-TRT, its INT8 calibration included, needs TensorRT 8 (8.6.1+); TensorRT 10 and 11 serve
`--backend trt`. TensorFlow 2.18 removed TF-TRT: there the one reason is that, and the fix
names `--backend trt` (nothing else about the machine would change the answer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from trtconv.core.precision import Precision
from trtconv.facts import Facts, TfTrtReport, version_tuple
from trtconv.facts.tensorflow import TFTRT_LINKED_TENSORRT
from trtconv.protocol.doctor_section import DoctorSection, LibraryRow
from trtconv.protocol.support import NO_GPU, Support, gpu_text, gpu_too_old, verdict

NAME = "tftrt"
LAST_TENSORFLOW = (2, 17)
INSTEAD = (
    "--backend trt builds TensorRT 10/11 engines from the ONNX export instead; TF-TRT needs an "
    "environment of its own with TensorFlow 2.17's CUDA build (pip install 'trtconv[tftrt]' and "
    "the TensorRT 8.6 libraries, or an NGC TensorFlow container; docs/backends.md)"
)
TFTRT_FIX = (
    "use the TensorFlow 2.17 CUDA build (pip install 'trtconv[tftrt]') with the "
    "TensorRT 8.6 libraries (libnvinfer.so.8.6.1, libnvinfer_plugin.so.8.6.1; TF-TRT refuses "
    "TensorRT 10 and 11) on LD_LIBRARY_PATH on a machine with an NVIDIA GPU, or run in an NGC "
    "TensorFlow container (nvcr.io/nvidia/tensorflow), or use --backend trt for TensorRT 10/11"
)


def problems(facts: Facts) -> list[str]:
    """Why TF-TRT cannot run on this machine ([] when it can), each cause said once."""
    tf = facts.tensorflow
    if tf.version is None:
        return [tf.reason]
    if ended(tf.version):
        return [f"TF-TRT ends at TensorFlow 2.17 and this is TensorFlow {tf.version}"]
    found = []
    if tf.reason:
        found.append(tf.reason)
    elif not tf.is_tensorrt_build:
        found.append(
            f"TensorFlow {tf.version} was built without TensorRT (is_tensorrt_build=False)"
        )
    # TensorFlow's own answer wins over our guess at its libraries' names: it may load a TensorRT
    # our ctypes check of the exact sonames missed.
    tf_loads = tf.asked is not None and not tf.asked.error and tf.asked.enabled
    if tf.libnvinfer_reason and not tf_loads:
        found.append(f"TensorFlow's TensorRT libraries are missing: {tf.libnvinfer_reason}")
    mismatch = major_mismatch(facts)
    if mismatch:
        found.append(mismatch)
    if not facts.gpus:
        found.append(NO_GPU)
    if tf.asked is not None:
        # Keep only what TensorFlow adds to the cheap checks' reasons (no repeats).
        found += [
            p
            for p in _runtime_problems(tf.asked)
            if not (p.startswith("TF-TRT cannot load") and tf.libnvinfer_reason)
            and not (p.startswith("TensorFlow sees no GPU") and not facts.gpus)
        ]
    return found


def fix(facts: Facts) -> str:
    """What to do when TF-TRT cannot run: where TensorFlow ended it, the TensorRT backend (or an
    environment of its own); otherwise the libraries and GPU it needs."""
    version = facts.tensorflow.version
    return INSTEAD if version is not None and ended(version) else TFTRT_FIX


def ended(version: str) -> bool:
    """True for a TensorFlow after the last that shipped TF-TRT (2.17)."""
    return version_tuple(version)[:2] > LAST_TENSORFLOW


def _runtime_problems(report: TfTrtReport) -> list[str]:
    """Why TF-TRT cannot run, from what TensorFlow itself said in the subprocess probe."""
    if report.error:
        return [f"TensorFlow's TF-TRT probe failed: {report.error}"]
    found = []
    if not report.enabled:
        cause = "; ".join(report.load_causes) or "TensorFlow could not load TensorRT"
        found.append(f"TF-TRT cannot load TensorRT: {cause}")
    if report.gpu_count == 0:
        cause = "; ".join(report.gpu_causes)
        found.append("TensorFlow sees no GPU" + (f" ({cause})" if cause else ""))
    return found


def major_mismatch(facts: Facts) -> str:
    """Why TF-TRT refuses the TensorRT it would load ("" when it is the major TensorFlow was built
    with, at least the linked version, or not known): TensorFlow's own version check."""
    tf = facts.tensorflow
    loaded = (tf.asked.loaded if tf.asked else None) or tf.libnvinfer_version
    linked = (tf.asked.linked if tf.asked else None) or TFTRT_LINKED_TENSORRT
    if loaded is None:
        return ""
    have, need = version_tuple(loaded), version_tuple(linked)
    if have[0] == need[0] and have >= need:
        return ""
    return (
        f"TensorFlow {tf.version} was built against TensorRT {linked} and TF-TRT refuses "
        f"TensorRT {loaded}: it needs TensorRT {need[0]} ({linked} or newer)"
    )


def loaded_tensorrt(facts: Facts) -> str:
    """The TensorRT version TF-TRT loads (TensorFlow's answer, else the library's own)."""
    tf = facts.tensorflow
    return (tf.asked.loaded if tf.asked else None) or tf.libnvinfer_version or TFTRT_LINKED_TENSORRT


def status(facts: Facts) -> tuple[bool, str]:
    """(usable, reason): whether TF-TRT runs here at all, and why (not)."""
    found = problems(facts)
    if found:
        return False, "; ".join(found)
    tf = facts.tensorflow
    seen = tf.asked.gpu_count if tf.asked and tf.asked.gpu_count is not None else len(facts.gpus)
    return (
        True,
        f"TensorFlow {tf.version} loads TensorRT {loaded_tensorrt(facts)} and sees {seen} GPU(s)",
    )


def support(facts: Facts, precision: str) -> Support:
    """Whether TF-TRT converts and runs `precision` on the machine `facts` describe."""
    usable, reason = status(facts)
    if not usable:
        return verdict(NAME, precision, reason, fix(facts))
    too_old = gpu_too_old(precision, facts)
    if too_old:
        return verdict(NAME, precision, *too_old)
    # INT8 is calibration (implicit INT8), which TensorRT 8 has: the version check covers it.
    how = " (calibrated INT8)" if precision == Precision.INT8 else ""
    loaded = loaded_tensorrt(facts)
    return verdict(NAME, precision, f"TF-TRT{how} with TensorRT {loaded} on {gpu_text(facts)}")


@dataclass(frozen=True)
class TfTrtSection(DoctorSection):
    """The doctor's `tf_trt` block: usable, why, and the TensorRT it links and loads."""

    KEY: ClassVar[str] = "tf_trt"
    usable: bool
    reason: str
    linked_tensorrt: str | None  # None: TensorFlow not asked (doctor --quick)
    loaded_tensorrt: str | None
    libnvinfer: str
    asked_tensorflow: bool

    def library_rows(self) -> list[LibraryRow]:
        linked = self.linked_tensorrt or "? (--quick: TensorFlow not asked)"
        versions = f"links TensorRT {linked}"
        if self.loaded_tensorrt:
            versions += f", loads {self.loaded_tensorrt}"
        details = f"{versions}: {self.reason}"
        return [LibraryRow(component="TF-TRT", version=None, details=details, usable=self.usable)]


def doctor_section(facts: Facts) -> TfTrtSection:
    """The doctor's `tf_trt` section for the machine `facts` describe."""
    tf = facts.tensorflow
    usable, reason = status(facts)
    return TfTrtSection(
        usable=usable,
        reason=reason,
        linked_tensorrt=tf.asked.linked if tf.asked else None,
        loaded_tensorrt=(tf.asked.loaded if tf.asked else None) or tf.libnvinfer_version,
        libnvinfer=tf.libnvinfer_reason or f"loadable ({tf.libnvinfer_version})",
        asked_tensorflow=tf.asked is not None,
    )
