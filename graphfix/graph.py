"""The graph layer every pass and engine module shares: walking graphs, counting nodes, the
producer/consumer index, dead code, topological order and fresh names.

A model's graphs are its main graph and every graph held in a node attribute (If branches,
Loop and Scan bodies), at any depth; its functions are the model-local ``FunctionProto`` s.
A node count is the size of the model as a user sees it: the nodes of every graph, plus the
nodes of every local function's body once (a call is one node wherever it stands), so a
rewrite that inlines a function called twice counts as growth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, Union

import google.protobuf.message
import numpy as np
import onnx
from onnx import numpy_helper

from graphfix.errors import ValidationInputError

__all__ = [
    "copy_without",
    "default_inputs",
    "fix_input_shapes",
    "subgraphs",
    "holds_graph",
    "graphs",
    "graphs_bottom_up",
    "all_nodes",
    "count_nodes",
    "outer_refs",
    "defined_names",
    "all_names",
    "Names",
    "reads",
    "rename_reads",
    "shorten_new_names",
    "Index",
    "live_nodes",
    "toposort",
    "sort_nodes",
    "CycleError",
    "Snapshot",
    "Dim",
    "dims",
    "dim_of",
    "UnknownDims",
    "clear_unknown_dims",
    "forget_declared_shapes",
    "STANDARD_DOMAINS",
    "ONNX_DOMAINS",
    "attribute",
    "constant_tensor",
    "is_random",
    "STEPS",
    "is_step",
    "before_steps",
    "run_time_steps",
    "run_time_quantizers",
    "is_quantizer",
]

# The default operator set, ai.onnx, as a node names it ("" or "ai.onnx").
STANDARD_DOMAINS = ("", "ai.onnx")
# Every domain ONNX itself defines (ai.onnx and ai.onnx.ml): ops any runtime of the opset has.
ONNX_DOMAINS = (*STANDARD_DOMAINS, "ai.onnx.ml")


def attribute(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    """The value of ``node``'s attribute ``name`` as Python holds it (an int, a float, bytes, a
    list, a TensorProto, a GraphProto), or ``default`` when the node has none."""
    for item in node.attribute:
        if item.name == name:
            # ints and int lists read directly: the transposes' look-ahead reads perm, axis and
            # axes at every step
            if item.type == onnx.AttributeProto.INT:
                return item.i
            if item.type == onnx.AttributeProto.INTS:
                return list(item.ints)
            return onnx.helper.get_attribute_value(item)
    return default


# Ops that draw random numbers: two of them with the same inputs are not one value.
_RANDOM_OPS = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform",
                         "RandomUniformLike", "Bernoulli", "Multinomial"})
# ONNX Runtime's training dropouts: random whenever they run.
_RANDOM_CONTRIB = frozenset({"BiasDropout", "BitmaskDropout", "BitmaskBiasDropout"})


def constant_tensor(node: onnx.NodeProto) -> onnx.TensorProto | None:
    """A Constant node's float or tensor value as a tensor (``value``, ``value_float``,
    ``value_floats``); None for its other forms (integers, strings, a sparse tensor)."""
    for attr in node.attribute:
        if attr.name == "value":
            return attr.t
        if attr.name == "value_float":
            return numpy_helper.from_array(np.array(attr.f, np.float32))
        if attr.name == "value_floats":
            return numpy_helper.from_array(np.array(list(attr.floats), np.float32))
    return None


def is_random(node: onnx.NodeProto) -> bool:
    """Whether ``node`` may draw random numbers: the Random* ops, Bernoulli, Multinomial, and a
    Dropout that may run in training mode (given a ``training_mode`` input, whatever its value,
    or before opset 7 with ``is_test`` 0); ONNX Runtime's training dropouts."""
    if node.domain in STANDARD_DOMAINS:
        if node.op_type in _RANDOM_OPS:
            return True
        if node.op_type == "Dropout":
            return (len(node.input) > 2 and bool(node.input[2])) or attribute(
                node, "is_test", 1) == 0
        return False
    return node.domain == "com.microsoft" and node.op_type in _RANDOM_CONTRIB


