"""OpenVINO 2026.4's TensorFlow frontend on Python 3.13.

Before it converts an in-memory TensorFlow function, the frontend reads TensorFlow's version in
`openvino.frontend.tensorflow.utils.get_environment_setup` with `exec("import tensorflow")` and
then `exec("del tensorflow")` inside the function. Python 3.13 gives every `exec` in a function
a fresh snapshot of its locals (PEP 667), so the `del` finds no `tensorflow` and raises
NameError, which the function does not catch: every conversion of a loaded SavedModel's
function fails with "name 'tensorflow' is not defined" (a path converts; trtconv converts the
function, to choose the signature). `tolerate_python_313` puts `environment_setup` in its place,
which reads the same three facts without `exec`. Nothing changes on Python 3.12 and older.
"""

from __future__ import annotations

import sys


def environment_setup(framework: str) -> dict[str, str]:
    """What the frontend's `get_environment_setup` returns: Python's version, TensorFlow's (for
    "tf", when it is imported) and the platform."""
    from openvino.frontend.tensorflow import utils

    found = {"python_version": ".".join(map(str, sys.version_info[:3]))}
    if framework == "tf" and "tensorflow" in sys.modules:
        import tensorflow  # imported already: this only names it

        found["tensorflow"] = utils.get_imported_module_version(tensorflow)
    found["sys_platform"] = sys.platform
    return found


def tolerate_python_313() -> None:
    """On Python 3.13+, the frontend reads its environment with `environment_setup`."""
    if sys.version_info >= (3, 13):
        from openvino.frontend.tensorflow import utils

        utils.get_environment_setup = environment_setup
