"""fold-shapes: fold the shape arithmetic that the model's symbolic dimensions prove.

    Reshape(x[b,s,768], Concat(Shape(x)[0], Shape(x)[1], [12, 64]))  =>  Reshape(x, [0, 0, 12, 64])
    Where(Equal(Shape(x), -1), 1, Shape(x))                          =>  Shape(x)
    Expand(x[b,1,s], Concat(Shape(x)[0], [4], Shape(x)[2]))          =>  Expand(x, [1, 4, 1])

Exporters compute every Reshape and Expand target at run time from ``Shape``, so a model with
dynamic batch and sequence axes carries chains of ``Shape -> Gather -> Unsqueeze -> Concat``
(and ``Equal``/``Where`` guards against -1) that constant folding cannot touch. Every tensor gets
a symbolic shape and every small integer tensor a symbolic value (:mod:`graphfix.passes._symbolic`):
named dimensions of the signature are symbols, every other unknown size a symbol of its own.

Rules:
1. An integer or boolean tensor whose every element is known (``Equal`` of a size and -1 is
   false: a size is never negative) becomes a constant.
2. Reshape: a target whose value gives the input's own shape drops the Reshape; otherwise a
   target computed at run time becomes a constant when each entry is a known size, the input's
   size on the same axis (0: copy it), or the one entry the others determine (-1).
3. Expand: a target that broadcasts to the input's own shape drops the Expand; otherwise it
   becomes a constant when each entry is a known size or the input's size on that axis (1).
4. Where with a condition known everywhere is the branch it selects, when that branch already
   has the output's shape.
5. Reshape of a Reshape reads the inner one's input, when rule 2 gives a constant target for it.
6. What nothing reads any more goes (dead code); in the bodies of If/Loop/Scan, whatever made
   it dead: onnxsim and ONNX Runtime leave nodes there that nothing reads once they rewrote
   what read them (an Unsqueeze whose Squeeze onnxsim removed runs in every iteration of a
   loop).
7. A shape computation whose symbolic value an earlier tensor holds reads that tensor instead
   (each layer of a transformer computes the batch and sequence sizes again).
8. Every fact comes from the signature's inputs, the constants and the ops: shapes the file
   only declares (``value_info``, the outputs' shapes) are not read, since a stale declaration
   would turn into a constant target that ignores what the inputs say.
9. CastLike reads its second input for its element type alone: a CastLike of a constant is a
   constant of that type (the dynamo exporter writes every constant of a float16 model as
   ``CastLike(c, x)``, which no constant folding can touch since ``x`` is computed).
10. In the bodies of If/Loop/Scan, a Squeeze of an Unsqueeze over the same constant axes is the
    Unsqueeze's input (no shape is needed: the pair is the identity whatever the input). ONNX Runtime's offline optimization leaves such pairs behind where it
    removes an Add of zero between them (PaddlePaddle's exporter writes one per value a loop
    carries out of its body), and a second simplify would have taken them: without this rule
    the pipeline was not a fixed point there. Where the Squeeze's output is the graph's
    output, the value the Unsqueeze read takes its name where it can (computed by a node of
    that graph, neither an input nor another output); otherwise the pair becomes an Identity
    (a loop's carried value passed out).
11. In the bodies of If/Loop/Scan, a Concat that reads a Concat over the same axis, which
    nothing else reads, takes that Concat's inputs in its place (in a Mask R-CNN's loop body
    ONNX Runtime removes a Cast between two, which onnxsim would have flattened, had it come
    first). Rules 10 and 11 leave the main graph to onnxsim, which takes both there.
12. An If whose condition is a constant (one that rules 1-9 folded: a batch size compared with
    one; not an initializer a graph input lists, which a caller may feed another value) is the
    branch it takes, in every graph: its nodes join the graph in the If's place,
    their names made fresh where taken. onnxsim inlines such a branch too, and on Silero VAD
    wrote nodes out of order and failed (the whole simplify pass was skipped).

Dynamic dimensions stay dynamic: a symbol is never replaced by a size, and the signature is
never touched. Graph outputs keep their producers' names. Rules 1-5 and 7-9 leave the bodies of
If/Loop/Scan as they are (their outer reads are honoured).
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix import graph as graph_layer
from graphfix.graph import STANDARD_DOMAINS, attribute, holds_graph
from graphfix.model_io import skeleton, tensor_bytes, tensor_digest, tensor_value
from ._symbolic import Expr, Shape, SymbolicFacts, Value
from ._symbolic_shapes import RULES
from graphfix.registry import Pass, PassResult, register
from graphfix.shapes import infer_shapes

__all__ = ["FoldShapes", "fold_shapes"]

logger = logging.getLogger(__name__)

# Initializers up to this size are found by value, so a fold reads the copy the graph has.
_SHARED_MAX_BYTES = 512

_MAX_ROUNDS = 4
_VALUE_TYPES = {
    onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.BOOL: np.bool_,
}


def _infer(model: onnx.ModelProto) -> onnx.GraphProto | None:
    """ONNX's shape inference from the inputs and the ops alone (rule 8)."""
    light = skeleton(model)
    graph_layer.forget_declared_shapes(light.graph)
    try:
        return infer_shapes(light, data_prop=True).graph
    except Exception as error:  # noqa: BLE001 - onnx raises several types
        logger.debug("fold-shapes: ONNX shape inference failed (%s); own rules only", error)
        return None


