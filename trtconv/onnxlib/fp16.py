"""Float16 ONNX models: the mixed conversion (chosen nodes kept in float32) and its faithful
emulation on the CPU.

The conversion is ONNX Runtime's `convert_float_to_float16` (float32 inputs and outputs, casts at
the boundaries of the nodes kept in float32). The library puts a float32 -> float16 -> float32
cast pair between two kept nodes (each kept node's output goes back to float16 first), which
would overflow exactly the values the nodes were kept for: `join_float32_runs` removes those pairs.

ONNX Runtime 1.31's CPU provider runs a float16 model by computing its float16 nodes in float32
(it inserts casts), so running a float16 model on the CPU hides float16 overflow. The emulation
is a float32 copy of the float16 model in which every float16 tensor is rounded through float16
(a Cast to FLOAT16 and back) where the float16 model produces it: every value a float16 tensor
holds is one float16 can hold, |x| > 65504 becomes inf as it does on a GPU, and arithmetic
inside a node is float32 (GPU kernels accumulate float16 products in float32 too). It runs with
ONNX Runtime's graph optimisations off, which would otherwise fold the cast pairs away.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from trtconv.core.errors import ConversionError, InputError
from trtconv.core.lazy import require
from trtconv.core.model_io import ModelSignature
from trtconv.onnxlib.session import CPU, OrtRunner

log = logging.getLogger(__name__)

# Control flow stays float32: the library converts subgraphs but not the outer-scope values they
# read, which leaves them mistyped.
CONTROL_FLOW = ("If", "Loop", "Scan")
# Suffixes of the tensors the emulation adds: a node's float32 result and its float16 rounding.
COMPUTED = "__fp32"
ROUNDED = "__fp16"
EMULATION_WARNING = (
    "runs by float16 emulation on the CPU (every float16 tensor rounded through float16, "
    "float32 arithmetic): the accuracy of float16, not its speed"
)


def load_model(path: Path) -> Any:
    """The ONNX model at `path` (an onnx.ModelProto)."""
    return require("onnx").load(str(path))


def tensor_types(model: Any) -> dict[str, int]:
    """The element type (onnx.TensorProto enum) of every tensor shape inference can type:
    graph inputs and outputs, initializers and node outputs."""
    onnx = require("onnx")
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    types = {init.name: init.data_type for init in graph.initializer}
    for value in [*graph.input, *graph.value_info, *graph.output]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types[value.name] = value.type.tensor_type.elem_type
    return types


def to_mixed_float16(model: Any, kept: set[str] | frozenset[str] = frozenset()) -> Any:
    """A float16 copy of `model` (onnx.ModelProto, float32) with the nodes named in `kept` (and
    control flow) in float32: float32 inputs and outputs, casts at every float16/float32
    boundary. Returns a new ModelProto; raises MissingDependencyError without onnxruntime."""
    onnx = require("onnx")
    float16 = require("onnxruntime.transformers.float16")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    mixed = float16.convert_float_to_float16(
        copy,
        keep_io_types=True,
        op_block_list=[*float16.DEFAULT_OP_BLOCK_LIST, *CONTROL_FLOW],
        node_block_list=sorted(kept),
    )
    _drop_duplicates(mixed.graph)
    join_float32_runs(mixed)
    _sort_topologically(mixed.graph)
    return mixed


def _drop_duplicates(graph: Any) -> None:
    """Keep one of the identical Cast nodes the library adds when several kept nodes read the
    same float16 tensor (each gets "<tensor>_cast_to_fp32_node" writing the same output)."""
    seen: set[str] = set()
    for node in list(graph.node):
        key = node.SerializeToString()
        if key in seen:
            graph.node.remove(node)
        seen.add(key)


def _sort_topologically(graph: Any) -> None:
    """Order `graph`'s nodes so each comes after the producers of its inputs, keeping the
    original order where it allows (the library appends its casts at the end; TensorRT's parser
    and the ONNX checker need the order)."""
    producer = {name: index for index, node in enumerate(graph.node) for name in node.output}
    ordered: list[Any] = []
    entered: set[int] = set()
    for index in range(len(graph.node)):
        stack = [(index, False)]
        while stack:  # depth first: a node's producers before the node
            at, ready = stack.pop()
            if ready:
                ordered.append(graph.node[at])
                continue
            if at in entered:
                continue
            entered.add(at)
            stack.append((at, True))
            for name in graph.node[at].input:
                source = producer.get(name)
                if source is not None and source not in entered:
                    stack.append((source, False))
    copies = [type(node)() for node in ordered]
    for copy, node in zip(copies, ordered, strict=True):
        copy.CopyFrom(node)
    del graph.node[:]
    graph.node.extend(copies)


def join_float32_runs(model: Any) -> int:
    """Remove the float32 -> float16 -> float32 cast pairs between float32 values (a kept node's
    output read by another kept node, or a graph input read by one): the consumer reads the
    float32 value directly. Edits `model` in place; returns the pairs removed."""
    onnx = require("onnx")
    float16, float32 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT
    types = tensor_types(model)
    graph = model.graph
    producer = {output: node for node in graph.node for output in node.output}
    joined = 0
    for node in graph.node:
        first = producer.get(node.input[0]) if node.op_type == "Cast" and node.input else None
        if (
            first is not None
            and _cast_to(node) == float32
            and first.op_type == "Cast"
            and _cast_to(first) == float16
            and types.get(first.input[0]) == float32
        ):
            node.op_type = "Identity"  # float32 in, float32 out: no rounding left
            del node.attribute[:]
            node.input[0] = first.input[0]
            joined += 1
    _drop_unused(graph)
    return joined


def _cast_to(node: Any) -> int | None:
    """The `to` type of a Cast node (None when absent)."""
    return next((attr.i for attr in node.attribute if attr.name == "to"), None)


def _drop_unused(graph: Any) -> None:
    """Remove nodes none of whose outputs is read or is a graph output (repeated to a fixpoint),
    then the value_info of tensors no node makes any more."""
    outputs = {value.name for value in graph.output}
    while True:
        read = {name for node in graph.node for name in node.input} | outputs
        unused = [node for node in graph.node if not any(name in read for name in node.output)]
        if not unused:
            break
        for node in unused:
            graph.node.remove(node)
    made = {name for node in graph.node for name in node.output}
    for value in list(graph.value_info):
        if value.name not in made:
            graph.value_info.remove(value)


def emulate_float16(model: Any) -> Any:
    """The faithful float32 emulation of a float16 ONNX model (see the module docstring):
    float16 initializers, constants and inputs/outputs become float32 with the same values, and
    every tensor the model computes in float16 is rounded through float16 where it is made.
    Returns a new ModelProto with the same input and output names."""
    onnx = require("onnx")
    float16 = onnx.TensorProto.FLOAT16
    types = tensor_types(model)
    emulated = onnx.ModelProto()
    emulated.CopyFrom(model)
    graph = emulated.graph
    nodes = _rounded_inputs(graph, float16)
    for node in graph.node:
        _float32_attributes(node)
        nodes.append(node)
        for index, name in enumerate(node.output):
            if types.get(name) == float16:
                nodes.extend(_rounding(node, index, name))
            elif name and name not in types:
                log.debug("float16 emulation: no type for %s (%s): not rounded", name, node.name)
    del graph.node[:]
    graph.node.extend(nodes)
    for initializer in graph.initializer:
        if initializer.data_type == float16:
            initializer.CopyFrom(_float32_tensor(initializer))
    for value in [*graph.input, *graph.output]:
        if value.type.tensor_type.elem_type == float16:
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    del graph.value_info[:]  # stale float16 types; ONNX Runtime infers them again
    return emulated


def _rounded_inputs(graph: Any, float16: int) -> list[Any]:
    """Cast nodes that round each float16 graph input (fed as float32 to the emulation) through
    float16, with every reader of the input rewired to the rounded value."""
    helper, float32 = require("onnx.helper"), require("onnx").TensorProto.FLOAT
    nodes = []
    for value in graph.input:
        if value.type.tensor_type.elem_type != float16:
            continue
        name = value.name
        nodes.append(helper.make_node("Cast", [name], [name + ROUNDED], to=float16))
        nodes.append(helper.make_node("Cast", [name + ROUNDED], [name + COMPUTED], to=float32))
        for node in graph.node:
            node.input[:] = [name + COMPUTED if read == name else read for read in node.input]
    return nodes


def _rounding(node: Any, index: int, name: str) -> list[Any]:
    """Make `node`'s output `name` a float16-rounded float32 tensor: the node writes its float32
    result (a Cast to FLOAT16 writes its float16 one) and casts bring the rounding back to
    `name`. Returns the nodes to add after `node`."""
    helper, proto = require("onnx.helper"), require("onnx").TensorProto
    back = helper.make_node(
        "Cast", [name + ROUNDED], [name], to=proto.FLOAT, name=f"{node.name}{ROUNDED}_{index}"
    )
    if node.op_type == "Cast":  # already rounds: its float16 result only needs to come back
        node.output[index] = name + ROUNDED
        return [back]
    node.output[index] = name + COMPUTED
    down = helper.make_node(
        "Cast",
        [name + COMPUTED],
        [name + ROUNDED],
        to=proto.FLOAT16,
        name=f"{node.name}{COMPUTED}_{index}",
    )
    return [down, back]


def _float32_attributes(node: Any) -> None:
    """Float16 tensors and dtypes in `node`'s attributes (Constant, ConstantOfShape, EyeLike,
    RandomNormal, ...) in float32: the rounding added after the node keeps them float16-valued.
    A Cast to FLOAT16 stays: it rounds. Raises ConversionError for a float16 subgraph."""
    proto = require("onnx").TensorProto
    for attr in node.attribute:
        if attr.HasField("t") and attr.t.data_type == proto.FLOAT16:
            attr.t.CopyFrom(_float32_tensor(attr.t))
        elif attr.name == "dtype" and attr.i == proto.FLOAT16:
            attr.i = proto.FLOAT
        elif attr.HasField("g") or len(attr.graphs):
            if node.op_type in CONTROL_FLOW:
                continue  # kept float32 by to_mixed_float16
            raise ConversionError(f"float16 emulation cannot rewrite the subgraph of {node.name}.")


def _float32_tensor(tensor: Any) -> Any:
    """A float32 TensorProto with `tensor`'s name and (float16) values."""
    numpy_helper = require("onnx.numpy_helper")
    values = numpy_helper.to_array(tensor).astype("float32")
    return numpy_helper.from_array(values, tensor.name)


def emulation_session(model: Any, threads: int | None = None) -> Any:
    """An ONNX Runtime CPU session for an emulated model, graph optimisations off (they would
    fold the rounding casts away)."""
    ort = require("onnxruntime")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), sess_options=options, providers=[CPU])


class Float16EmulationRunner(OrtRunner):
    """Runs a float16 ONNX model by its faithful float32 emulation on the CPU (emulate_float16):
    what the model computes on a GPU, to float16's rounding and overflow, at the CPU's float32
    speed. `device` says so: "cpu (float16 emulation)"."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        super().__init__(path, providers=[CPU], threads=threads)
        self.device = "cpu (float16 emulation)"

    def activate_impl(self) -> ModelSignature:
        if not self.path.is_file():
            raise InputError(f"ONNX model {self.path} does not exist.")
        emulated = emulate_float16(load_model(self.path))
        try:
            self.session = emulation_session(emulated, self.threads)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConversionError(
                f"ONNX Runtime could not load the float16 emulation of {self.path}: {first[:300]}"
            ) from exc
        return self.session_signature()
