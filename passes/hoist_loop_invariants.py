"""hoist-loop-invariants: what a Loop's body computes alike in every iteration, computed once.

    Loop(M, c, w) body(i, c, w_in) => (c, w_in, ...) { u = Cast(w_in)  y = MatMul(x, u) }
 => u = Cast(w);  Loop(M, c) body(i, c) => (c, ...) { y = MatMul(x, u) }

Exporters that write a recurrent layer as a Loop (tf2onnx on Keras 3's LSTM and GRU, whose
weights are resource variables) pass the weights through the loop as carried values, unchanged,
and cast and split them in the body. ONNX Runtime copies every carried value into each iteration
and runs those nodes again each time: a Keras BiLSTM digit reader runs 1.9x faster with them
moved out.

Rules:
1. A carried value of a Loop that its body passes through unchanged (the body's output for it is
   its input, itself or through Identities) holds the value the Loop was given in every
   iteration: the body reads that value from the graph around it (ONNX's scoping), the slot goes
   (the Loop's input, the body's input and output, the Loop's output), and what read the Loop's
   final value of it reads the given value. A slot whose final value is an output of the
   graph around the Loop, or whose given value is left out, stays.
2. A body node that computes only from constants (the initializers and Constant nodes of the
   graphs around it, and the nodes this rule moved) moves before its Loop: it computes the same
   in every iteration and on every input, so moved out it fails where it failed before or not
   at all. Nodes whose outputs are random (:func:`graphfix.graph.is_random`), nodes holding a
   subgraph, nodes outside the standard domains and nodes writing the body's outputs stay.
3. Inner bodies first: what moves out of a Loop in a Loop's body may move out of the outer
   Loop in turn.
4. Not in the default pipeline: it made three Keras and tf2onnx recurrences 1.2-1.9x faster and
   two others 0.83-0.88x as fast (ONNX Runtime reads a Loop's outer-scope values per
   iteration too, and a carried value passed through without an Identity costs it no copy).
   Given, it runs best before simplify and ort-offline (``--passes``), which then fold what
   it moved out where a fold may store it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import onnx

from graphfix import graph as graph_layer
from graphfix.graph import STANDARD_DOMAINS, holds_graph, is_random, subgraphs
from graphfix.registry import Pass, PassResult, register

__all__ = ["HoistLoopInvariants", "hoist_loop_invariants"]

logger = logging.getLogger(__name__)


class _Counts:
    def __init__(self) -> None:
        self.slots = 0
        self.hoisted = 0


def _pass_through(body: onnx.GraphProto, name: str) -> str:
    """The name ``name`` is an Identity chain of, in ``body`` (itself where it is none)."""
    producers = {o: n for n in body.node for o in n.output if o}
    seen = set()
    while name in producers and producers[name].op_type == "Identity" and name not in seen:
        seen.add(name)
        name = producers[name].input[0]
    return name


def _drop_invariant_slots(graph: onnx.GraphProto, loop: onnx.NodeProto,
                          body: onnx.GraphProto, counts: _Counts) -> dict[str, str]:
    """Rule 1 on ``loop`` of ``graph``; returns the Loop outputs gone, each to what replaces it."""
    outputs = {o.name for o in graph.output}
    invariant = []
    for k in range(len(loop.input) - 2):
        given = loop.input[2 + k]
        if 2 + k >= len(body.input) or 1 + k >= len(body.output) or not given:
            continue
        final = loop.output[k] if k < len(loop.output) else ""
        if final in outputs:
            continue
        if _pass_through(body, body.output[1 + k].name) == body.input[2 + k].name:
            invariant.append(k)
    if not invariant:
        return {}
    reads = {body.input[2 + k].name: loop.input[2 + k] for k in invariant}
    gone = {loop.output[k]: loop.input[2 + k] for k in invariant
            if k < len(loop.output) and loop.output[k]}
    for k in sorted(invariant, reverse=True):
        del loop.input[2 + k]
        del body.input[2 + k]
        del body.output[1 + k]
        if k < len(loop.output):
            del loop.output[k]
    for node in body.node:
        graph_layer.rename_reads(node, reads)
    graph_layer.keep_only(body.value_info, lambda value: value.name not in reads)
    _drop_unread_identities(body)
    counts.slots += len(invariant)
    return gone


def _drop_unread_identities(body: onnx.GraphProto) -> None:
    """The Identities of a pass-through chain, read by nothing once its slot went."""
    while True:
        read = {name for node in graph_layer.all_nodes(body) for name in node.input}
        read.update(o.name for o in body.output)
        kept = [n for n in body.node if not (n.op_type == "Identity" and n.domain in
                                             STANDARD_DOMAINS and n.output[0] not in read)]
        if len(kept) == len(body.node):
            return
        del body.node[:]
        body.node.extend(kept)


def _hoist(body: onnx.GraphProto, constants: set[str], counts: _Counts) -> list[onnx.NodeProto]:
    """Rule 2: the nodes of ``body`` that compute from ``constants`` alone, taken out of it in
    order (``constants`` grows by what they compute)."""
    written = {o.name for o in body.output}
    moved: list[onnx.NodeProto] = []
    kept: list[onnx.NodeProto] = []
    known = set(constants)
    for node in body.node:
        inputs = [name for name in node.input if name]
        if (inputs and node.domain in STANDARD_DOMAINS and not holds_graph(node)
                and not is_random(node) and all(name in known for name in inputs)
                and not any(name in written for name in node.output)):
            moved.append(node)
            known.update(name for name in node.output if name)
        else:
            kept.append(node)
    if moved:
        del body.node[:]
        body.node.extend(kept)
        counts.hoisted += len(moved)
    constants.update(known)
    return moved


def _rewrite(graph: onnx.GraphProto, outer: set[str], counts: _Counts) -> None:
    """Rules 1-3 on ``graph`` and its bodies; ``outer``: the constants of the graphs around.
    A Constant node counts from where it stands: what moves goes just before its Loop."""
    constants = outer | {t.name for t in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    gone: dict[str, str] = {}
    for node in graph.node:
        if gone:
            graph_layer.rename_reads(node, gone)
        if node.op_type == "Constant" and node.domain in STANDARD_DOMAINS:
            constants.update(o for o in node.output if o)
        for body in subgraphs(node):
            _rewrite(body, set(constants), counts)  # Rule 3
        if node.op_type == "Loop" and node.domain in STANDARD_DOMAINS:
            body = next(a.g for a in node.attribute if a.name == "body")
            gone.update(_drop_invariant_slots(graph, node, body, counts))
            moved = _hoist(body, constants, counts)
            _move_declarations(body, graph, (o for n in moved for o in n.output))
            nodes.extend(moved)
        nodes.append(node)
    if len(nodes) != len(graph.node):
        del graph.node[:]
        graph.node.extend(nodes)


def _move_declarations(body: onnx.GraphProto, graph: onnx.GraphProto,
                       names: Iterable[str]) -> None:
    """The shape annotations of the values moved out of ``body`` go with them."""
    moving = set(names)
    if not moving:
        return
    keep = [v for v in body.value_info if v.name not in moving]
    graph.value_info.extend(v for v in body.value_info if v.name in moving)
    del body.value_info[:]
    body.value_info.extend(keep)


@register("hoist-loop-invariants")
class HoistLoopInvariants(Pass):
    """Move what a Loop's body computes alike in every iteration out of it (Keras RNN weights).

    Carried values the body passes through unchanged are read from outside, and nodes that
    compute from constants alone run once, before the Loop."""

    def call(self, model: onnx.ModelProto) -> PassResult:
        counts = _Counts()
        before = graph_layer.count_nodes(model)
        _rewrite(model.graph, set(), counts)
        return PassResult(model, bool(counts.slots or counts.hoisted), stats={
            "carried_values_dropped": counts.slots, "nodes_hoisted": counts.hoisted,
            "nodes_before": before, "nodes_after": graph_layer.count_nodes(model)})


def hoist_loop_invariants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Function twin of :class:`HoistLoopInvariants`: rewrites ``model`` in place, returns it."""
    return HoistLoopInvariants()(model).model