def _known(value: Value) -> list[int | bool] | None:
    """Every element as an int or a bool, or None."""
    if value is None:
        return None
    out: list[int | bool] = []
    for item in value:
        if isinstance(item, bool):
            out.append(item)
        elif isinstance(item, Expr) and item.constant is not None:
            out.append(item.constant)
        else:
            return None
    return out


def reshape_target(source: Shape, wanted: Shape, *, allowzero: bool = False) -> list[int] | None:
    """Rule 2: a constant Reshape target giving ``wanted`` from a tensor of shape ``source``."""
    if wanted is None:
        return None
    target: list[int] = []
    inferred = None
    for axis, dim in enumerate(wanted):
        if dim.constant is not None:
            if dim.constant == 0 and not allowzero:
                if source is None or axis >= len(source) or source[axis].constant != 0:
                    return None  # a literal 0 would copy the input's size, not mean 0
            target.append(dim.constant)
        elif source is not None and axis < len(source) and source[axis] == dim and not allowzero:
            target.append(0)
        elif inferred is None:
            inferred = axis
            target.append(-1)
        else:
            return None
    if inferred is not None and (source is None or any(d.constant == 0 for d in wanted)):
        return None  # -1 is ambiguous beside a zero size, and needs the element count
    return target


# Rule 9 casts constants up to this size (a float16 model's scalars and per-channel vectors).
_CAST_MAX_BYTES = 64 * 1024


