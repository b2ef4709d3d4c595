"""Which op computes each output of a SavedModel's signature, read from saved_model.pb (no
TensorFlow): a `Softmax` or `Sigmoid` there says what the output holds.

A signature output names a tensor of the top-level graph (`StatefulPartitionedCall:1`); calls
lead into functions of the graph's library, whose `ret` names a node output inside them
(`Identity_1:output:0`). The walk follows calls and ops that keep the meaning of their first
input (Identity, Cast, Reshape, ...) until it reaches an op that computes.

    MetaGraphDef.graph_def = 2, .signature_def = 5; SignatureDef.outputs = 2; TensorInfo.name = 1
    GraphDef.node = 1, .library = 2; FunctionDefLibrary.function = 1
    FunctionDef.signature = 1 (OpDef.name = 1, .output_arg = 3, ArgDef.name = 1), .node_def = 3,
    .ret = 4 (map<string, string>)
    NodeDef.name = 1, .op = 2, .input = 3, .attr = 5 (map<string, AttrValue>);
    AttrValue.func = 10 (NameAttrList.name = 1)
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from trtconv.core.protowire import map_entries, messages, string

log = logging.getLogger(__name__)

CALLS = {"PartitionedCall", "StatefulPartitionedCall"}
# Ops whose output means what their first input means (a softmax cast to float32 is a softmax).
PASS_THROUGH = {
    "Identity",
    "IdentityN",
    "Cast",
    "Reshape",
    "Squeeze",
    "ExpandDims",
    "StopGradient",
    "EnsureShape",
    "CheckNumerics",
}
MAX_DEPTH = 64  # a cycle in a malformed graph must not loop forever


@dataclass(frozen=True)
class _Node:
    op: str
    inputs: list[str]
    function: str  # the called function (calls only)


def _node(data: bytes) -> tuple[str, _Node]:
    attrs = map_entries(data, 5)
    called = b"".join(messages(attrs["f"], 10)) if "f" in attrs else b""
    inputs = [i.decode() for i in messages(data, 3)]
    return string(data, 1), _Node(string(data, 2), inputs, string(called, 1))


def _nodes(data: bytes, number: int) -> dict[str, _Node]:
    return dict(_node(node) for node in messages(data, number))


class _Graph:
    """The top-level graph and its function library, parsed lazily (functions on first use)."""

    def __init__(self, graph_def: bytes) -> None:
        self.top = _nodes(graph_def, 1)
        library = b"".join(messages(graph_def, 2))
        self.functions = {string(b"".join(messages(f, 1)), 1): f for f in messages(library, 1)}
        self._parsed: dict[str, tuple[dict[str, _Node], list[str], dict[str, str]]] = {}

    def function(self, name: str) -> tuple[dict[str, _Node], list[str], dict[str, str]]:
        """(nodes, output arg names, ret) of a library function."""
        if name not in self._parsed:
            data = self.functions[name]
            signature = b"".join(messages(data, 1))
            outputs = [string(arg, 1) for arg in messages(signature, 3)]
            ret = {key: value.decode() for key, value in map_entries(data, 4).items()}
            self._parsed[name] = (_nodes(data, 3), outputs, ret)
        return self._parsed[name]

    def final_op(self, nodes: dict[str, _Node], reference: str, depth: int = 0) -> str:
        """The op computing `reference` ("node", "node:k" or "node:arg:k") within `nodes`."""
        parts = reference.lstrip("^").split(":")
        node = nodes.get(parts[0])
        if node is None or depth > MAX_DEPTH:
            return ""  # a function argument, or a graph this walk cannot follow
        index = int(parts[-1]) if len(parts) > 1 else 0
        if node.op in CALLS:
            inner, outputs, ret = self.function(node.function)
            return self.final_op(inner, ret[outputs[index]], depth + 1)
        if node.op in PASS_THROUGH and node.inputs:
            source = node.inputs[index] if node.op == "IdentityN" else node.inputs[0]
            return self.final_op(nodes, source, depth + 1)
        return node.op


def final_ops(saved_model: Path, key: str = "serving_default") -> dict[str, str]:
    """Output name -> the op type that computes it ("Softmax", "Sigmoid", "BiasAdd", ...).

    Best effort: an output the walk cannot follow maps to "", and a file it cannot read gives
    {} (roles are then inferred from values alone).
    """
    try:
        data = (Path(saved_model) / "saved_model.pb").read_bytes()
        meta_graph = messages(data, 2)[0]
        signature = map_entries(meta_graph, 5)[key]
        graph = _Graph(b"".join(messages(meta_graph, 2)))
        return {
            name: graph.final_op(graph.top, string(info, 1))
            for name, info in sorted(map_entries(signature, 2).items())
        }
    except (OSError, ValueError, IndexError, KeyError, UnicodeDecodeError) as exc:
        log.debug("could not read the final ops of %s: %s", saved_model, exc)
        return {}
