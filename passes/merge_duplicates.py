"""merge-duplicates: nodes that compute the same thing from the same inputs become one.

    a = Transpose<perm=p>(x); b = Transpose<perm=p>(x)   =>   a = Transpose<perm=p>(x), b := a

ONNX Runtime's transpose optimizer splits a Transpose with several readers into one per reader,
and exporters compute the same ``Shape`` or ``Slice`` of a tensor once per use.

Rules:
1. Two nodes with the same domain, op type, inputs (in order) and attributes compute the same
   outputs: the later one goes and its readers read the earlier one's outputs. Merging cascades:
   nodes that become duplicates because their inputs were merged are merged too.
2. Ops whose outputs are random (:func:`graphfix.graph.is_random`: RandomNormal, RandomUniform,
   Bernoulli, Multinomial, their ``Like`` forms, a Dropout that may run in training mode) and
   nodes holding subgraphs are never merged.
3. A node whose outputs are graph outputs is never the one that goes (a graph output keeps its
   producer); the earlier node may be.
4. An optional output the later node names and the earlier one leaves out (``""``: a GRU's
   ``Y_h``) is named on the earlier one: its readers do not lose it.
"""

from __future__ import annotations

import logging

import onnx

from graphfix import graph as graph_layer
from graphfix.graph import holds_graph, is_random
from graphfix.registry import Pass, PassResult, register

__all__ = ["MergeDuplicates", "merge_duplicates"]

logger = logging.getLogger(__name__)



def _key(node: onnx.NodeProto) -> tuple[object, ...]:
    attributes = tuple(sorted(a.SerializeToString(deterministic=True) for a in node.attribute))
    return (node.domain or "ai.onnx", node.op_type, tuple(node.input), len(node.output),
            attributes)


def _merge_graph(graph: onnx.GraphProto) -> int:
    outputs = {o.name for o in graph.output}
    seen: dict[tuple[object, ...], onnx.NodeProto] = {}
    rename: dict[str, str] = {}
    kept: list[onnx.NodeProto] = []
    merged = 0
    for node in graph.node:
        graph_layer.rename_reads(node, rename)
        if is_random(node) or holds_graph(node):
            kept.append(node)
            continue
        key = _key(node)
        earlier = seen.get(key)
        if earlier is None or any(name in outputs for name in node.output if name):  # Rule 3
            seen.setdefault(key, node)
            kept.append(node)
            continue
        for slot, (mine, theirs) in enumerate(zip(node.output, earlier.output)):
            if mine and theirs:
                rename[mine] = theirs
            elif mine:  # an optional output the earlier one leaves out (Rule 4)
                earlier.output[slot] = mine
        merged += 1
    if merged:
        for node in kept:
            graph_layer.rename_reads(node, rename)  # bodies read the merged names too
        del graph.node[:]
        graph.node.extend(kept)
        present = graph_layer.defined_names(graph)
        info = [v for v in graph.value_info if v.name in present]
        del graph.value_info[:]
        graph.value_info.extend(info)
    return merged


@register("merge-duplicates")
class MergeDuplicates(Pass):
    """Merge nodes that compute the same outputs from the same inputs (split Transposes)."""

    def call(self, model: onnx.ModelProto) -> PassResult:
        before = graph_layer.count_nodes(model)
        merged = sum(_merge_graph(g) for g in list(graph_layer.graphs_bottom_up(model.graph)))
        return PassResult(model, bool(merged), stats={
            "nodes_merged": merged, "nodes_before": before,
            "nodes_after": graph_layer.count_nodes(model)})


def merge_duplicates(model: onnx.ModelProto) -> onnx.ModelProto:
    """Function twin of :class:`MergeDuplicates`: rewrites ``model`` in place, returns it."""
    return MergeDuplicates()(model).model
