"""The edits of one graph's rewrite: the live index, new nodes and constants, write-back.

Every edit keeps the :class:`graphfix.graph.Index` (producers, readers) and the rewrite's facts
up to date, so that the rules (:mod:`.rewrite`) always see the graph as it now is; the graph
itself is written back once, at the end, in topological order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix import graph as graph_layer
from graphfix.graph import Index, Names
from .facts import Facts, ShapeFacts
from .ops import set_attr
from .perm import Perm

__all__ = ["Stats", "Edits"]


@dataclasses.dataclass
class Stats:
    folded_into_constants: int = 0
    pushed_through: int = 0
    converted_to_reshape: int = 0
    identity_dropped: int = 0
    absorbed_by_consumers: int = 0
    lifted_out_of_loops: int = 0



class Edits:
    """A graph under rewrite: its nodes (in their original order, new ones beside the node
    they stand for), the dead ones, the live index and the constants made on the way."""

    def __init__(self, graph: onnx.GraphProto, *, opset: int, ir_version: int, names: Names,
                 inferred: ShapeFacts, stats: Stats, keep_reduction_order: bool) -> None:
        self.graph = graph
        self.opset = opset
        self.ir_version = ir_version
        self.names = names
        self.stats = stats
        self.modified = False
        self.nodes: list[onnx.NodeProto] = list(graph.node)
        self.order: dict[int, int] = {id(n): i for i, n in enumerate(self.nodes)}
        self.dead: set[int] = set()
        self.index = Index(graph, self.nodes)
        inputs = {i.name for i in graph.input}
        self.initializers = {t.name: t for t in graph.initializer if t.name not in inputs}
        self.removed_initializers: set[str] = set()
        self.new_initializers: list[onnx.TensorProto] = []
        self.facts = Facts(self.index, self.initializers, opset, inferred,
                           keep_reduction_order=keep_reduction_order, ir_version=ir_version)
        self.worklist: list[onnx.NodeProto] = []
        self.queued: set[int] = set()

    @property
    def node_count(self) -> int:
        """Nodes of the graph as the edits have left it so far."""
        return len(self.nodes) - len(self.dead)

    def _enqueue(self, node: onnx.NodeProto) -> None:
        if id(node) not in self.queued and id(node) not in self.dead:
            self.queued.add(id(node))
            self.worklist.append(node)

    def _set_perm(self, node: onnx.NodeProto, perm: Perm) -> None:
        set_attr(node, "perm", list(perm))
        self.facts.perm_changed(node, perm)

    def _set_input(self, node: onnx.NodeProto, slot: int, name: str) -> None:
        old = self.index.set_input(node, slot, name)
        if old and old not in node.input:
            self._drop_if_unused(old)

    def _drop_if_unused(self, name: str) -> None:
        """Remove a dead Transpose, Constant or initializer that produced ``name``."""
        if self.index.is_read(name):
            return
        if name in self.initializers:
            del self.initializers[name]
            self.removed_initializers.add(name)
            return
        node = self.index.producer.get(name)
        if node is not None and id(node) not in self.dead and self.facts.droppable(node, name):
            self._remove_node(node)

    def _remove_node(self, node: onnx.NodeProto) -> None:
        self.dead.add(id(node))
        self.modified = True
        self.index.remove(node)
        for name in set(node.input):
            if name:
                self._drop_if_unused(name)

    def _add_node(self, node: onnx.NodeProto, order: int) -> None:
        self.nodes.append(node)
        self.order[id(node)] = order
        self.index.add(node)
        self.modified = True

    def _new_transpose(self, source: str, perm: Perm, output: str, order: int) -> onnx.NodeProto:
        node = onnx.helper.make_node("Transpose", [source], [output], perm=list(perm),
                                     name=self.names.fresh(f"{output}_transpose"))
        self._add_node(node, order)
        self._enqueue(node)
        return node

    def _new_initializer(self, value: np.ndarray, base: str, order: int = 0) -> str:
        name = self.names.fresh(base)
        self._add_constant(numpy_helper.from_array(value, name), order)
        return name

    def _add_constant(self, tensor: onnx.TensorProto, order: int, *, as_node: bool = False
                      ) -> None:
        if self.facts.constant_nodes or as_node:
            # IR 3 lists every initializer as a graph input; a Constant leaves the inputs alone.
            self._add_node(onnx.helper.make_node(
                "Constant", [], [tensor.name], value=tensor,
                name=self.names.fresh(f"{tensor.name}_constant")), order)
        else:
            self.initializers[tensor.name] = tensor
            self.new_initializers.append(tensor)
        self.modified = True

    def _replace_reads(self, user: onnx.NodeProto, old: str, new: str) -> None:
        for slot, name in enumerate(user.input):
            if name == old:
                self._set_input(user, slot, new)

    def _gathered(self, name: str, indices: list[int], order: int) -> str:
        """Case 4d: ``Gather(name, indices)``, a value computed at run time reordered."""
        index_name = self._new_initializer(np.array(indices, np.int64), f"{name}_order", order)
        out = self.names.fresh(f"{name}_reordered")
        self._add_node(onnx.helper.make_node(
            "Gather", [name, index_name], [out], axis=0, name=self.names.fresh(f"{out}_gather")),
            order)
        return out

    def _unsqueezed(self, name: str, axes: list[int], order: int) -> str:
        out = self.names.fresh(f"{name}_unsqueezed")
        if self.opset < 13:
            node = onnx.helper.make_node("Unsqueeze", [name], [out], axes=axes,
                                         name=self.names.fresh(f"{out}_node"))
        else:
            axes_name = self._new_initializer(np.array(axes, np.int64), f"{out}_axes", order)
            node = onnx.helper.make_node("Unsqueeze", [name, axes_name], [out],
                                         name=self.names.fresh(f"{out}_node"))
        self._add_node(node, order)
        shape = self.facts.shape(name)
        if shape is not None:
            grown = list(shape)
            for axis in axes:
                grown.insert(axis, 1)
            self.facts.learn_shape(out, tuple(grown))
        return out

    def _write_back(self) -> None:
        if not self.modified:
            return
        live = [n for n in self.nodes if id(n) not in self.dead]
        live.sort(key=lambda n: self.order[id(n)])
        ordered = graph_layer.toposort(live)
        del self.graph.node[:]
        self.graph.node.extend(ordered)
        if self.removed_initializers or self.new_initializers:
            # Removed in place: rebuilding the list would copy every weight it keeps.
            initializers = self.graph.initializer
            for position in reversed(range(len(initializers))):
                if initializers[position].name in self.removed_initializers:
                    del initializers[position]
            initializers.extend(
                t for t in self.new_initializers if t.name not in self.removed_initializers)
        present = self.index.inputs | self.index.outputs | set(self.initializers)
        for node in ordered:
            present.update(node.output)
        if any(v.name not in present for v in self.graph.value_info):
            kept = [v for v in self.graph.value_info if v.name in present]
            del self.graph.value_info[:]
            self.graph.value_info.extend(kept)

