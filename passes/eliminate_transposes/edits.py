"""The edits of one graph's rewrite: the live index, new nodes and constants, write-back.

Every edit keeps the :class:`graphfix.graph.Index` (producers, readers), the node table
(:mod:`.nodes`) and the rewrite's facts up to date, so that the rules (:mod:`.rewrite`) always
see the graph as it now is; the graph itself is written back once, at the end, in topological
order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix import graph as graph_layer
from graphfix.graph import Index, Names
from .facts import GraphFacts, ShapeFacts
from .nodes import NodeTable, Worklist
from .ops import set_attr
from .perm import Perm

__all__ = ["RewriteCounts", "Initializers", "Edits"]


@dataclasses.dataclass
class RewriteCounts:
    folded_into_constants: int = 0
    pushed_through: int = 0
    converted_to_reshape: int = 0
    identity_dropped: int = 0
    absorbed_by_consumers: int = 0
    lifted_out_of_loops: int = 0


class Initializers:
    """One graph's initializers as the rewrite leaves them (``live``, by name; the facts read
    it), those it dropped and those it made. Lifetime: one graph's rewrite."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        inputs = {i.name for i in graph.input}
        # An initializer listed as a graph input is a default the caller may override: no
        # constant.
        self.live = {t.name: t for t in graph.initializer if t.name not in inputs}
        self.removed: set[str] = set()
        self.added: list[onnx.TensorProto] = []

    def add(self, tensor: onnx.TensorProto) -> None:
        self.live[tensor.name] = tensor
        self.added.append(tensor)

    def drop(self, name: str) -> None:
        del self.live[name]
        self.removed.add(name)

    def write_back(self, graph: onnx.GraphProto) -> None:
        if not self.removed and not self.added:
            return
        # Removed in place: rebuilding the list would copy every weight it keeps.
        initializers = graph.initializer
        for position in reversed(range(len(initializers))):
            if initializers[position].name in self.removed:
                del initializers[position]
        initializers.extend(t for t in self.added if t.name not in self.removed)


