"""Take what ONNX Runtime decided for its own CPU kernels back out of a model it optimized.

ONNX Runtime rewrites a graph in two stages when it creates a session: rewrites that hold on
every provider (the ``basic`` level: constant folding, redundant nodes, fusions into standard
ops), then decisions for the kernels of the provider it runs on. Saving the optimized model
freezes both; the second kind does not belong in a portable model.

Rules:
1. Precision casts. Where the CPU provider lacks a float16 or bfloat16 kernel, ORT runs the op
   in float32 between ``Cast`` nodes it names ``InsertedPrecisionFreeCast_*``, and renames the
   float32 copies of the tensors it casts. The casts go, and each tensor they split is one
   tensor again under its original name: the op runs in the model's own precision. A cast that
   joins two tensors of the original model cannot be one of these; the undo is then refused.
2. Expansions. A function op the provider has no kernel for (HardSwish, a float16 Softmax, a
   model-local function) is inlined into its body; ORT's layout rewrites turn
   ``Shape(Transpose(x))`` into ``Gather(Shape(x), perm)`` and keep the Transpose. An original
   node whose outputs ORT now computes with other ops is put back when every tensor it reads
   is still there and putting it back lowers the node count (ORT's way becomes dead code), or
   keeps it while it removes an op type the model did not have (``CastLike`` inlined as
   ``Cast``). A fusion is never undone: it removes the tensors the fused nodes read.
3. Model-local functions that a put-back node calls are restored to the model, with the
   functions they call.

Names identify values: ORT keeps every name it does not remove bound to the same value, so an
original node that reads surviving names computes what it computed before. Rule 1 is checked:
every float tensor the two models share must keep the original's element type.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

import onnx

from graphfix import graph as graph_layer
from graphfix.errors import first_line
from graphfix.graph import STANDARD_DOMAINS
from graphfix.model_io import same_tensor, skeleton

__all__ = ["Undone", "Unportable", "undo_provider_decisions", "op_types", "element_types"]

logger = logging.getLogger(__name__)

_CAST_PREFIX = "InsertedPrecisionFreeCast_"
_FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16})


class Unportable(Exception):
    """ORT's output holds a provider decision that cannot be taken back."""


@dataclasses.dataclass
class Undone:
    """What was taken back: inserted casts removed (rule 1), original nodes put back (rule 2)."""

    casts: int = 0
    restored: int = 0


def undo_provider_decisions(optimized: onnx.ModelProto, original: onnx.ModelProto) -> Undone:
    """Rules 1-3 on ``optimized`` (ORT's output for ``original``), in place."""
    undone = Undone()
    original_names = graph_layer.all_names(original.graph)
    for graph in graph_layer.graphs(optimized.graph):
        undone.casts += _remove_precision_casts(graph, original_names)
    if undone.casts:
        undone.restored += _restore_dropped_casts(optimized.graph, original.graph)
        _check_element_types(optimized, original)
    foreign = op_types(optimized) - op_types(original)
    expanded = _restore_expanded(optimized.graph, original.graph, outer=set(), foreign=foreign)
    undone.restored += expanded
    if expanded:
        _restore_functions(optimized, original)
    if optimized.functions:
        _rename_inlined(optimized, original_names)
    return undone


INLINED_PREFIX = "_inlfunc_"


def _rename_inlined(model: onnx.ModelProto, original_names: set[str]) -> None:
    """ORT names what it inlines from a local function ``_inlfunc_<function>_...``, and names it
    so again when it inlines the functions a model still calls at load: a tensor the first
    inlining left behind collides with the second ("already has tensor with name"). Such
    tensors get names of their own."""
    names = graph_layer.Names(graph_layer.all_names(model.graph) | original_names)
    rename = {
        name: names.fresh("inlined_" + name[len(INLINED_PREFIX):])
        for name in sorted(graph_layer.all_names(model.graph))
        if name.startswith(INLINED_PREFIX) and name not in original_names
    }
    if not rename:
        return
    for graph in graph_layer.graphs(model.graph):
        for tensor in (*graph.initializer, *graph.value_info):
            tensor.name = rename.get(tensor.name, tensor.name)
        for node in graph.node:
            for field in (node.input, node.output):
                for position, name in enumerate(field):
                    field[position] = rename.get(name, name)
            node.name = rename.get(node.name, node.name)


# ---------------------------------------------------------------- rule 1
def _is_inserted_cast(node: onnx.NodeProto) -> bool:
    if node.op_type != "Cast" or node.domain not in STANDARD_DOMAINS:
        return False
    to = next((a.i for a in node.attribute if a.name == "to"), None)
    return node.name.startswith(_CAST_PREFIX) and to in _FLOATS and len(node.input) == 1