class _Rewriter:
    """Rules 1-6 on one graph."""

    def __init__(self, graph: onnx.GraphProto, facts: SymbolicFacts, names: graph_layer.Names) -> None:
        self.graph = graph
        self.facts = facts
        self.names = names
        self.outputs = {o.name for o in graph.output}
        self.replaced: dict[str, str] = {}  # a dropped node's output -> what its readers read
        self.initializers: list[onnx.TensorProto] = []
        self.stats = {"values_folded": 0, "targets_folded": 0, "nodes_dropped": 0,
                      "reshapes_merged": 0}
        self.producer = {name: n for n in graph.node for name in n.output if name}
        self.values: dict[tuple[object, ...], str] = {}  # symbolic value -> first tensor
        self.constants = {t.name for t in graph.initializer} | {
            n.output[0] for n in graph.node if n.op_type == "Constant" and n.output}
        # Small initializers by value: a folded value that one already holds is read there
        # (not one that is also a graph input: a caller may feed another value).
        inputs = {i.name for i in graph.input}
        self.by_value = {tensor_digest(t): t.name for t in graph.initializer
                         if 0 < tensor_bytes(t) <= _SHARED_MAX_BYTES and t.HasField("raw_data")
                         and t.name not in inputs}
        self.fed = inputs
        self.initializer = {t.name: t for t in graph.initializer}

    def run(self) -> bool:
        changed = False
        for node in list(self.graph.node):
            for position, name in enumerate(node.input):
                node.input[position] = self.replaced.get(name, name)
            if node.domain not in STANDARD_DOMAINS:
                continue
            if self._fold_value(node) or self._same_value(node):
                changed = True
                continue
            rule = {"Reshape": self._reshape, "Expand": self._expand, "Where": self._where,
                    "CastLike": self._cast_like}.get(node.op_type)
            if rule is not None and rule(node):
                changed = True
        if self.replaced:
            for node in self.graph.node:
                graph_layer.rename_reads(node, self.replaced)
        if changed:
            self._commit()
        return changed

    # -------------------------------------------------------------- rules
    def _fold_value(self, node: onnx.NodeProto) -> bool:
        """Rule 1."""
        if node.op_type == "Constant" or len(node.output) != 1 or holds_graph(node):
            return False
        name = node.output[0]
        known = _known(self.facts.value(name))
        dtype = _VALUE_TYPES.get(self.facts.elem_type(name))
        if known is None or dtype is None or name in self.outputs:
            return False
        array = np.array(known, dtype=dtype)
        if self.facts.is_scalar(name):
            array = array.reshape(())
        self.replaced[name] = self._tensor(array, f"{name}_folded")
        self.stats["values_folded"] += 1
        return True

    def _same_value(self, node: onnx.NodeProto) -> bool:
        """Rule 7: a shape computation whose value an earlier tensor already holds."""
        if node.op_type == "Constant" or len(node.output) != 1 or holds_graph(node):
            return False
        name = node.output[0]
        value = self.facts.value(name)
        if value is None or any(item is None for item in value):
            return False
        key = (self.facts.elem_type(name), self.facts.is_scalar(name), tuple(map(str, value)))
        earlier = self.values.setdefault(key, name)
        if earlier == name:
            return False
        return self._drop(node, earlier)

    def _drop(self, node: onnx.NodeProto, into: str) -> bool:
        output = node.output[0]
        if output in self.outputs:
            return False
        self.replaced[output] = self.replaced.get(into, into)
        self.stats["nodes_dropped"] += 1
        return True

    def _constant_input(self, node: onnx.NodeProto, slot: int, values: list[int]) -> None:
        node.input[slot] = self._tensor(np.array(values, dtype=np.int64), f"{node.output[0]}_target")

    def _tensor(self, array: np.ndarray, base: str) -> str:
        """The name of an initializer holding ``array``: one the graph has, or a new one."""
        tensor = numpy_helper.from_array(array, "")
        digest = tensor_digest(tensor)
        if digest in self.by_value:
            return self.by_value[digest]
        tensor.name = self.names.fresh(base)
        self.initializers.append(tensor)
        self.constants.add(tensor.name)
        self.by_value[digest] = tensor.name
        return tensor.name

    def _is_constant(self, name: str) -> bool:
        return name in self.constants

    def _reshape(self, node: onnx.NodeProto) -> bool:
        """Rules 2 and 5."""
        if len(node.input) < 2:
            return False
        source = node.input[0]
        out_shape = self.facts.shape(node.output[0])
        allowzero = bool(attribute(node, "allowzero"))
        in_shape = self.facts.shape(source)
        if out_shape is not None and in_shape == out_shape:
            return self._drop(node, source)
        # Rule 5: a Reshape of a Reshape reads the inner one's input.
        inner = self.producer.get(source)
        if inner is not None and inner.op_type == "Reshape" and inner.domain in STANDARD_DOMAINS:
            deeper = self.facts.shape(inner.input[0])
            target = reshape_target(deeper, out_shape, allowzero=allowzero)
            if target is not None:
                if deeper == out_shape:
                    return self._drop(node, inner.input[0])
                node.input[0] = inner.input[0]
                self._constant_input(node, 1, target)
                self.stats["reshapes_merged"] += 1
                return True
        if self._is_constant(node.input[1]):
            return False
        target = reshape_target(in_shape, out_shape, allowzero=allowzero)
        if target is None:
            return False
        self._constant_input(node, 1, target)
        self.stats["targets_folded"] += 1
        return True

    def _expand(self, node: onnx.NodeProto) -> bool:
        """Rule 3."""
        if len(node.input) < 2:
            return False
        in_shape, out_shape = self.facts.shape(node.input[0]), self.facts.shape(node.output[0])
        if in_shape is None or out_shape is None:
            return False
        if in_shape == out_shape:
            return self._drop(node, node.input[0])
        if self._is_constant(node.input[1]):
            return False
        offset = len(out_shape) - len(in_shape)
        target: list[int] = []
        for axis, dim in enumerate(out_shape):
            inner = in_shape[axis - offset] if axis >= offset else None
            if inner is not None and inner == dim:
                target.append(1)
            elif dim.constant is not None:
                target.append(dim.constant)
            else:
                return False
        self._constant_input(node, 1, target)
        self.stats["targets_folded"] += 1
        return True

    def _where(self, node: onnx.NodeProto) -> bool:
        """Rule 4."""
        condition = _known(self.facts.value(node.input[0]))
        if condition is None or not condition or len(set(condition)) != 1:
            return False
        chosen = node.input[1] if condition[0] else node.input[2]
        out_shape = self.facts.shape(node.output[0])
        if out_shape is None or self.facts.shape(chosen) != out_shape:
            return False
        return self._drop(node, chosen)

    def _cast_like(self, node: onnx.NodeProto) -> bool:
        """Rule 9."""
        if len(node.input) != 2 or node.output[0] in self.outputs:
            return False
        value = self._constant_value(node.input[0])
        target = self.facts.elem_type(node.input[1])
        if value is None or not target:
            return False
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(target))
        except (KeyError, TypeError, ValueError):
            return False
        if dtype.kind not in "biuf" or value.dtype.kind not in "biuf":
            return False  # bfloat16, float8, strings: numpy's casts are not ONNX's
        with np.errstate(all="ignore"):
            array = value.astype(dtype)
        self.replaced[node.output[0]] = self._tensor(array, f"{node.output[0]}_folded")
        self.stats["values_folded"] += 1
        return True

    def _constant_value(self, name: str) -> np.ndarray | None:
        """The value of a small constant (an initializer no caller feeds, a Constant node
        holding a tensor), or None."""
        tensor = self.initializer.get(name) if name not in self.fed else None
        producer = self.producer.get(name)
        if tensor is None and producer is not None and producer.op_type == "Constant" and (
                producer.domain in STANDARD_DOMAINS):
            tensor = next((a.t for a in producer.attribute if a.name == "value"), None)
        if tensor is None or not 0 < tensor_bytes(tensor) <= _CAST_MAX_BYTES:
            return None
        return tensor_value(tensor)

    # -------------------------------------------------------------- rule 6
    def _commit(self) -> None:
        self.graph.initializer.extend(self.initializers)
        roots = {o.name for o in self.graph.output}
        nodes = list(self.graph.node)
        # The live nodes are a subsequence of ``nodes``, in order: each is matched to its
        # position as the two lists are walked together.
        live = iter(graph_layer.live_nodes(nodes, roots))
        following = next(live, None)
        dead: list[int] = []
        for position, node in enumerate(nodes):
            if node is following:
                following = next(live, None)
            else:
                dead.append(position)
        graph_layer.delete_positions(self.graph.node, dead)
        graph_layer.drop_unread_initializers(self.graph)
        present = graph_layer.defined_names(self.graph)
        graph_layer.keep_only(self.graph.value_info, lambda v: v.name in present)


