"""remove-initializer-inputs: drop graph inputs that are initializers.

    graph.input = [x, w, b], initializers = {w, b}   =>   graph.input = [x]

IR 3 required every initializer to be listed as a graph input. From IR 4 on, ONNX Runtime treats
an initializer that is also an input as a default value the caller may override, so it cannot
constant-fold it or fuse the nodes that read it (ORT's performance guide; onnxruntime issue
"Removing initializers from inputs" and its tools/python/remove_initializer_from_input.py).

Rules:
1. An input whose name is an initializer of the same graph is removed; real inputs keep their
   names and order.
2. Subgraphs (If/Loop/Scan bodies, at any depth) get rule 1 too. Their formal inputs are never
   initializers there, so only inputs that shadow a body initializer are touched.
3. A model at IR 3 is raised to IR 4, where initializers need not be inputs.
4. From IR 4 the signature changes: a caller that fed one of the main graph's removed inputs
   (a threshold given a default) is refused by the result ("Invalid input name"). The pass warns
   with their count and first names; ``--skip remove-initializer-inputs`` keeps them.
"""

from __future__ import annotations

import logging

import onnx

from graphfix.graph import default_inputs, subgraphs
from graphfix.registry import Pass, PassResult, register

__all__ = ["RemoveInitializerInputs", "remove_initializer_inputs"]

logger = logging.getLogger(__name__)

_MIN_IR_VERSION = 4


def _remove_from_graph(graph: onnx.GraphProto) -> int:
    """Rules 1 and 2 on ``graph`` and its subgraphs; returns how many inputs were removed."""
    initializer_names = {init.name for init in graph.initializer}
    initializer_names.update(sparse.values.name for sparse in graph.sparse_initializer)
    kept = [inp for inp in graph.input if inp.name not in initializer_names]
    removed = len(graph.input) - len(kept)
    if removed:
        logger.debug("graph %r: %d initializer inputs removed", graph.name, removed)
        del graph.input[:]
        graph.input.extend(kept)
    for node in graph.node:
        for subgraph in subgraphs(node):
            removed += _remove_from_graph(subgraph)
    return removed


@register("remove-initializer-inputs")
class RemoveInitializerInputs(Pass):
    """Drop initializers from graph inputs so ONNX Runtime can fold and fuse them."""

    may_change_signature = True  # the inputs with a default value go

    def call(self, model: onnx.ModelProto) -> PassResult:
        inputs_before = len(model.graph.input)
        # at IR 3 every initializer is listed, and ONNX Runtime takes none of them from a caller
        overridable = default_inputs(model)
        removed = _remove_from_graph(model.graph)
        warnings = []
        if overridable:  # Rule 4
            named = ", ".join(repr(n) for n in overridable[:3]) + (
                f" and {len(overridable) - 3} more" if len(overridable) > 3 else "")
            warnings.append(
                f"signature changed: {len(overridable)} input(s) with a default value (an "
                f"initializer) are no longer inputs: {named}; a caller that feeds them is "
                "refused")
        ir_raised = 0
        if model.ir_version < _MIN_IR_VERSION:  # Rule 3
            model.ir_version = _MIN_IR_VERSION
            ir_raised = 1
        return PassResult(
            model,
            modified=bool(removed or ir_raised),
            warnings=warnings,
            stats={
                "initializer_inputs_removed": removed,
                "graph_inputs_before": inputs_before,
                "graph_inputs_after": len(model.graph.input),
                "ir_version_raised": ir_raised,
            },
        )


def remove_initializer_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """Function twin of :class:`RemoveInitializerInputs`: rewrites ``model`` in place, returns it."""
    return RemoveInitializerInputs()(model).model
