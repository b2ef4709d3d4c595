"""SavedModel -> OpenVINO model (`ov.Model`) with the signature's input and output names.

OpenVINO's TensorFlow frontend reads a SavedModel directory itself, but on Keras 3 functional
models written with `tf.saved_model.save(model)` it fails ("VarHandleOp ... Cannot find requested
variable", OpenVINO 2026.4, keras.applications ResNet-50). Converting the loaded signature's
concrete function (`serving_default` unless `--signature` names another) works for every
SavedModel we tried (tf.Module exports, `tf.saved_model.save(model)`, `model.export`), so that is
the one path: TensorFlow loads the model (as `convert` does anyway for its reference outputs) and
the loaded object stays referenced while OpenVINO reads the function, whose variables live in it.
OpenVINO's constants would share the variables' memory by default; they are copied
(`share_weights=False`), so the model stays valid once TensorFlow frees the loaded object (shared
weights came out as garbage ranges in NNCF's statistics and a 0.11 top-1 agreement: freed memory,
reused). A v1 SavedModel (graphs and signatures only, such as the frozen signature graphs
trtconv loads a SavedModel TensorFlow cannot revive through) is the exception: OpenVINO reads its
serving_default from the directory, and cannot read its loaded function (a v1 graph's calls of
its function library).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from trtconv.backends.openvino.python313 import tolerate_python_313
from trtconv.core.errors import ConversionError
from trtconv.core.lazy import require
from trtconv.core.model_io import ModelSignature
from trtconv.model.savedmodel import SERVING_KEY, load_saved_model
from trtconv.model.signature_graph import is_graph_only

log = logging.getLogger(__name__)

PAYLOAD = "model.xml"
WEIGHTS = "model.bin"


def model_from_saved_model(saved_model: Path, signature: ModelSignature) -> Any:
    """The signature `signature` names (serving_default unless chosen) of `saved_model` as an
    `ov.Model` whose inputs and outputs carry the signature's names.

    Raises InputError for a SavedModel that does not load and ConversionError when OpenVINO
    cannot convert it or its names do not match the signature.
    """

    ov = require("openvino")
    tolerate_python_313()
    if is_graph_only(saved_model) and signature.name == SERVING_KEY:
        loaded = None
        source: Any = str(saved_model)
    else:
        loaded = load_saved_model(saved_model, signature.name)
        source = loaded.function
    try:
        model = ov.convert_model(source, share_weights=False)
    except Exception as exc:
        raise ConversionError(
            f"OpenVINO could not convert {saved_model}: {first_line(exc)}"
        ) from exc
    finally:
        del loaded  # the converted model holds its own copy of the weights (share_weights=False)
    check_names(model, signature, saved_model)
    return model


def check_names(model: Any, signature: ModelSignature, source: Path) -> None:
    """Give each input and output port of `model` exactly its signature name.

    OpenVINO may attach several names to one tensor; the runner reads one (`get_any_name`), so
    every port keeps only the signature's name. Raises ConversionError when a signature name is
    on no port.
    """
    for kind, ports, wanted in (
        ("inputs", model.inputs, signature.input_names),
        ("outputs", model.outputs, signature.output_names),
    ):
        by_name = {name: port for port in ports for name in port.get_names()}
        missing = [name for name in wanted if name not in by_name]
        if missing:
            found = ", ".join(sorted(by_name)) or "none"
            raise ConversionError(
                f"OpenVINO's model of {source} lacks {kind} {', '.join(missing)} of the "
                f"signature '{signature.name}' (it has {found})."
            )
        for name in wanted:
            by_name[name].get_tensor().set_names({name})


def save_ir(model: Any, output_dir: Path) -> Path:
    """Write `model` as `model.xml` + `model.bin` in `output_dir`; return the .xml path.

    Weights keep their precision: OpenVINO's `save_model` would otherwise compress float32
    weights to float16, which is not what an fp32 artifact promises.
    """
    ov = require("openvino")
    path = Path(output_dir) / PAYLOAD
    ov.save_model(model, str(path), compress_to_fp16=False)
    return path


def op_counts(model: Any) -> dict[str, int]:
    """How many operations of each type the model holds (Parameter/Result/Constant left out)."""
    skip = {"Parameter", "Result", "Constant"}
    counts = Counter(op.get_type_name() for op in model.get_ordered_ops())
    return {name: count for name, count in sorted(counts.items()) if name not in skip}


def first_line(exc: BaseException) -> str:
    """The first informative line of an OpenVINO error (its messages start with 'Check ...')."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith("Check ")]
    return ((useful or lines or [type(exc).__name__])[0])[:300]