@register("fold-shapes")
class FoldShapes(Pass):
    """Fold shape arithmetic the model's symbolic dimensions prove (Reshape/Expand targets)."""

    def call(self, model: onnx.ModelProto) -> PassResult:
        before = graph_layer.count_nodes(model)
        names = graph_layer.Names(graph_layer.all_names(model.graph))
        stats: dict[str, int] = {}
        modified = False
        # A fold makes the next visible (a folded value feeds another target): until nothing
        # changes, a few rounds at most.
        for _ in range(_MAX_ROUNDS):
            facts = SymbolicFacts(model.graph, _infer(model), rules=RULES)
            rewriter = _Rewriter(model.graph, facts, names)
            folded = rewriter.run()
            inlined = _inline_constant_ifs(model, names)  # rule 12: a fold decided it
            if not folded and not inlined:
                break
            modified = True
            if inlined:
                stats["ifs_inlined"] = stats.get("ifs_inlined", 0) + inlined
            for key, count in rewriter.stats.items():
                stats[key] = stats.get(key, 0) + count
        # Rules 10, 11 and 6 in bodies: what ONNX Runtime leaves there after onnxsim ran. The
        # main graph is onnxsim's, which takes these as well, and more: a main graph's pair
        # taken here first left it nothing to rewrite on a DeepLab head, whose output then kept
        # the exporter's 318 KB of node metadata that onnxsim's output drops.
        bodies = list(graph_layer.graphs(model.graph))[1:]
        cancelled = sum(_cancel_squeezes(graph, _opset(model)) for graph in bodies)
        if cancelled:
            modified = True
            stats["squeezes_cancelled"] = cancelled
        flattened = sum(_flatten_concats(graph) for graph in bodies)
        if flattened:
            modified = True
            stats["concats_flattened"] = flattened
        # a body's dead nodes may be all that kept an outer value read: innermost first
        dead = sum(_drop_dead(graph) for graph in list(graph_layer.graphs_bottom_up(
            model.graph))[:-1])
        if dead:
            modified = True
            stats["dead_in_bodies"] = dead
        stats.update(nodes_before=before, nodes_after=graph_layer.count_nodes(model))
        return PassResult(model, modified, stats=stats)