def _remove_precision_casts(graph: onnx.GraphProto, original_names: set[str]) -> int:
    casts = [node for node in graph.node if _is_inserted_cast(node)]
    if not casts:
        return 0
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    def join(a: str, b: str) -> None:
        a, b = find(a), find(b)
        if a != b:
            parent[max(a, b)] = min(a, b)

    for cast in casts:
        join(cast.input[0], cast.output[0])
    # ORT names the float32 copy of a tensor X "InsertedPrecisionFreeCast_X", also where the op
    # reading it runs in float32 too and no Cast joins the two.
    for node in graph.node:
        for name in [*node.input, *node.output]:
            stripped = name
            while stripped.startswith(_CAST_PREFIX):
                stripped = stripped[len(_CAST_PREFIX):]
            if stripped != name and stripped:
                join(name, stripped)
    groups: dict[str, set[str]] = {}
    for name in list(parent):
        groups.setdefault(find(name), {find(name)}).add(name)
    rename: dict[str, str] = {}
    for members in groups.values():
        kept = sorted(name for name in members if name in original_names)
        if len(kept) > 1:
            raise Unportable(f"an inserted Cast joins two tensors of the model ({kept[:2]})")
        representative = kept[0] if kept else min(members, key=lambda n: (len(n), n))
        rename.update((name, representative) for name in members if name != representative)
    nodes = [node for node in graph.node if not _is_inserted_cast(node)]
    produced: set[str] = set()
    for node in nodes:
        for position, name in enumerate(node.output):
            if name in rename:
                node.output[position] = rename[name]
            if node.output[position] in produced:
                raise Unportable(f"tensor {node.output[position]!r} would have two producers")
            if node.output[position]:
                produced.add(node.output[position])
        graph_layer.rename_reads(node, rename)
    del graph.node[:]
    graph.node.extend(nodes)
    touched = set(rename) | set(rename.values())
    kept_info = [v for v in graph.value_info if v.name not in touched]
    del graph.value_info[:]
    graph.value_info.extend(kept_info)
    logger.debug("removed %d precision casts ORT inserted", len(casts))
    return len(casts)


def _restore_dropped_casts(optimized: onnx.GraphProto, original: onnx.GraphProto) -> int:
    """Rule 1, the other half: where an original Cast met an inserted one, ORT drops the pair
    and the reader reads the Cast's input (float32 where the model rounds to float16 first).
    Such a Cast is put back, and the readers ORT kept (the same node, by name) read it again."""
    available = graph_layer.defined_names(optimized)
    twins = {n.name: n for n in optimized.node if n.name}
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in original.node:
        for slot, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, slot))
    restored: list[onnx.NodeProto] = []
    for cast in original.node:
        if cast.op_type != "Cast" or cast.domain not in STANDARD_DOMAINS or len(cast.output) != 1:
            continue
        source, result = cast.input[0], cast.output[0]
        if result in available or source not in available:
            continue
        rewires = []
        for reader, slot in readers.get(result, []):
            twin = twins.get(reader.name)
            if twin is not None and twin.op_type == reader.op_type and slot < len(twin.input) and (
                twin.input[slot] == source
            ):
                rewires.append((twin, slot))
        if not rewires:
            continue
        for twin, slot in rewires:
            twin.input[slot] = result
        copy = onnx.NodeProto()
        copy.CopyFrom(cast)
        restored.append(copy)
    if restored:
        nodes = graph_layer.toposort([*optimized.node, *restored])
        del optimized.node[:]
        optimized.node.extend(nodes)
    return len(restored)