# Ops whose output steps through many levels of a float input (a quantizer's, a rounding's), by
# domain: a last-bit change in that input (a sum added in another order) moves some elements
# by a whole step (one quantization level), however small the change. Cast is one where it
# casts to an integer or bool; ONNX Runtime's MatMulNBits where its accuracy_level 4 quantizes
# its float input to int8 blocks (checked in :func:`is_step`). Single-threshold tests (Greater,
# Equal, ArgMax) are not: a last bit moves them only on inputs within a bit of the threshold.
STEPS = {
    "": frozenset({"Ceil", "DynamicQuantizeLinear", "Floor", "QuantizeLinear", "Round"}),
    "com.microsoft": frozenset({"DynamicQuantizeLSTM", "DynamicQuantizeMatMul", "QAttention",
                                "QuantizeLinear"}),
}
_FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                          onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16})
_INT8_COMPUTE = 4  # MatMulNBits' accuracy_level that quantizes its input (CompInt8)


def is_step(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is a step (:data:`STEPS`): its output moves by a whole level where a
    last bit of its float input changes."""
    if node.domain in STANDARD_DOMAINS:
        if node.op_type == "Cast":
            return attribute(node, "to", 0) not in _FLOAT_TYPES
        return node.op_type in STEPS[""]
    if node.domain == "com.microsoft" and node.op_type == "MatMulNBits":
        return attribute(node, "accuracy_level", 0) == _INT8_COMPUTE
    return node.op_type in STEPS.get(node.domain, ())


def before_steps(graph: onnx.GraphProto) -> frozenset[str]:
    """The tensors of ``graph`` and its subgraphs that a step reads (a quantizer, a rounding:
    :func:`is_step`), directly or through any op but Shape and Size: where a rewrite adds a
    sum in another order, its last bits cross a step's thresholds on some elements and move
    an output by a whole step (one quantization level of a quantized model). A node holding
    subgraphs passes it on to everything it reads, its bodies' outer-scope reads included,
    where a step is inside or after it."""
    found: set[str] = set()

    def visit(g: onnx.GraphProto, outer: bool) -> bool:
        """One pass over ``g``, last node first; whether ``g`` holds a step (``outer``: the
        outputs of ``g`` are read by one)."""
        if outer:
            found.update(o.name for o in g.output)
        stepped = False
        for node in reversed(g.node):
            bodies = list(subgraphs(node))
            after = any(o in found for o in node.output)
            inside = any([visit(body, after) for body in bodies])
            step = inside or is_step(node)
            stepped = stepped or step
            if (after or step) and not (
                    node.op_type in ("Shape", "Size") and node.domain in STANDARD_DOMAINS):
                found.update(reads(node))  # Shape and Size read no value
        return stepped

    # A graph's nodes are in order, so one pass reaches every tensor before a step; a second
    # settles bodies whose outputs a later pass marked.
    size = -1
    while size != len(found):
        size = len(found)
        visit(graph, False)
    found.discard("")
    return frozenset(found)


def run_time_steps(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The steps of ``graph`` and its subgraphs (:func:`is_step`) that read a value computed at
    run time from the values of the graph's inputs, not only from weights or from shapes (a
    Shape or Size reads no value): a quantizer of activations, a rounding of a computed value.
    On such a model a rewrite's last bits move outputs by whole levels on some inputs, and one
    set of inputs shows it only by chance."""
    computed = {value.name for g in graphs(graph) for value in g.input} - {
        init.name for g in graphs(graph) for init in g.initializer}
    steps = []
    changed = True
    while changed:  # bodies read outer names: settle until nothing new is computed
        changed = False
        for g in graphs(graph):
            for node in g.node:
                if node.op_type in ("Shape", "Size") and node.domain in STANDARD_DOMAINS:
                    continue
                if any(name in computed for name in reads(node)):
                    new = [o for o in node.output if o and o not in computed]
                    if new:
                        computed.update(new)
                        changed = True
                    for body in subgraphs(node):
                        inner = {v.name for v in body.input} - computed
                        if inner:
                            computed.update(inner)
                            changed = True
    # A Cast is a step from a float type only: an int64 mask cast to bool moves no level. Its
    # input's type as the graph declares it (none declared: not counted).
    declared = {value.name: value.type.tensor_type.elem_type for g in graphs(graph)
                for value in (*g.input, *g.value_info, *g.output)}
    for g in graphs(graph):
        for node in g.node:
            if not (is_step(node) and node.input and node.input[0] in computed):
                continue
            if node.op_type == "Cast" and declared.get(node.input[0]) not in _FLOAT_TYPES:
                continue
            steps.append(node)
    return steps


_ROUNDINGS = frozenset({"Cast", "Ceil", "Floor", "Round"})


def is_quantizer(node: onnx.NodeProto) -> bool:
    """Whether a step (:func:`is_step`) is a quantizer, not a rounding or an integer cast."""
    return is_step(node) and not (node.op_type in _ROUNDINGS and node.domain in STANDARD_DOMAINS)


def run_time_quantizers(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """The quantizers among :func:`run_time_steps`: the nodes that make a model quantized at
    run time (activation quantizers, dynamic quantization, a MatMulNBits computing in int8)."""
    return [n for n in run_time_steps(graph) if is_quantizer(n)]


def subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    """The graphs held by ``node``'s attributes (If branches, Loop/Scan bodies)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def paired_subgraphs(node: onnx.NodeProto, twin: onnx.NodeProto
                     ) -> Iterator[tuple[onnx.GraphProto, onnx.GraphProto]]:
    """The graphs of ``node`` with ``twin``'s that stand in the same place: the same attribute
    (an If's ``then_branch`` with the other's ``then_branch``, whatever order the attributes
    are written in), the same position in a list of graphs."""
    theirs = _graphs_by_place(twin)
    for place, graph in _graphs_by_place(node).items():
        if place in theirs:
            yield graph, theirs[place]


def _graphs_by_place(node: onnx.NodeProto) -> dict[tuple[str, int], onnx.GraphProto]:
    places: dict[tuple[str, int], onnx.GraphProto] = {}
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            places[(attr.name, 0)] = attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            places.update(((attr.name, index), g) for index, g in enumerate(attr.graphs))
    return places


_GRAPH_ATTRIBUTES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def holds_graph(node: onnx.NodeProto) -> bool:
    """Whether ``node`` holds a subgraph (If, Loop, Scan): read off the attribute types, as
    cheap as a passes' hot loop needs."""
    return any(attr.type in _GRAPH_ATTRIBUTES for attr in node.attribute)


def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph in it, depth first, outer graphs before their bodies."""
    yield graph
    for node in graph.node:
        for sub in subgraphs(node):
            yield from graphs(sub)


def graphs_bottom_up(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph in it, each body before the graph that holds it."""
    for node in graph.node:
        for sub in subgraphs(node):
            yield from graphs_bottom_up(sub)
    yield graph


def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The nodes of ``graph`` and of every subgraph in it."""
    for g in graphs(graph):
        yield from g.node


def count_nodes(model: onnx.ModelProto | onnx.GraphProto) -> int:
    """Nodes of every graph, plus those of every local function's body (counted once)."""
    if isinstance(model, onnx.GraphProto):
        return sum(1 for _ in all_nodes(model))
    count = sum(1 for _ in all_nodes(model.graph))
    for function in model.functions:
        for node in function.node:
            count += 1 + sum(1 for sub in subgraphs(node) for _ in all_nodes(sub))
    return count


def defined_names(graph: onnx.GraphProto) -> set[str]:
    """The names ``graph`` itself defines: inputs, initializers and node outputs."""
    defined = {i.name for i in graph.input}
    defined.update(i.name for i in graph.initializer)
    defined.update(s.values.name for s in graph.sparse_initializer)
    for node in graph.node:
        defined.update(name for name in node.output if name)
    return defined


def outer_refs(graph: onnx.GraphProto) -> set[str]:
    """Names a (sub)graph reads from enclosing scopes, its own bodies' reads included."""
    defined = defined_names(graph)
    refs: set[str] = set()
    for node in graph.node:
        refs.update(name for name in node.input if name and name not in defined)
        for sub in subgraphs(node):
            refs.update(outer_refs(sub) - defined)
    refs.update(o.name for o in graph.output if o.name not in defined)
    return refs


def all_names(graph: onnx.GraphProto) -> set[str]:
    """Every tensor and node name used anywhere in ``graph`` and its subgraphs."""
    names: set[str] = set()
    for g in graphs(graph):
        names.update(i.name for i in g.input)
        names.update(o.name for o in g.output)
        names.update(v.name for v in g.value_info)
        names.update(i.name for i in g.initializer)
        for node in g.node:
            names.update(node.input)
            names.update(node.output)
            if node.name:
                names.add(node.name)
    return names


def reads(node: onnx.NodeProto) -> list[str]:
    """What ``node`` reads: its inputs, and the outer names its bodies read."""
    names = [name for name in node.input if name]
    for sub in subgraphs(node):
        names += sorted(outer_refs(sub))
    return names


def rename_reads(node: onnx.NodeProto, rename: dict[str, str], *,
                 bodies_only: bool = False) -> None:
    """Make ``node`` read ``rename[name]`` wherever it read ``name``, in its bodies too (where a
    body does not define the name itself); ``bodies_only``: in its bodies alone."""
    for position, name in enumerate(node.input):
        if name in rename and not bodies_only:
            node.input[position] = rename[name]
    for sub in subgraphs(node):
        shadowed = defined_names(sub)
        reads = outer_refs(sub)
        inner = {k: v for k, v in rename.items() if k in reads}
        if not inner:
            continue
        # A body that defines a name a read is renamed to would capture the read: its own
        # value of that name takes a fresh name first (within the body, where it is seen).
        captured = sorted(set(inner.values()) & shadowed)
        if captured:
            taken = Names(all_names(sub) | set(inner) | set(inner.values()))
            rename_values(sub, {name: taken.fresh(f"{name}_inner") for name in captured})
        for body_node in sub.node:
            rename_reads(body_node, inner)
        for output in sub.output:
            if output.name in inner:
                output.name = inner[output.name]


def rename_values(graph: onnx.GraphProto, rename: Mapping[str, str]) -> None:
    """Give the values ``graph`` defines the names ``rename`` maps them to: their definitions
    (inputs, initializers, node outputs), declarations (outputs, ``value_info``, quantization
    annotations, the types bodies declare for them) and every read, in bodies that see them."""
    rename = dict(rename)
    for values in (graph.input, graph.output, graph.value_info):
        for value in values:
            value.name = rename.get(value.name, value.name)
    for tensor in graph.initializer:
        tensor.name = rename.get(tensor.name, tensor.name)
    for sparse in graph.sparse_initializer:
        sparse.values.name = rename.get(sparse.values.name, sparse.values.name)
    for annotation in graph.quantization_annotation:
        annotation.tensor_name = rename.get(annotation.tensor_name, annotation.tensor_name)
    for node in graph.node:
        rename_reads(node, rename)
        for slot, name in enumerate(node.output):
            if name in rename:
                node.output[slot] = rename[name]
        for sub in subgraphs(node):  # a body's types of the outer names it reads
            _rename_outer_types(sub, rename)


def shorten_new_names(graph: onnx.GraphProto, known: set[str]) -> int:
    """Names in the main graph that are not in ``known`` (those a rewrite made: ``w_folded``,
    ``Shape_0``): node names go, in bodies too (and every node's empty name, domain and doc string written out
    as empty fields), and tensors (not the graph's inputs or outputs) get the shortest
    names free (``0``, ``1``, ... ``z``, ``10``), read so in bodies too. Returns the bytes of
    names saved. Names are optional for nodes and free for tensors: nothing computes
    differently."""
    taken = all_names(graph)
    saved = 0
    for node in all_nodes(graph):  # bodies too: onnxsim names the nodes of a Loop's body
        if node.name and node.name not in known:
            saved += len(node.name.encode())
            node.name = ""
    for node in all_nodes(graph):  # an empty field written out costs its tag and length
        for field in ("name", "domain", "doc_string"):
            if node.HasField(field) and not getattr(node, field):
                node.ClearField(field)
                saved += 2
    fixed = {v.name for v in graph.input} | {v.name for v in graph.output}
    for annotation in graph.quantization_annotation:  # they name tensors and parameters
        fixed.add(annotation.tensor_name)
        fixed.update(entry.value for entry in annotation.quant_parameter_tensor_names)
    taken.update(t.values.name for g in graphs(graph) for t in g.sparse_initializer)
    new = [t.name for t in graph.initializer if t.name not in known and t.name not in fixed]
    new += [name for node in graph.node for name in node.output
            if name and name not in known and name not in fixed]
    counter = 0
    rename: dict[str, str] = {}
    for name in dict.fromkeys(new):
        while True:
            short = np.base_repr(counter, 36).lower()
            counter += 1
            if short not in taken:
                break
        if len(short) >= len(name):
            continue
        taken.add(short)
        rename[name] = short
        saved += len(name.encode()) - len(short)
    if rename:
        rename_values(graph, rename)
    return saved


def _rename_outer_types(graph: onnx.GraphProto, rename: dict[str, str]) -> None:
    """The ``value_info`` entries of ``graph`` and its bodies for outer names renamed by
    ``rename`` (those the graph does not define itself)."""
    inner = {k: v for k, v in rename.items() if k not in defined_names(graph)}
    if not inner:
        return
    for value in graph.value_info:
        value.name = inner.get(value.name, value.name)
    for node in graph.node:
        for sub in subgraphs(node):
            _rename_outer_types(sub, inner)


class Names:
    """Fresh names that collide with none in use: ``fresh("x")`` gives x, x_1, x_2, ..."""

    def __init__(self, taken: Iterable[str]) -> None:
        self._taken = set(taken)
        self._next: dict[str, int] = {}

    def fresh(self, base: str) -> str:
        if base not in self._taken:
            self._taken.add(base)
            return base
        n = self._next.get(base, 1)
        candidate = f"{base}_{n}"
        while candidate in self._taken:
            n += 1
            candidate = f"{base}_{n}"
        self._next[base] = n + 1
        self._taken.add(candidate)
        return candidate

    def take(self, name: str) -> None:
        self._taken.add(name)


class Index:
    """Who produces and who reads each tensor of one graph, kept up to date by the edits made
    through it. A node whose body reads a tensor from this scope counts as its reader
    (``implicit`` names those tensors)."""

    def __init__(self, graph: onnx.GraphProto,
                 nodes: Sequence[onnx.NodeProto] | None = None) -> None:
        self.producer: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, dict[int, onnx.NodeProto]] = {}
        self.implicit: dict[str, set[int]] = {}
        self.inputs = {i.name for i in graph.input}
        self.outputs = {o.name for o in graph.output}
        self.initializers = {i.name for i in graph.initializer}
        for node in graph.node if nodes is None else nodes:
            self.add(node)

    def readers(self, name: str) -> list[onnx.NodeProto]:
        return list(self.consumers.get(name, {}).values())

    def is_read(self, name: str) -> bool:
        """Whether a node or the graph's outputs read ``name``."""
        return bool(self.consumers.get(name)) or name in self.outputs

    def only_reader(self, name: str, node: onnx.NodeProto) -> bool:
        """Whether ``node`` alone reads ``name`` (and it is no graph output)."""
        users = self.consumers.get(name, {})
        return list(users) == [id(node)] and name not in self.outputs

    def add(self, node: onnx.NodeProto) -> None:
        for name in node.output:
            if name:
                self.producer[name] = node
        for name in node.input:
            if name:
                self.consumers.setdefault(name, {})[id(node)] = node
        for sub in subgraphs(node):
            for name in outer_refs(sub):
                self.consumers.setdefault(name, {})[id(node)] = node
                self.implicit.setdefault(name, set()).add(id(node))

    def remove(self, node: onnx.NodeProto) -> None:
        for name in node.output:
            if self.producer.get(name) is node:
                del self.producer[name]
        for name in set(reads(node)):
            self.consumers.get(name, {}).pop(id(node), None)

    def set_input(self, node: onnx.NodeProto, slot: int, name: str) -> str:
        """Make ``node`` read ``name`` at input ``slot``; returns what it read there."""
        old = node.input[slot]
        node.input[slot] = name
        if name:
            self.consumers.setdefault(name, {})[id(node)] = node
        if old and old not in node.input:
            self.consumers.get(old, {}).pop(id(node), None)
        return old

    def set_output(self, node: onnx.NodeProto, slot: int, name: str) -> str:
        """Make ``node`` write ``name`` at output ``slot``; returns what it wrote there."""
        old = node.output[slot]
        node.output[slot] = name
        if self.producer.get(old) is node:
            del self.producer[old]
        if name:
            self.producer[name] = node
        return old


def default_inputs(model: onnx.ModelProto) -> list[str]:
    """The main-graph inputs of ``model`` that have a default value (an initializer), which a
    caller may override at run time, as ONNX Runtime allows: from IR 4; before, every
    initializer is listed as an input and is a weight, none such an input."""
    if 0 < model.ir_version < 4:
        return []
    initializers = {t.name for t in model.graph.initializer}
    return [value.name for value in model.graph.input if value.name in initializers]


def keep_only(items: Any, keep: Callable[[Any], bool]) -> int:
    """Delete from the repeated field ``items``, in place and in order, every element ``keep``
    rejects; returns how many went. What stays is not copied (``del items[:]`` then
    ``extend(kept)`` copies every kept message, weights included). ``keep`` judges elements by
    their contents: to drop nodes chosen by identity, use :func:`delete_positions`."""
    return delete_positions(items, [i for i, item in enumerate(items) if not keep(item)])


def delete_positions(items: Any, positions: Iterable[int]) -> int:
    """Delete the elements at ``positions`` from the repeated field ``items``, in place; returns
    how many went. Positions, not ``id()``: protobuf makes a new Python object for an element
    each time one is asked for once the last was freed, and a freed object's id is reused."""
    gone = sorted(set(positions), reverse=True)
    for position in gone:
        del items[position]
    return len(gone)


def drop_unread_initializers(graph: onnx.GraphProto) -> int:
    """Drop, in place, the initializers of ``graph`` that no node (or body) reads, no graph
    output names and no graph input lists; returns how many went."""
    read = {name for node in graph.node for name in reads(node)} | {o.name for o in graph.output}
    listed = {i.name for i in graph.input}
    return keep_only(graph.initializer, lambda t: t.name in read or t.name in listed)


def live_nodes(
    nodes: Sequence[onnx.NodeProto], roots: Iterable[str]
) -> list[onnx.NodeProto]:
    """The nodes of ``nodes`` whose results reach ``roots`` (graph outputs, names read from
    inside bodies), in their order; the others are dead code."""
    producer: dict[str, int] = {}
    for position, node in enumerate(nodes):
        for name in node.output:
            if name:
                producer[name] = position
    live: set[int] = set()
    stack = [producer[name] for name in roots if name in producer]
    while stack:
        position = stack.pop()
        if position in live:
            continue
        live.add(position)
        node = nodes[position]
        reads = [name for name in node.input if name]
        for sub in subgraphs(node):
            reads += outer_refs(sub)
        stack.extend(producer[name] for name in reads if name in producer)
    return [node for position, node in enumerate(nodes) if position in live]


class CycleError(ValueError):
    """The nodes cannot be ordered: one of them depends on its own result."""


def toposort(nodes: Sequence[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """``nodes`` in an order where every node follows the producers of what it reads (its
    bodies' outer reads included): depth first, each node pulling its producers before it, so
    an order that already is one stays as it is. Names no node of ``nodes`` produces (graph
    inputs, initializers, outer scopes) need no order."""
    producer = {name: n for n in nodes for name in n.output if name}
    needs: dict[int, list[onnx.NodeProto]] = {
        id(node): [producer[name] for name in reads(node) if name in producer] for node in nodes
    }
    emitted: set[int] = set()
    ordered: list[onnx.NodeProto] = []
    for root in nodes:
        if id(root) in emitted:
            continue
        stack: list[tuple[onnx.NodeProto, int]] = [(root, 0)]
        on_stack = {id(root)}
        while stack:
            node, index = stack[-1]
            deps = needs[id(node)]
            if index < len(deps):
                stack[-1] = (node, index + 1)
                dep = deps[index]
                if id(dep) in on_stack:
                    raise CycleError(f"node {node.name or node.op_type!r} depends on its own "
                                     "result")
                if id(dep) not in emitted:
                    stack.append((dep, 0))
                    on_stack.add(id(dep))
                continue
            stack.pop()
            on_stack.discard(id(node))
            emitted.add(id(node))
            ordered.append(node)
    return ordered


def sort_nodes(graph: onnx.GraphProto) -> int:
    """Put the nodes of ``graph`` and of every body in it in topological order, as ONNX
    requires (ONNX Runtime sorts a graph itself; onnx.checker and onnxsim refuse one that is
    not); an order that already is one stays. Returns how many graphs were reordered; raises
    :class:`CycleError` on a cycle."""
    moved = 0
    for g in graphs_bottom_up(graph):
        ordered = toposort(list(g.node))
        if [id(n) for n in ordered] != [id(n) for n in g.node]:
            del g.node[:]
            g.node.extend(ordered)
            moved += 1
    return moved


# ---------------------------------------------------------------- dimensions
# A dimension is a size, a name, or unknown (None). PaddlePaddle's exporter and old tf2onnx
# write an unknown dimension as ``dim_value: -1``: that is unknown, never a size.
Dim = Union[int, str, None]


def dim_of(dim: onnx.TensorShapeProto.Dimension) -> Dim:
    """A size (>= 0), a symbol, or None: a negative ``dim_value`` (``-1``) and an empty
    dimension are unknown."""
    if dim.HasField("dim_value"):
        return dim.dim_value if dim.dim_value >= 0 else None
    return dim.dim_param or None


def dims(value: onnx.ValueInfoProto | onnx.TypeProto) -> tuple[Dim, ...] | None:
    """The dimensions of a tensor value (see :func:`dim_of`), or None when its rank is
    unknown or it is not a tensor."""
    vtype = value.type if isinstance(value, onnx.ValueInfoProto) else value
    if not vtype.HasField("tensor_type") or not vtype.tensor_type.HasField("shape"):
        return None
    return tuple(dim_of(d) for d in vtype.tensor_type.shape.dim)


def forget_declared_shapes(graph: onnx.GraphProto) -> None:
    """Drop what ``graph`` only declares about its tensors (``value_info``, the outputs'
    shapes; element types stay), in place, so that shape inference proves every shape from the
    inputs and the ops. A declaration can be stale (an output shape traced at one size, a test
    model's expected shape): a shape fact that a rewrite builds on must not come from one."""
    del graph.value_info[:]
    for output in graph.output:
        if output.type.HasField("tensor_type"):
            output.type.tensor_type.ClearField("shape")


@dataclasses.dataclass
class UnknownDims:
    """Where a model's signature wrote unknown dimensions as negative sizes: (input or output
    name, axis, value), so :meth:`restore` can write them back the same way."""

    written: list[tuple[str, int, int]] = dataclasses.field(default_factory=list)

    def restore(self, model: onnx.ModelProto) -> None:
        """Write the negative sizes back on the signature where a dimension is still unknown."""
        if not self.written:
            return
        values = {v.name: v for v in [*model.graph.input, *model.graph.output]}
        for name, axis, value in self.written:
            info = values.get(name)
            if info is None or not info.type.HasField("tensor_type"):
                continue
            shape = info.type.tensor_type.shape.dim
            if axis < len(shape) and not shape[axis].HasField("dim_value") and not (
                shape[axis].dim_param
            ):
                shape[axis].dim_value = value


def clear_unknown_dims(model: onnx.ModelProto) -> UnknownDims:
    """Make every negative size in ``model``'s value infos (every graph) an unknown dimension,
    so that no tool reads ``-1`` as a size (onnxsim folds ``Shape`` of such an input into a
    Reshape target with two -1s); returns what the signature said, for
    :meth:`UnknownDims.restore`."""
    record = UnknownDims()
    for position, graph in enumerate(graphs(model.graph)):
        signature = position == 0  # the main graph comes first
        for kind, infos in (("io", [*graph.input, *graph.output]), ("info", graph.value_info)):
            for info in infos:
                if not info.type.HasField("tensor_type"):
                    continue
                for axis, dim in enumerate(info.type.tensor_type.shape.dim):
                    if dim.HasField("dim_value") and dim.dim_value < 0:
                        if signature and kind == "io":
                            record.written.append((info.name, axis, dim.dim_value))
                        dim.ClearField("dim_value")
    return record


_M = TypeVar("_M", bound=google.protobuf.message.Message)


def _is_repeated(field: Any) -> bool:
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return field.label == field.LABEL_REPEATED


def copy_without(message: _M, without: frozenset[str]) -> _M:
    """A copy of ``message`` without the fields named in ``without``. Those are never read:
    reading ``raw_data`` copies it."""
    shell = type(message)()
    for field in message.DESCRIPTOR.fields:
        name = field.name
        if name in without:
            continue
        if _is_repeated(field):
            values = getattr(message, name)
            if len(values):
                getattr(shell, name).extend(values)
        elif message.HasField(name):  # ONNX is proto2: every singular field has presence
            if field.message_type is not None:
                getattr(shell, name).CopyFrom(getattr(message, name))
            else:
                setattr(shell, name, getattr(message, name))
    return shell


class Snapshot:
    """A model's structure before a pass rewrites it in place, so that the rewrite can be taken
    back. The graph's nodes, signature and value infos are copied; its initializers are kept
    by reference, not copied (a pass may add or drop an initializer, never change one in
    place): taking a snapshot costs about as much as copying the nodes."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self._model = copy_without(model, frozenset({"graph"}))
        self._graph = copy_without(model.graph, frozenset({"initializer"}))
        self._initializers = list(model.graph.initializer)

    def restore(self, model: onnx.ModelProto) -> None:
        """Make ``model`` what it was when the snapshot was taken."""
        model.CopyFrom(self._model)
        model.graph.CopyFrom(self._graph)
        model.graph.initializer.extend(self._initializers)


def fix_input_shapes(
    model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]] | None
) -> list[str]:
    """Give the named inputs of ``model`` the sizes of ``shapes`` (in place); returns one line
    per dimension that became static. A name the model does not take, another rank, or a size
    that contradicts a static one is refused."""
    if not shapes:
        return []
    initializers = {t.name for t in model.graph.initializer}
    inputs = {v.name: v for v in model.graph.input if v.name not in initializers}
    lines = []
    for name, sizes in shapes.items():
        value = inputs.get(name)
        if value is None:
            raise ValidationInputError(
                f"a shape is given for {name!r}, which the model does not take as input",
                hint=f"its inputs are {', '.join(map(repr, inputs)) or 'none'}")
        declared = dims(value)
        if declared is not None and len(declared) != len(sizes):
            raise ValidationInputError(
                f"the shape given for {name!r} has {len(sizes)} dimensions; the input has "
                f"{len(declared)} ({_format(declared)})")
        if declared is None or not value.type.HasField("tensor_type"):
            continue
        for axis, (dim, size) in enumerate(zip(value.type.tensor_type.shape.dim, sizes)):
            before = dim_of(dim)
            if isinstance(before, int):
                if before != size:
                    raise ValidationInputError(
                        f"the shape given for {name!r} has {size} on axis {axis}, where the "
                        f"input's size is {before} ({_format(declared)})")
                continue
            dim.Clear()
            dim.dim_value = int(size)
            lines.append(f"dimension {axis} of {name!r} ({before or '?'}) is now static: {size}")
    return lines


def check_input_shapes(model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]] | None,
                       label: str) -> None:
    """Refuse, as :func:`fix_input_shapes` would (``label`` first: what gave them), sizes that
    ``model``'s inputs cannot take; ``model`` is not changed."""
    if not shapes:
        return
    probe = onnx.ModelProto()
    probe.graph.input.extend(model.graph.input)
    probe.graph.initializer.extend(onnx.TensorProto(name=t.name) for t in model.graph.initializer)
    try:
        fix_input_shapes(probe, shapes)
    except ValidationInputError as err:
        raise ValidationInputError(f"{label}: {err.args[0]}", hint=err.hint) from None


def _format(dims: Sequence[Any]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"