def _constants(graph: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """The values ``graph`` fixes: its initializers (not one a graph input lists, a default a
    caller may feed another value) and its Constant nodes' outputs, by name."""
    listed = {i.name for i in graph.input}
    constants = {t.name: t for t in graph.initializer if t.name not in listed}
    for node in graph.node:
        tensor = graph_layer.constant_tensor(node) if node.op_type == "Constant" else None
        if tensor is not None and node.output:
            constants[node.output[0]] = tensor
    return constants


def _scoped(graph: onnx.GraphProto, hidden: frozenset[str]
            ) -> list[tuple[onnx.GraphProto, frozenset[str]]]:
    """``graph`` and every body in it, each with the names the bodies from the main graph's
    down to it define (a name they define hides the main graph's)."""
    found = [(graph, hidden)]
    for node in graph.node:
        for sub in graph_layer.subgraphs(node):
            found += _scoped(sub, hidden | graph_layer.defined_names(sub))
    return found


def _inline_constant_ifs(model: onnx.ModelProto, names: graph_layer.Names) -> int:
    """Rule 12 in every graph: an If whose condition is a constant (of its graph, or an
    initializer of the main graph), or a Cast of one, is the branch it takes."""
    if not any(node.op_type == "If" for node in graph_layer.all_nodes(model.graph)):
        return 0
    main = {name: t for name, t in _constants(model.graph).items()
            if name in {i.name for i in model.graph.initializer}}
    inlined = 0
    for graph, hidden in _scoped(model.graph, frozenset()):
        if not any(node.op_type == "If" for node in graph.node):
            continue
        # the main graph's initializers, where no graph on the way down defines the name
        constants = {**{k: v for k, v in main.items() if k not in hidden}, **_constants(graph)}
        casts = {n.output[0]: n.input[0] for n in graph.node if n.op_type == "Cast"
                 and n.domain in STANDARD_DOMAINS and n.input and n.output}
        for position in reversed(range(len(graph.node))):
            node = graph.node[position]
            if node.op_type != "If" or node.domain not in STANDARD_DOMAINS or not node.input:
                continue
            # the condition, or what a Cast of it casts (to bool: nonzero is true)
            tensor = constants.get(node.input[0], constants.get(casts.get(node.input[0], "")))
            value = tensor_value(tensor) if tensor is not None else None
            if value is None or value.size != 1 or value.dtype.kind not in "biuf":
                continue
            branch = attribute(node, "then_branch" if bool(value.reshape(-1)[0])
                               else "else_branch")
            if branch is None or branch.sparse_initializer or len(branch.output) != len(
                    node.output):
                continue
            nodes, initializers = _branch_in_place(node, branch, names)
            del graph.node[position]
            for offset, new in enumerate(nodes):
                graph.node.insert(position + offset, new)
            graph.initializer.extend(initializers)
            inlined += 1
    return inlined


def _branch_in_place(node: onnx.NodeProto, branch: onnx.GraphProto, names: graph_layer.Names
                     ) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """The nodes and initializers that compute ``node``'s outputs in its graph as
    ``branch`` computes them: the branch's own names made fresh (a name in use anywhere stays
    its own), each output written by its producer under the If's output name, or copied by an
    Identity (a value from outside the branch, a constant of it, one value given twice)."""
    made = {name for n in branch.node for name in n.output if name}
    local = made | {t.name for t in branch.initializer}
    rename: dict[str, str] = {}
    identities: list[tuple[str, str]] = []
    for value, wanted in zip(branch.output, node.output):
        if not wanted:
            continue
        if value.name in made and value.name not in rename:
            rename[value.name] = wanted
        else:
            identities.append((value.name, wanted))
    for name in sorted(local - set(rename)):
        rename[name] = names.fresh(name)
    nodes = []
    for inner in branch.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        graph_layer.rename_reads(copy, rename)
        for slot, name in enumerate(copy.output):
            if name:
                copy.output[slot] = rename[name]
        nodes.append(copy)
    for source, wanted in identities:
        nodes.append(onnx.helper.make_node("Identity", [rename.get(source, source)], [wanted]))
    initializers = []
    for tensor in branch.initializer:
        copy = onnx.TensorProto()
        copy.CopyFrom(tensor)
        copy.name = rename[tensor.name]
        initializers.append(copy)
    return nodes, initializers


def _flatten_concats(graph: onnx.GraphProto) -> int:
    """Rule 11 on ``graph`` (its own nodes; each body is a graph of its own)."""
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in graph_layer.reads(node):
            readers[name] = readers.get(name, 0) + 1
    for output in graph.output:
        readers[output.name] = readers.get(output.name, 0) + 1
    concats = {n.output[0]: n for n in graph.node if n.op_type == "Concat"
               and n.domain in STANDARD_DOMAINS and len(n.output) == 1}
    flattened: set[str] = set()
    for node in graph.node:
        if (node.op_type != "Concat" or node.domain not in STANDARD_DOMAINS or not node.output
                or node.output[0] in flattened):  # taken in by a Concat before it already
            continue
        axis = attribute(node, "axis")
        if axis is None:
            continue
        inputs: list[str] = []
        for name in node.input:
            inner = concats.get(name)
            if (inner is not None and inner is not node and readers.get(name) == 1
                    and name not in flattened and attribute(inner, "axis") == axis):
                inputs += inner.input
                flattened.add(name)
            else:
                inputs.append(name)
        if inputs != list(node.input):
            del node.input[:]
            node.input.extend(inputs)
    if flattened:
        graph_layer.delete_positions(graph.node, [
            i for i, n in enumerate(graph.node) if n.op_type == "Concat" and n.output
            and n.output[0] in flattened])
        graph_layer.keep_only(graph.value_info, lambda v: v.name not in flattened)
    return len(flattened)


def _drop_dead(graph: onnx.GraphProto) -> int:
    """Rule 6 on the body ``graph``: the nodes whose results reach none of its outputs go, and
    the initializers and declared shapes nothing reads; returns how many nodes and
    initializers went."""
    nodes = list(graph.node)
    live = {id(node) for node in graph_layer.live_nodes(nodes, [o.name for o in graph.output])}
    dead = [position for position, node in enumerate(nodes) if id(node) not in live]
    graph_layer.delete_positions(graph.node, dead)
    unread = graph_layer.drop_unread_initializers(graph)
    if dead or unread:
        present = graph_layer.defined_names(graph)
        graph_layer.keep_only(graph.value_info, lambda v: v.name in present)
    return len(dead) + unread


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in STANDARD_DOMAINS), 0)


