"""A TF1-era SavedModel made exportable: its variables frozen and its placeholders with defaults
folded to their defaults, before tf2onnx reads it.

A v1 SavedModel (a graph and signatures, no Python objects: what `tf.compat.v1` code exports)
holds resource variables that tf2onnx cannot follow into functional control flow: a batch norm's
`tf.cond(is_training, ...)` failed with "Return readvariableop -> ReadVariableOp:value:0 is not
found". TensorFlow's own `convert_variables_to_constants_from_session_graph` freezes the
variables, branch functions included; a placeholder with a default that the signature leaves
out (the TF1 idiom for a training flag) becomes its default, a constant, so the graph computes
what serving computes. The frozen copy is a v1 SavedModel with the same signatures.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trtconv.model.signature_graph import freeze_signature_graphs, is_graph_only, tensor_nodes

log = logging.getLogger(__name__)

DEFAULTED = "PlaceholderWithDefault"


@contextmanager
def exportable(saved_model: Path) -> Iterator[Path]:
    """`saved_model`, or for a v1 SavedModel a frozen copy (see the module's docstring) in a
    temporary directory removed on exit; says in one log line what was folded."""
    if not is_graph_only(saved_model):
        yield saved_model
        return
    with tempfile.TemporaryDirectory(prefix="trtconv-tf1-") as work:
        output = Path(work) / "saved_model"
        folded = freeze_v1_saved_model(saved_model, output)
        defaults = f"; placeholders folded to their defaults: {', '.join(folded)}" * bool(folded)
        log.info("%s is a v1 SavedModel: exported with variables frozen%s", saved_model, defaults)
        yield output


def freeze_v1_saved_model(path: Path, output: Path) -> list[str]:
    """Write `path`'s serving graph, variables frozen into constants and placeholders with
    defaults outside every signature folded to their defaults, as a v1 SavedModel at `output`.
    Returns the names of the folded placeholders."""
    return freeze_signature_graphs(path, output, _exportable)[1]


def _exportable(graph_def: Any, signatures: Mapping[str, Any]) -> list[str]:
    """The frozen graph made readable by tf2onnx: branch functions' returns renamed, the
    defaults no signature feeds folded (their names returned)."""
    _fix_function_returns(graph_def)
    return _fold_defaults(graph_def, tensor_nodes(signatures, "inputs"))


def _fix_function_returns(graph_def: Any) -> None:
    """TensorFlow's freezing turns a branch function's ReadVariableOp into an Identity but
    keeps its return named by ReadVariableOp's output (`NODE:value:0`); name Identity's."""
    for function in graph_def.library.function:
        ops = {node.name: node.op for node in function.node_def}
        for key, value in list(function.ret.items()):
            node, _, rest = value.partition(":")
            arg, _, index = rest.partition(":")
            if ops.get(node) == "Identity" and arg == "value":
                function.ret[key] = f"{node}:output:{index}"


def _fold_defaults(graph_def: Any, inputs: set[str]) -> list[str]:
    """Each PlaceholderWithDefault no signature feeds made an Identity of its default (a
    constant TensorFlow and tf2onnx fold); returns their names."""
    folded = []
    for node in graph_def.node:
        if node.op == DEFAULTED and node.name not in inputs:
            dtype = node.attr.get_or_create("dtype").type  # a protobuf map: it has one
            node.op = "Identity"
            node.attr.clear()
            node.attr.get_or_create("T").type = dtype
            folded.append(node.name)
    return folded
