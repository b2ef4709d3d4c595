"""SavedModels TensorFlow cannot revive, loaded by what still works.

`tf.saved_model.load` rebuilds a SavedModel's Python objects before it hands out signatures. A
SavedModel written by TF/Keras 2 with its optimizer holds slot variables that only Keras 2's
optimizer can rebuild: TF 2.17 asks `tf_keras` for it and, where that is not installed, fails
("'_UserObject' object has no attribute 'add_slot'") although the signature graph is intact.
Two routes then, in order: register Keras 2's objects by importing `tf_keras` (where installed)
and revive again; else load the signature graphs themselves with TensorFlow's v1 loader
(`tf.compat.v1.saved_model.loader.load`, a Session), freeze the variables into them and write
them as a v1 SavedModel, which every consumer loads: TensorFlow (as a v1 model, no objects),
tf2onnx's `--saved-model`, OpenVINO, TF-TRT. The copy drops the optimizer and Python objects,
nothing a signature runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trtconv.core.errors import InputError, first_line
from trtconv.core.lazy import require
from trtconv.facts.libraries import tf_keras_install

log = logging.getLogger(__name__)

SERVE_TAGS = ["serve"]
INIT_OP = "__saved_model_init_op"  # a signature TF 2 writes for its initialiser, not a model's


def resave_howto() -> str:
    """How to make a SavedModel with Keras 2 optimizer state loadable."""
    return (
        f"install tf_keras ({tf_keras_install()}) so TensorFlow can revive its Keras 2 "
        "objects, or re-save it without the optimizer (model.save(DIR, include_optimizer=False))"
    )


def _saved_model_proto(path: Path) -> Any:
    """The parsed saved_model.pb at `path`, None when it does not parse (its load says why)."""
    require("tensorflow")
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    try:
        proto.ParseFromString((Path(path) / "saved_model.pb").read_bytes())
    except Exception:  # protobuf DecodeError, OSError
        return None
    return proto


def holds_optimizer_state(path: Path) -> bool:
    """True when the SavedModel at `path` records optimizer slot variables: the objects TF 2.17
    revives only through Keras 2. False for one that does not parse."""
    proto = _saved_model_proto(path)
    return proto is not None and any(
        node.slot_variables for graph in proto.meta_graphs for node in graph.object_graph_def.nodes
    )


def is_graph_only(path: Path) -> bool:
    """True for a v1 SavedModel (graphs and signatures, no Python objects), such as the copies
    `revivable` writes."""
    proto = _saved_model_proto(path)
    return proto is not None and not any(
        graph.object_graph_def.nodes for graph in proto.meta_graphs
    )


def revive(path: Path) -> Any:
    """`tf.saved_model.load(path)`; when object revival fails, the routes in the module's
    docstring, each said in one log line. Keep the returned object referenced.

    Raises InputError naming the fix when nothing loads it.
    """
    tf = require("tensorflow")
    loaded, why = _revive_objects(path)
    if loaded is not None:
        return loaded
    # The frozen copy holds no variables and no assets: nothing the loaded model reads later.
    with signature_graphs_of(path, why) as copy:
        return tf.saved_model.load(str(copy))


@contextmanager
def revivable(path: Path) -> Iterator[Path]:
    """`path`, or, when TensorFlow cannot revive it (even through tf_keras), a frozen v1 copy
    of its signature graphs in a temporary directory removed on exit: what tf2onnx, OpenVINO and
    TF-TRT, which load the path themselves, are given. Only a SavedModel holding optimizer state
    is tried (the known case), so other models cost nothing here.

    Raises InputError naming the fix when nothing loads it.
    """
    if not holds_optimizer_state(path):
        yield path
        return
    loaded, why = _revive_objects(path)
    if loaded is not None:
        del loaded
        yield path
        return
    with signature_graphs_of(path, why) as copy:
        yield copy


def _revive_objects(path: Path) -> tuple[Any, str]:
    """(the revived SavedModel, "") or (None, why TensorFlow cannot revive it), trying again
    through tf_keras where it is installed and not yet imported (TF 2.17 imports it itself for
    an optimizer: once imported, importing it again changes nothing)."""
    tf = require("tensorflow")
    try:
        return tf.saved_model.load(str(path)), ""
    except Exception as exc:  # protobuf DecodeError, OSError, AttributeError... many types
        why = first_line(exc, limit=200)
    if "tf_keras" in sys.modules or importlib.util.find_spec("tf_keras") is None:
        return None, why
    try:
        importlib.import_module("tf_keras")
        loaded = tf.saved_model.load(str(path))
    except Exception as exc:
        log.debug("reviving %s through tf_keras failed too: %s", path, exc)
        return None, why
    log.warning(
        "SavedModel %s: TensorFlow could not revive its objects (%s); loaded after "
        "registering Keras 2's objects through tf_keras.",
        path,
        why,
    )
    return loaded, ""


def _tf_keras_missing() -> bool:
    """True when tf_keras cannot be imported here."""
    try:
        importlib.import_module("tf_keras")
    except ImportError:
        return True
    return False


@contextmanager
def signature_graphs_of(path: Path, why: str) -> Iterator[Path]:
    """A v1 SavedModel in a temporary directory (removed on exit) holding `path`'s signature
    graphs with their variables frozen in (the v1 loader reads the graph and variables, no
    Python objects); logs the line that says what happened and why.

    Raises InputError naming the fix when the v1 loader cannot load it either.
    """
    with tempfile.TemporaryDirectory(prefix="trtconv-graph-") as work:
        output = Path(work) / "saved_model"
        signatures = _frozen_or_fix(path, why, output)
        missing = _tf_keras_missing()
        keras = "; tf_keras, which would revive them, is not installed" if missing else ""
        log.warning(
            "SavedModel %s: TensorFlow could not revive its objects (%s%s); running its "
            "signature graphs (%s) as TensorFlow's v1 loader reads them, variables frozen in.",
            path,
            why,
            keras,
            ", ".join(signatures),
        )
        yield output


def _frozen_or_fix(path: Path, why: str, output: Path) -> list[str]:
    """`freeze_signature_graphs(path, output)`, or InputError naming the fix."""
    try:
        return freeze_signature_graphs(path, output)[0]
    except Exception as exc:  # the v1 loader's errors come in many types
        log.debug("the v1 loader could not load %s either: %s", path, exc)
        fix = _tf_keras_missing() and holds_optimizer_state(path)
        hint = f"; {resave_howto()}" if fix else ""
        raise InputError(f"SavedModel {path} could not be loaded: {why}{hint}.") from exc


# Changes a frozen GraphDef in place, given the signatures it serves (name -> SignatureDef);
# returns the names of the nodes it changed.
GraphRewrite = Callable[[Any, Mapping[str, Any]], list[str]]


def freeze_signature_graphs(
    path: Path, output: Path, rewrite: GraphRewrite | None = None
) -> tuple[list[str], list[str]]:
    """Write `path`'s signature graphs (tag "serve"), variables frozen into constants (branch
    functions too) and `rewrite` applied, as a v1 SavedModel at `output`. Returns (the
    signature names written, the nodes `rewrite` changed)."""
    tf = require("tensorflow")
    with _quiet_deprecations():
        return _freeze(tf, path, output, rewrite)


@contextmanager
def _quiet_deprecations() -> Iterator[None]:
    """TensorFlow logs a deprecation warning of three lines for every v1 API used here: the
    one line `signature_graphs_of` logs says what matters."""
    logger = logging.getLogger("tensorflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _freeze(
    tf: Any, path: Path, output: Path, rewrite: GraphRewrite | None
) -> tuple[list[str], list[str]]:
    from tensorflow.python.framework import convert_to_constants

    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        meta_graph = v1.saved_model.loader.load(session, SERVE_TAGS, str(path))
        signatures = {
            key: value for key, value in meta_graph.signature_def.items() if key != INIT_OP
        }
        fetched = sorted(tensor_nodes(signatures, "outputs"))
        frozen = convert_to_constants.convert_variables_to_constants_from_session_graph(
            session, graph.as_graph_def(), fetched
        )
    changed = rewrite(frozen, signatures) if rewrite is not None else []
    with tf.Graph().as_default() as clean, v1.Session(graph=clean) as session:
        v1.import_graph_def(frozen, name="")
        builder = v1.saved_model.Builder(str(output))
        builder.add_meta_graph_and_variables(
            session, SERVE_TAGS, signature_def_map=signatures, strip_default_attrs=True
        )
        builder.save()
    return sorted(signatures), changed


def tensor_nodes(signatures: Mapping[str, Any], kind: str) -> set[str]:
    """The node names behind every signature's `kind` ("inputs" or "outputs") tensors."""
    return {
        tensor.name.split(":")[0]
        for signature in signatures.values()
        for tensor in getattr(signature, kind).values()
    }
