"""Late, helpful imports of heavy optional libraries (after Polygraphy's `lazy_import`)."""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from types import ModuleType

from trtconv.core.errors import MissingDependencyError

# TensorFlow is the user's (tensorflow, tensorflow-cpu, a container's build), or the extra's.
TENSORFLOW_INSTALL = "pip install 'trtconv[tensorflow]' (TensorFlow 2.17 to 2.21) or tensorflow-cpu"
INSTALL_HINTS = {
    "tensorflow": TENSORFLOW_INSTALL,
    "tf2onnx": "pip install 'tf2onnx>=1.17,<1.18'",
    "onnx": "pip install 'onnx>=1.18,!=1.19.0'",
    "onnxruntime": "pip install 'trtconv[cpu]' (or 'trtconv[gpu]' for the CUDA provider)",
    "tensorrt": "pip install 'trtconv[trt]' ('trtconv[trt-cu12]' for CUDA 12) on a GPU machine",
    "cuda": "pip install 'trtconv[trt]' ('trtconv[trt-cu12]' for CUDA 12): it brings cuda-python",
}


# Modules whose import starts TensorFlow and Keras (TensorFlow imports Keras whole).
STARTS_TENSORFLOW = ("tensorflow", "keras", "tf2onnx")


def require(module: str) -> ModuleType:
    """Import `module` now; raise MissingDependencyError naming how to install it."""
    starts_tensorflow = module.split(".")[0] in STARTS_TENSORFLOW
    if starts_tensorflow:
        tensorflow_environment()
    importing: AbstractContextManager[None] = (
        keras_started_lean() if starts_tensorflow else nullcontext()
    )
    collecting: AbstractContextManager[None] = (
        collector_paused() if module not in sys.modules else nullcontext()
    )
    try:
        with importing, collecting:
            return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        hint = INSTALL_HINTS.get(top, f"pip install {top}")
        raise MissingDependencyError(
            f"{module} is not importable ({exc}); install it: {hint}."
        ) from exc


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the block imports a heavy library, then on
    again (as it was) with everything made so far frozen out of its later full collections.

    An import makes hundreds of thousands of objects that live as long as the process, and
    each full collection the allocations set off walks all of them again: with the collector
    on, more than a quarter of TensorFlow's import went to it (a median 2.4 s of CPU per
    process instead of 1.7 s, measured on a 2-core EPYC), paid by every command, bench worker
    and export process.
    Nested blocks and other threads' imports leave the collector on once the last one ends."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


TF_LOG_LEVEL = "3"
# TensorFlow's settings that must be in place before it starts (users may override each).
TF_ENVIRONMENT = {
    # Level 3, not 2: TF 2.17's wheels log "Unable to register cuFFT/cuDNN/cuBLAS factory" at
    # ERROR on every import, CPU or GPU. TF_CPP_MIN_LOG_LEVEL=0 shows everything; the facts probe
    # asks TensorFlow at level 0 itself when it needs the real cause of a failure.
    "TF_CPP_MIN_LOG_LEVEL": TF_LOG_LEVEL,
    # TensorFlow otherwise takes nearly all GPU memory when it starts, and the TensorRT build or
    # the ONNX Runtime CUDA session that follows in the same process finds none left.
    "TF_FORCE_GPU_ALLOW_GROWTH": "true",
}


def tensorflow_environment() -> None:
    """Put TF_ENVIRONMENT into os.environ (keeping what the user set) before TensorFlow starts,
    here and in the processes this one starts."""
    for name, value in TF_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


# Keras, which TensorFlow imports whole when it starts, also imports scikit-learn (for its sklearn
# wrappers) and matplotlib (for its plots) whenever they are installed, each behind an
# `except ImportError`. trtconv installs both (the digits data, the report's plots); together
# they are a third of TensorFlow's import (3.9 s -> 2.5 s of CPU, 3.7 s -> 2.4 s wall, measured
# on a 2-core EPYC), paid again by every process that starts TensorFlow.
KERAS_OPTIONAL_IMPORTS = ("sklearn", "matplotlib")


@dataclass
class KerasStart:
    """Whether `require` starts Keras without its optional imports (`lean_keras_start`)."""

    lean: bool = False


KERAS_START = KerasStart()


def lean_keras_start() -> None:
    """From now on in this process, Keras started through `require` skips its optional imports
    of scikit-learn and matplotlib, which stay importable for trtconv afterwards. For trtconv's
    command line, whose code never uses what Keras would lose: its scikit-learn wrappers and
    its plotting helpers (a library user's process keeps them)."""
    KERAS_START.lean = True


@contextmanager
def keras_started_lean() -> Iterator[None]:
    """While Keras starts inside the block, with `lean_keras_start` on and Keras not started
    yet: Keras' optional imports fail at once, and are importable again after the block."""
    if not KERAS_START.lean or "keras" in sys.modules:
        yield
        return
    blocked = [name for name in KERAS_OPTIONAL_IMPORTS if name not in sys.modules]
    for name in blocked:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in blocked:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def without_keras_optional_imports() -> None:
    """In a process that uses neither (a bench worker, the tf2onnx export), make Keras'
    optional imports of scikit-learn and matplotlib fail at once: a None entry in sys.modules
    makes `import` raise ModuleNotFoundError. A module already imported is left alone."""
    for name in KERAS_OPTIONAL_IMPORTS:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
