"""How tensors cross between Triton's Python backend and trtconv's runner: by DLPack, the one
path that is exact under NumPy 1.26 and NumPy 2 alike.

The Python backend of Triton 2.51 (the one PyTriton 0.7.0's wheel carries) was built with a
pybind11 that predates NumPy 2, which moved a dtype's item size: under NumPy 2 its
`Tensor.as_numpy()` gives inputs whose every element equals the first (silently) and
`pb_utils.Tensor(name, array)` sends outputs of 0 bytes. DLPack does not go through pybind11's
NumPy bindings: an input is read with `np.from_dlpack(tensor)` (a view of the request's shared
memory, no copy), an output handed over with `pb_utils.Tensor.from_dlpack(name, capsule)`
(measured exact for float16/32/64, int8/32/64, uint8 and bool, NumPy 1.26.4 and 2.4.6, Python
3.11-3.13). String tensors have no DLPack form: they cross by `as_numpy()` and `pb_utils.Tensor`,
right under NumPy 1 only; `serve` refuses them under NumPy 2 before Triton starts
(`refuse_strings`).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from trtconv.core.errors import MissingDependencyError
from trtconv.core.model_io import STRING, ModelSignature

# The stub marks a capsule it consumed with a name of its own ("used_dlpack"); NumPy's capsule
# destructor expects "dltensor" (not consumed: it frees) or "used_dltensor" (consumed: it leaves
# it), and for any other name it logs a traceback, once per output. Renamed after the call, the
# capsule is NumPy's consumed one. PyCapsule_SetName keeps the pointer: the bytes live here.
USED_CAPSULE = b"used_dltensor"
_SET_NAME = ctypes.pythonapi.PyCapsule_SetName
_SET_NAME.argtypes = [ctypes.py_object, ctypes.c_char_p]
_SET_NAME.restype = ctypes.c_int

ReadInput = Callable[[Any], np.ndarray]  # a pb_utils.Tensor of a request -> its array
MakeOutput = Callable[[Any, str, np.ndarray], Any]  # (pb_utils, name, array) -> a pb_utils.Tensor


def dlpack_input(tensor: Any) -> np.ndarray:
    """A request's input as an array: a view of its shared memory, valid while the request is
    being executed (whatever keeps it longer copies it)."""
    return np.from_dlpack(tensor)


def dlpack_output(pb_utils: Any, name: str, array: np.ndarray) -> Any:
    """`array` as the output tensor `name` of a response (the backend copies it out when the
    response is sent; the capsule keeps `array` alive until then)."""
    capsule = np.ascontiguousarray(array).__dlpack__()
    tensor = pb_utils.Tensor.from_dlpack(name, capsule)
    _SET_NAME(capsule, USED_CAPSULE)
    return tensor


def numpy_input(tensor: Any) -> np.ndarray:
    """A string input: the backend's own conversion (right under NumPy 1 only)."""
    return tensor.as_numpy()


def numpy_output(pb_utils: Any, name: str, array: np.ndarray) -> Any:
    """A string output: the backend's own conversion (right under NumPy 1 only)."""
    return pb_utils.Tensor(name, array)


def input_readers(signature: ModelSignature) -> dict[str, ReadInput]:
    """How each input of `signature` is read from a request: by DLPack, strings by as_numpy."""
    return {
        spec.name: numpy_input if spec.dtype == STRING else dlpack_input
        for spec in signature.inputs
    }


def output_makers(signature: ModelSignature) -> dict[str, MakeOutput]:
    """How each output of `signature` is handed to a response: by DLPack, strings as arrays."""
    return {
        spec.name: numpy_output if spec.dtype == STRING else dlpack_output
        for spec in signature.outputs
    }


def refuse_strings(signature: ModelSignature, numpy_version: str = np.__version__) -> None:
    """Raises MissingDependencyError (exit 3) for a string input or output under NumPy 2, which
    this Triton's Python backend destroys (every byte equal to the first; a stub crashed)."""
    if int(numpy_version.split(".")[0]) < 2:
        return
    strings = [("input", s.name) for s in signature.inputs if s.dtype == STRING]
    strings += [("output", s.name) for s in signature.outputs if s.dtype == STRING]
    if strings:
        kind, name = strings[0]
        raise MissingDependencyError(
            f"trtconv serve cannot serve the string {kind} '{name}' under NumPy {numpy_version}: "
            "Triton 2.51's Python backend destroys string tensors under NumPy 2; serve this "
            "model from an environment with NumPy 1.26 (Python 3.10-3.12, any TensorFlow "
            "2.17-2.21) where Triton is installed the same way (docs/serving.md)."
        )
