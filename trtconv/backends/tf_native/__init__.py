"""Native TensorFlow: the baseline every conversion is validated and benchmarked against."""

from __future__ import annotations

from trtconv.backends.registry import Backend, register
from trtconv.backends.tf_native.runner import SavedModelRunner, saved_model_runner
from trtconv.core.lazy import TENSORFLOW_INSTALL
from trtconv.facts import Facts
from trtconv.protocol.serving import TritonServing
from trtconv.protocol.support import Support

NAME = "tf"


def support(facts: Facts, precision: str) -> Support:
    """TensorFlow runs its own SavedModels wherever it is installed."""
    version = facts.version("tensorflow")
    if version is None:
        return Support(NAME, precision, False, facts.tensorflow.reason, TENSORFLOW_INSTALL)
    return Support(NAME, precision, True, f"TensorFlow {version}")


BACKEND = register(
    Backend(
        name=NAME,
        library="tensorflow",
        precisions=("fp32",),
        support=support,
        runner=saved_model_runner,
        module=__name__,
        string_inputs=True,
        triton=TritonServing(None, "tensorflow_savedmodel", "model.savedmodel"),
    )
)

__all__ = ["BACKEND", "SavedModelRunner"]
