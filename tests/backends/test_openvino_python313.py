"""OpenVINO's TensorFlow frontend reads its environment without `exec` on Python 3.13
(trtconv.backends.openvino.python313)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from trtconv.backends.openvino.python313 import environment_setup, tolerate_python_313

pytestmark = pytest.mark.tensorflow

ov_utils = pytest.importorskip("openvino.frontend.tensorflow.utils")


@pytest.mark.skipif(sys.version_info >= (3, 13), reason="OpenVINO's own reader fails on 3.13")
def test_the_reader_says_what_openvinos_own_says() -> None:
    import tensorflow  # noqa: F401  (imported, as it is when trtconv converts)

    assert environment_setup("tf") == ov_utils.get_environment_setup("tf")
    assert environment_setup("onnx") == ov_utils.get_environment_setup("onnx")


def test_a_loaded_function_converts_on_this_python(tmp_path: object) -> None:
    """On 3.13 OpenVINO alone fails here with "name 'tensorflow' is not defined"."""
    import openvino as ov
    import tensorflow as tf

    class Double(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
        def serve(self, x: tf.Tensor) -> tf.Tensor:
            return 2.0 * x

    tolerate_python_313()
    model = ov.convert_model(Double().serve.get_concrete_function())
    compiled = ov.compile_model(model, "CPU")
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    assert compiled(x)[0].tolist() == [[2.0, 4.0, 6.0]]