def _elem_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element types of the main graph's tensors, by ONNX's type inference alone (value infos
    and weights left out); a model whose types do not agree raises :class:`Unportable`."""
    bare = skeleton(model)
    for graph in graph_layer.graphs(bare.graph):
        del graph.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(bare, strict_mode=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as error:
        raise Unportable(f"its types do not agree ({first_line(error, limit=200)})") from None
    types: dict[str, int] = {}
    graph = inferred.graph
    for value in [*graph.input, *graph.output, *graph.value_info]:
        if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
            types[value.name] = value.type.tensor_type.elem_type
    for init in model.graph.initializer:
        types[init.name] = init.data_type
    return types


def _check_element_types(optimized: onnx.ModelProto, original: onnx.ModelProto) -> None:
    try:
        before = _elem_types(original)
    except Unportable:
        return  # the model's own types do not agree: nothing to compare with
    after = _elem_types(optimized)
    for name, elem_type in after.items():
        if before.get(name, elem_type) != elem_type and elem_type in _FLOATS:
            raise Unportable(
                f"tensor {name!r} is {onnx.TensorProto.DataType.Name(elem_type)} after the "
                f"precision casts are removed, "
                f"{onnx.TensorProto.DataType.Name(before[name])} in the model"
            )


# ---------------------------------------------------------------- rules 2 and 3
class _Liveness:
    """How many readers each tensor of one graph has left, which nodes are dead, and which
    names a put-back node now produces, under edits that are tried and taken back. A node is
    known by its position in the graph's node list (``nodes``), which the edits leave as it is
    until they are written back."""

    def __init__(self, graph: onnx.GraphProto, roots: set[str],
                 foreign: frozenset[tuple[str, str]] = frozenset()) -> None:
        self.foreign = foreign  # op types the original model does not have
        self.nodes = list(graph.node)
        index = graph_layer.Index(graph, self.nodes)
        self.readers = {name: len(nodes) for name, nodes in index.consumers.items()}
        for name in roots:
            self.readers[name] = self.readers.get(name, 0) + 1
        self.producer = {name: position for position, node in enumerate(self.nodes)
                         for name in node.output if name}
        self.dead: set[int] = set()  # positions
        self.taken: set[str] = set()  # produced by put-back nodes: ORT's producer lost them

    def _unread(self, node: onnx.NodeProto) -> bool:
        return all(
            name in self.taken or self.readers.get(name, 0) <= 0 for name in node.output if name
        )

    def try_restore(self, node: onnx.NodeProto) -> list[onnx.NodeProto] | None:
        """Put ``node`` back: the nodes that then die, or None (nothing changed) when that does
        not lower the node count."""
        saved: dict[str, int] = {}

        def read(name: str, delta: int) -> None:
            saved.setdefault(name, self.readers.get(name, 0))
            self.readers[name] = self.readers.get(name, 0) + delta

        outputs = [name for name in node.output if name]
        for name in graph_layer.reads(node):
            read(name, 1)
        self.taken.update(outputs)
        dying: list[int] = []  # positions
        seen: set[int] = set()
        queue = [self.producer[name] for name in outputs]
        while queue:
            position = queue.pop()
            candidate = self.nodes[position]
            if position in seen or position in self.dead or not self._unread(candidate):
                continue
            seen.add(position)
            dying.append(position)
            for name in graph_layer.reads(candidate):
                read(name, -1)
                producer = self.producer.get(name)
                if producer is not None:
                    queue.append(producer)
        if len(dying) < 1 or len(dying) == 1 and _op(self.nodes[dying[0]]) not in self.foreign:
            self.readers.update(saved)
            self.taken.difference_update(outputs)
            return None
        self.dead.update(dying)
        return [self.nodes[position] for position in dying]


def _reading(node: onnx.NodeProto, resolve: Callable[[str], str]) -> onnx.NodeProto:
    """A copy of ``node`` reading ``resolve(name)`` for each of its inputs."""
    copy = onnx.NodeProto()
    copy.CopyFrom(node)
    for position, name in enumerate(copy.input):
        if name:
            copy.input[position] = resolve(name)
    return copy


def _op(node: onnx.NodeProto) -> tuple[str, str]:
    return (node.domain or "ai.onnx", node.op_type)


def op_types(model: onnx.ModelProto) -> frozenset[tuple[str, str]]:
    """(domain, op type) of every node of ``model``: every graph and local function."""
    nodes = [*graph_layer.all_nodes(model.graph), *(n for f in model.functions for n in f.node)]
    return frozenset(_op(node) for node in nodes)


def element_types(model: onnx.ModelProto) -> frozenset[int]:
    """The element types ``model`` declares or computes with: its tensors (every graph's
    initializers, Constant values, inputs, outputs and value infos) and its Casts' targets."""
    found: set[int] = set()
    for graph in graph_layer.graphs(model.graph):
        found.update(t.data_type for t in graph.initializer)
        for value in (*graph.input, *graph.output, *graph.value_info):
            if value.type.HasField("tensor_type") and value.type.tensor_type.elem_type:
                found.add(value.type.tensor_type.elem_type)
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.TENSOR:
                    found.add(attribute.t.data_type)
                elif node.op_type == "Cast" and attribute.name == "to":
                    found.add(attribute.i)
    return frozenset(found)


def _same_op(a: onnx.NodeProto, b: onnx.NodeProto) -> bool:
    return a.op_type == b.op_type and (a.domain or "ai.onnx") == (b.domain or "ai.onnx")


