"""tf2onnx's command line (`python -m tf2onnx.convert`), started by `export_onnx` in a process
of its own, without Keras' optional imports (`core.lazy.without_keras_optional_imports`): the
export uses neither scikit-learn nor matplotlib, and TensorFlow starts a third faster. Before it
converts, the ops tf2onnx lacks but ONNX computes exactly get their handlers
(`onnxlib.tf_equivalents`: Erfc, which TensorFlow 2.21 writes for exact GELU).

Run as `python -m trtconv.onnxlib.tf2onnx_cli ARGS...`: ARGS are tf2onnx.convert's.
"""

from __future__ import annotations

import runpy

from trtconv.core.lazy import require, without_keras_optional_imports
from trtconv.onnxlib import tf_equivalents

if __name__ == "__main__":
    without_keras_optional_imports()
    require("tf2onnx")  # TensorFlow with it, started as trtconv starts it (core.lazy.require)
    tf_equivalents.register()
    runpy.run_module("tf2onnx.convert", run_name="__main__", alter_sys=True)
