"""A TF1-era SavedModel made exportable: its variables frozen, its placeholders with defaults
folded to their defaults, and its scalar inputs with one value for the whole run folded to that
value, before tf2onnx reads it.

A v1 SavedModel (a graph and signatures, no Python objects: what `tf.compat.v1` code exports)
holds resource variables that tf2onnx cannot follow into functional control flow: a batch norm's
`tf.cond(is_training, ...)` failed with "Return readvariableop -> ReadVariableOp:value:0 is not
found". TensorFlow's own `convert_variables_to_constants_from_session_graph` freezes the
variables, branch functions included; a placeholder with a default that the signature leaves
out (the TF1 idiom for a training flag) becomes its default, a constant, so the graph computes
what serving computes.

A flag that is a signature input (`is_training: bool[]`) fed one value for the whole run (a 0-d
array in the data, or --input-value) is folded the same way: its consumers read a constant of
that value, and an `If` whose condition is then constant becomes a call of the branch it takes
(a v1 `tf.cond`, Switch/Merge, is pruned by the constant folding tf2onnx runs). Left in the
graph, the `If` reaches ONNX Runtime's quantiser, which stops at "Bad node spec for node ...
OpType: If". The input itself stays in the signature, unused, so the artifact takes the same
feeds as the SavedModel. The frozen copy is a v1 SavedModel with the same signatures.
"""

from __future__ import annotations

import itertools
import logging
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from trtconv.core.lazy import require
from trtconv.model.signature_graph import freeze_signature_graphs, is_graph_only, tensor_nodes

log = logging.getLogger(__name__)

DEFAULTED = "PlaceholderWithDefault"
BRANCHING = {"If": "StatefulPartitionedCall", "StatelessIf": "PartitionedCall"}
FOLDED_SUFFIX = "/folded_value"
TAKEN_SUFFIX = "_taken_branch"  # the call of the branch an `If` on a constant takes
# The one value of a scalar input for the whole run, by input name (a bool, int or float).
FixedValues = Mapping[str, bool | int | float]


@dataclass(frozen=True)
class Exportable:
    """What tf2onnx reads (`path`), and what was folded into it."""

    path: Path
    folded: Folded


@contextmanager
def exportable(saved_model: Path, fixed: FixedValues | None = None) -> Iterator[Exportable]:
    """`saved_model`, or for a v1 SavedModel a frozen copy (see the module's docstring), with
    the scalar inputs `fixed` names folded to their values, in a temporary directory removed on
    exit; says in one log line what was folded."""
    if not is_graph_only(saved_model):
        if fixed:
            log.info(
                "%s: scalar input(s) %s fed at run time (inputs are folded into v1 SavedModels "
                "only)",
                saved_model,
                ", ".join(fixed),
            )
        yield Exportable(saved_model, Folded())
        return
    with tempfile.TemporaryDirectory(prefix="trtconv-tf1-") as work:
        output = Path(work) / "saved_model"
        folded = freeze_v1_saved_model(saved_model, output, fixed)
        words = folded.words()
        log.info("%s is a v1 SavedModel: exported with variables frozen%s", saved_model, words)
        yield Exportable(output, folded)


@dataclass
class Folded:
    """What freezing folded: placeholders to their defaults, scalar inputs to their one value
    ('is_training=false'), and how many `If`s on a now constant condition were taken."""

    defaults: list[str] = field(default_factory=list)
    values: dict[str, bool | int | float] = field(default_factory=dict)
    branches: int = 0

    def words(self) -> str:
        """The log line's tail: '; placeholders folded to their defaults: is_training', ..."""
        words = f"; placeholders folded to their defaults: {', '.join(self.defaults)}"
        words = words * bool(self.defaults)
        if self.values:
            values = ", ".join(f"{k}={str(v).lower()}" for k, v in self.values.items())
            words += f"; inputs folded to their one value for the run: {values}"
        if self.branches:
            words += f"; {self.branches} tf.cond on a constant condition taken"
        return words


def freeze_v1_saved_model(path: Path, output: Path, fixed: FixedValues | None = None) -> Folded:
    """Write `path`'s serving graph, variables frozen into constants, placeholders with
    defaults outside every signature folded to their defaults and the scalar inputs `fixed`
    names folded to their values, as a v1 SavedModel at `output`. Returns what was folded."""
    folded = Folded()
    freeze_signature_graphs(path, output, partial(_exportable, fixed=fixed or {}, into=folded))
    return folded