def _axes(node: onnx.NodeProto, opset: int, constants: dict[str, onnx.TensorProto]
          ) -> frozenset[int] | None:
    """The constant axes of a Squeeze or Unsqueeze: its attribute before opset 13, else its
    second input when a constant of its graph holds it; None when none is given or known."""
    if opset < 13:
        axes = attribute(node, "axes")
        return frozenset(int(a) for a in axes) if axes else None
    if len(node.input) < 2 or node.input[1] not in constants:
        return None
    value = tensor_value(constants[node.input[1]])
    values = value.reshape(-1).tolist() if value is not None else []
    return frozenset(int(v) for v in values) if values else None


def _cancel_squeezes(graph: onnx.GraphProto, opset: int) -> int:
    """Rule 10 on ``graph`` (its own nodes; each body is a graph of its own)."""
    constants = _constants(graph)
    producer = {name: n for n in graph.node for name in n.output if name}
    outputs = {o.name for o in graph.output}
    signature = {i.name for i in graph.input} | outputs
    unsqueezes: list[onnx.NodeProto] = []  # each cancelled pair's, gone where nothing reads it
    axes_read: set[str] = set()  # the pairs' axes inputs
    for node in list(graph.node):
        if (node.op_type != "Squeeze" or node.domain not in STANDARD_DOMAINS
                or not node.input or not node.output):
            continue
        inner = producer.get(node.input[0])
        if inner is None or inner.op_type != "Unsqueeze" or inner.domain not in STANDARD_DOMAINS:
            continue
        axes = _axes(node, opset, constants)
        if axes is None or axes != _axes(inner, opset, constants):
            continue
        source, output = inner.input[0], node.output[0]
        if output in outputs:
            # the value the Unsqueeze read takes the output's name, where that can be
            maker = producer.get(source)
            if maker is None or source in signature or any(
                    output in graph_layer.all_names(sub)
                    for n in graph.node for sub in graph_layer.subgraphs(n)):
                # or the pair becomes an Identity, where the Unsqueeze then goes
                if sum(graph_layer.reads(n).count(inner.output[0]) for n in graph.node) != 1 \
                        or inner.output[0] in outputs:
                    continue
                axes_read |= {*node.input[1:], *inner.input[1:]}
                node.op_type = "Identity"
                del node.input[:]
                node.input.append(source)
                del node.attribute[:]
                unsqueezes.append(inner)
                continue
            rename = {source: output}
            maker.output[list(maker.output).index(source)] = output
            producer[output] = maker
        else:
            rename = {output: source}
        graph.node.remove(node)
        for reader in graph.node:
            graph_layer.rename_reads(reader, rename)
        unsqueezes.append(inner)
        axes_read |= {*node.input[1:], *inner.input[1:]}
    if unsqueezes:
        read = {name for n in graph.node for name in graph_layer.reads(n)} | outputs
        unread = {u.output[0] for u in unsqueezes} - read
        graph_layer.delete_positions(graph.node, [
            i for i, n in enumerate(graph.node) if n.op_type == "Unsqueeze" and n.output
            and n.output[0] in unread])
        # the axes nothing reads any more go with them
        read = {name for n in graph.node for name in graph_layer.reads(n)} | outputs
        unread = {name for name in axes_read if name} - read
        graph_layer.delete_positions(graph.node, [
            i for i, n in enumerate(graph.node) if n.op_type == "Constant" and n.output
            and n.output[0] in unread])
        graph_layer.keep_only(graph.initializer, lambda t: t.name not in unread - signature)
        present = graph_layer.defined_names(graph)
        graph_layer.keep_only(graph.value_info, lambda v: v.name in present)
    return len(unsqueezes)


def fold_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Function twin of :class:`FoldShapes`: rewrites ``model`` in place, returns it."""
    return FoldShapes()(model).model