class Edits:
    """A graph under rewrite: its nodes (:class:`.nodes.NodeTable`: in their original order,
    new ones beside the node they stand for, the dead ones), the live index, the initializers,
    the facts and the worklist of Transposes. Lifetime: one graph's rewrite."""

    def __init__(self, graph: onnx.GraphProto, *, opset: int, ir_version: int, names: Names,
                 inferred: ShapeFacts, stats: RewriteCounts, keep_reduction_order: bool) -> None:
        self.graph = graph
        self.opset = opset
        self.names = names
        self.stats = stats
        self.modified = False
        self.nodes = NodeTable(graph.node)
        self.index = Index(graph, list(self.nodes))
        self.initializers = Initializers(graph)
        self.facts = GraphFacts(self.index, self.nodes, self.initializers.live, opset, inferred,
                           keep_reduction_order=keep_reduction_order, ir_version=ir_version)
        self.worklist = Worklist(self.nodes)

    def enqueue(self, node: onnx.NodeProto) -> None:
        """Visit the Transpose ``node`` (again)."""
        self.worklist.add(self.nodes.key(node))

    def is_dead(self, node: onnx.NodeProto) -> bool:
        return self.nodes.is_dead(self.nodes.key(node))

    def set_perm(self, node: onnx.NodeProto, perm: Perm) -> None:
        set_attr(node, "perm", list(perm))
        self.facts.perm_changed(node, perm)

    def no_transpose(self, node: onnx.NodeProto, op_type: str) -> None:
        """The Transpose ``node`` becomes an ``op_type`` (its attributes go)."""
        node.op_type = op_type
        del node.attribute[:]
        self.facts.perm_changed(node, None)
        self.modified = True

    def set_input(self, node: onnx.NodeProto, slot: int, name: str) -> None:
        old = self.index.set_input(node, slot, name)
        if old and old not in node.input:
            self.drop_if_unused(old)

    def set_output(self, node: onnx.NodeProto, slot: int, name: str) -> None:
        self.index.set_output(node, slot, name)

    def drop_if_unused(self, name: str) -> None:
        """Remove a dead Transpose, Constant or initializer that produced ``name``."""
        if self.index.is_read(name):
            return
        if name in self.initializers.live:
            self.initializers.drop(name)
            return
        node = self.index.producer.get(name)
        if node is not None and not self.is_dead(node) and self.facts.droppable(node, name):
            self.remove_node(node)

    def remove_node(self, node: onnx.NodeProto) -> None:
        self.nodes.kill(self.nodes.key(node))
        self.modified = True
        self.index.remove(node)
        for name in set(node.input):
            if name:
                self.drop_if_unused(name)

    def add_node(self, node: onnx.NodeProto, order: int) -> None:
        self.nodes.add(node, order)
        self.index.add(node)
        self.modified = True

    def new_transpose(self, source: str, perm: Perm, output: str, order: int) -> onnx.NodeProto:
        node = onnx.helper.make_node("Transpose", [source], [output], perm=list(perm),
                                     name=self.names.fresh(f"{output}_transpose"))
        self.add_node(node, order)
        self.enqueue(node)
        return node

    def new_initializer(self, value: np.ndarray, base: str, order: int = 0) -> str:
        name = self.names.fresh(base)
        self.add_constant(numpy_helper.from_array(value, name), order)
        return name

    def add_constant(self, tensor: onnx.TensorProto, order: int, *, as_node: bool = False
                     ) -> None:
        if self.facts.constant_nodes or as_node:
            # IR 3 lists every initializer as a graph input; a Constant leaves the inputs alone.
            self.add_node(onnx.helper.make_node(
                "Constant", [], [tensor.name], value=tensor,
                name=self.names.fresh(f"{tensor.name}_constant")), order)
        else:
            self.initializers.add(tensor)
        self.modified = True

    def replace_reads(self, user: onnx.NodeProto, old: str, new: str) -> None:
        for slot, name in enumerate(user.input):
            if name == old:
                self.set_input(user, slot, new)

    def gathered(self, name: str, indices: list[int], order: int) -> str:
        """Case 4d: ``Gather(name, indices)``, a value computed at run time reordered."""
        index_name = self.new_initializer(np.array(indices, np.int64), f"{name}_order", order)
        out = self.names.fresh(f"{name}_reordered")
        self.add_node(onnx.helper.make_node(
            "Gather", [name, index_name], [out], axis=0, name=self.names.fresh(f"{out}_gather")),
            order)
        return out

    def unsqueezed(self, name: str, axes: list[int], order: int) -> str:
        out = self.names.fresh(f"{name}_unsqueezed")
        if self.opset < 13:
            node = onnx.helper.make_node("Unsqueeze", [name], [out], axes=axes,
                                         name=self.names.fresh(f"{out}_node"))
        else:
            axes_name = self.new_initializer(np.array(axes, np.int64), f"{out}_axes", order)
            node = onnx.helper.make_node("Unsqueeze", [name, axes_name], [out],
                                         name=self.names.fresh(f"{out}_node"))
        self.add_node(node, order)
        shape = self.facts.shape(name)
        if shape is not None:
            grown = list(shape)
            for axis in axes:
                grown.insert(axis, 1)
            self.facts.learn_shape(out, tuple(grown))
        return out

    def write_back(self) -> None:
        if not self.modified:
            return
        ordered = graph_layer.toposort(self.nodes.live_in_order())
        del self.graph.node[:]
        self.graph.node.extend(ordered)
        self.initializers.write_back(self.graph)
        present = self.index.inputs | self.index.outputs | set(self.initializers.live)
        for node in ordered:
            present.update(node.output)
        if any(v.name not in present for v in self.graph.value_info):
            kept = [v for v in self.graph.value_info if v.name in present]
            del self.graph.value_info[:]
            self.graph.value_info.extend(kept)