def _exportable(
    graph_def: Any, signatures: Mapping[str, Any], fixed: FixedValues, into: Folded
) -> list[str]:
    """The frozen graph made readable by tf2onnx: branch functions' returns renamed, the
    defaults no signature feeds folded, the `fixed` inputs folded and the `If`s they decide
    taken, each recorded `into`; returns the nodes folded."""
    _fix_function_returns(graph_def)
    into.defaults += _fold_defaults(graph_def, tensor_nodes(signatures, "inputs"))
    into.values |= _fold_values(graph_def, signatures, fixed)
    into.branches += _take_constant_branches(graph_def)
    return into.defaults


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


def _fold_values(
    graph_def: Any, signatures: Mapping[str, Any], fixed: FixedValues
) -> dict[str, bool | int | float]:
    """Every reader of a `fixed` input's placeholder made to read a constant of its value
    instead (the placeholder stays, unread, so the signature keeps the input); returns the
    inputs folded and their values."""
    tf = require("tensorflow")
    nodes = {node.name: node for node in graph_def.node}
    folded: dict[str, bool | int | float] = {}
    for name, value in fixed.items():
        placeholders = {
            signature.inputs[name].name.split(":")[0]
            for signature in signatures.values()
            if name in signature.inputs
        }
        for placeholder in sorted(placeholders & set(nodes)):
            dtype = tf.as_dtype(nodes[placeholder].attr["dtype"].type)
            constant = graph_def.node.add()
            constant.name, constant.op = placeholder + FOLDED_SUFFIX, "Const"
            constant.attr["dtype"].type = dtype.as_datatype_enum
            constant.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(value, dtype))
            _rewire(graph_def, {placeholder, f"{placeholder}:0"}, constant.name)
            folded[name] = value
    return folded


def _rewire(graph_def: Any, sources: set[str], target: str) -> None:
    """Every data input naming one of `sources` names `target` instead (control inputs, which
    only order execution, are left as they are)."""
    for node in graph_def.node:
        for index, source in enumerate(node.input):
            if source in sources:
                node.input[index] = target


def _take_constant_branches(graph_def: Any) -> int:
    """Each `If` of the graph whose condition is a scalar constant (through Identity nodes)
    made a call of the branch that condition takes, with the same inputs, under a name of its
    own; the `If`'s name becomes an IdentityN of the call's outputs. Returns how many."""
    tf = require("tensorflow")
    nodes = {node.name: node for node in graph_def.node}
    names = set(nodes)
    taken = 0
    for node in list(graph_def.node):
        if node.op not in BRANCHING:
            continue
        condition = _constant(nodes, node.input[0])
        if condition is None:
            continue
        value = tf.make_ndarray(condition)
        if value.shape != ():
            continue
        branch = node.attr["then_branch" if bool(value) else "else_branch"].func
        call = _branch_call(graph_def, node, branch, _fresh_name(node.name, names))
        names.add(call.name)
        _outputs_under_old_name(node, call)
        taken += 1
    return taken


def _branch_call(graph_def: Any, node: Any, branch: Any, name: str) -> Any:
    """A call of `branch` named `name`, with `node`'s (an `If`'s) arguments and types."""
    call = graph_def.node.add()
    call.name, call.op, call.device = name, BRANCHING[node.op], node.device
    call.input.extend(node.input[1:])  # the branch's arguments, then control inputs
    for key in ("Tin", "Tout"):
        call.attr[key].CopyFrom(node.attr[key])
    call.attr["f"].func.CopyFrom(branch)
    return call


def _outputs_under_old_name(node: Any, call: Any) -> None:
    """`node` made an IdentityN of `call`'s outputs: every reader of the `If` (data, control,
    a signature) reads the branch taken through the name it had."""
    types = list(node.attr["Tout"].list.type)
    del node.input[:]
    node.input.extend(f"{call.name}:{index}" for index in range(len(types)))
    node.op = "IdentityN"
    node.attr.clear()
    node.attr["T"].list.type.extend(types)


def _fresh_name(name: str, names: set[str]) -> str:
    """A node name no node of `names` has, nor starts with as a scope (`NAME/...`).

    Grappler inlines a function call named N as nodes named N/<body node>: a call named as
    its `If` was meets tf.cond's own output nodes there (`cond/Identity`, when the branch holds
    an `Identity` too, as a dropout's does), and TensorFlow aborts the process ("Non unique
    node name detected")."""
    for index in itertools.count():
        fresh = f"{name}{TAKEN_SUFFIX}" + (f"_{index}" if index else "")
        if fresh not in names and not any(other.startswith(fresh + "/") for other in names):
            return fresh
    raise AssertionError("unreachable")


def _constant(nodes: Mapping[str, Any], source: str) -> Any:
    """The TensorProto of the Const node `source` names, following Identity nodes; None when
    it is not a constant."""
    node = nodes.get(source.split(":")[0])
    while node is not None and node.op == "Identity":
        node = nodes.get(node.input[0].split(":")[0])
    return node.attr["value"].tensor if node is not None and node.op == "Const" else None