def _restore_expanded(optimized: onnx.GraphProto, original: onnx.GraphProto, outer: set[str],
                      foreign: frozenset[tuple[str, str]]) -> int:
    roots = {o.name for o in optimized.output}
    live = _Liveness(optimized, roots, foreign)
    available = graph_layer.defined_names(optimized) | outer
    # ORT removes Identity and Dropout nodes and lets their readers read what they copied.
    aliases = {
        node.output[0]: node.input[0] for node in original.node
        if node.op_type in ("Identity", "Dropout") and node.domain in STANDARD_DOMAINS
        and node.input and node.output
    }

    def resolve(name: str) -> str:
        seen = set()
        while name not in available and name in aliases and name not in seen:
            seen.add(name)
            name = aliases[name]
        return name

    rebound = _Rebound(optimized, original)
    restored: list[onnx.NodeProto] = []
    for node in original.node:
        outputs = [name for name in node.output if name]
        if not outputs or node.op_type == "Constant":
            continue
        producers = [live.producer.get(name) for name in outputs]
        if any(p is None or p in live.dead for p in producers):
            continue
        if all(_same_op(live.nodes[p], node) for p in producers if p is not None):
            continue
        node = _reading(node, resolve)
        reads = graph_layer.reads(node)
        if any(name not in available or rebound(name) for name in reads) or any(
            live.producer[name] in live.dead
            for name in reads if name in live.producer and name not in live.taken
        ):
            continue
        dying = live.try_restore(node)
        if dying is None:
            continue
        restored.append(node)
        logger.debug("put back %s %r in place of %d nodes ORT wrote", node.op_type,
                     node.name, len(dying))
    if restored:
        kept = [n for position, n in enumerate(live.nodes) if position not in live.dead]
        # A dying producer's other outputs are unread: nothing else is lost with it.
        nodes = graph_layer.toposort(kept + restored)
        del optimized.node[:]
        optimized.node.extend(nodes)
        graph_layer.drop_unread_initializers(optimized)
    count = len(restored)
    # Bodies of nodes present in both graphs (same op, same outputs) get the same treatment.
    by_output = {n.output[0]: n for n in original.node if n.output and n.output[0]}
    scope = outer | graph_layer.defined_names(optimized)
    for node in optimized.node:
        twin = by_output.get(node.output[0]) if node.output else None
        if twin is None or not _same_op(twin, node):
            continue
        # by attribute: ONNX Runtime writes an If's else_branch first
        for sub, twin_sub in graph_layer.paired_subgraphs(node, twin):
            count += _restore_expanded(sub, twin_sub, scope, foreign)
    return count


class _Rebound:
    """Whether ORT rewrote a constant in place under its own name: its transpose optimizer
    transposes a constant it pushes a Transpose through (rotary tables, ``q * cos``) and
    keeps the name. An original node put back must not read such a name: it would compute
    with the rewritten values, or not load at all."""

    def __init__(self, optimized: onnx.GraphProto, original: onnx.GraphProto) -> None:
        self.now = {t.name: t for t in optimized.initializer}
        self.before = {t.name: t for t in original.initializer}
        self.declared = {v.name: v for v in original.value_info}
        self.known: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        if name not in self.known:
            self.known[name] = self._rebound(name)
        return self.known[name]

    def _rebound(self, name: str) -> bool:
        tensor = self.now.get(name)
        if tensor is None:
            return False
        old = self.before.get(name)
        if old is None:  # folded by ORT: its shape must be the one the original declares
            value = self.declared.get(name)
            dims = value.type.tensor_type.shape.dim if value is not None else []
            if not dims or not all(d.HasField("dim_value") for d in dims):
                return False
            return [d.dim_value for d in dims] != list(tensor.dims)
        return not same_tensor(old, tensor)


def _restore_functions(optimized: onnx.ModelProto, original: onnx.ModelProto) -> None:
    """Rule 3: the original's local functions that the optimized model calls, transitively."""
    functions = {(f.domain, f.name): f for f in original.functions}
    if not functions:
        return
    wanted: list[tuple[str, str]] = []
    pending = [(n.domain, n.op_type) for n in graph_layer.all_nodes(optimized.graph)]
    while pending:
        key = pending.pop()
        if key in functions and key not in wanted:
            wanted.append(key)
            pending.extend((n.domain, n.op_type) for n in functions[key].node)
    present = {(f.domain, f.name) for f in optimized.functions}
    for key in sorted(wanted):
        if key not in present:
            optimized.functions.add().CopyFrom(functions[key])
    imported = {o.domain for o in optimized.opset_import}
    for opset in original.opset_import:
        if opset.domain not in imported:
            optimized.opset_import.add().CopyFrom(opset)
