"""hoist-loop-invariants: a Loop's weights carried through it unchanged, read from outside it.

    Loop(M, c, w) body(i, c, w_in) => (c, w_in, ...) { u = Cast(w_in)  y = MatMul(x, u) }
 => Loop(M, c) body(i, c) => (c, ...) { u = Cast(w)  y = MatMul(x, u) }

Exporters that write a recurrent layer as a Loop (tf2onnx on Keras 3's LSTM and GRU, whose
weights are resource variables; PaddlePaddle's table recognizer) pass the weights through the
loop as carried values, unchanged. To ONNX Runtime a carried value is a new value in every
iteration: the body's Casts, Splits and Transposes of the weights run again each time and its
products repack them. Read from the graph around the Loop, a weight is a constant: ONNX
Runtime folds what the body computes from it and prepacks it once (a Keras BiLSTM digit
reader ran 1.86x as fast).

Rules:
1. A carried value of a Loop that its body passes through unchanged (the body's output for it is
   its input, itself or through Identities) holds the value the Loop was given in every
   iteration: the body reads that value from the graph around it (ONNX's scoping), the slot goes
   (the Loop's input, the body's input and output, the Loop's output), and what read the Loop's
   final value of it reads the given value.
2. Only large weights go: a slot whose given value is a constant (an initializer or a Constant
   of the graphs around the Loop) of at least :data:`MIN_BYTES`. A carried value passed through
   costs ONNX Runtime a copy in every iteration, growing with its bytes; a value read from
   outside costs it a fixed amount in every iteration. Measured with the pass and without, on
   five recurrences of the corpora: weights of 1.4 to 2.6 MB read from outside
   ran 1.23-1.86x as fast (three BiLSTMs); weights of 98 to 786 KB 0.86-0.99x (PaddleOCR's
   table recognizer), of at most 9 KB 0.88x (a Keras GRU). Smaller weights, and values computed
   at run time, stay carried.
3. A slot whose final value is an output of the graph around the Loop stays, and so does one
   whose body input another output of the body emits (a scan output of the weight: a body's
   output must be a value of the body). Inner bodies are rewritten before the graph that holds
   them.
4. Nothing moves out of a body: ONNX Runtime folds a body's nodes that compute from outer
   constants itself; moved out of it they were slower (PaddleOCR's table recognizer: two weight
   Transposes moved out, 0.80x as fast).
5. In the default pipeline the pass runs before simplify and ort-offline, which then fold what
   the body computes from the weights (a float16 weight's Cast) where a fold may store it.
"""

from __future__ import annotations

import logging

import onnx

from graphfix import graph as graph_layer
from graphfix.graph import STANDARD_DOMAINS, subgraphs
from graphfix.model_io import tensor_bytes
from graphfix.registry import Pass, PassResult, register

__all__ = ["HoistLoopInvariants", "hoist_loop_invariants"]

logger = logging.getLogger(__name__)

# Rule 2: the smallest weight read from outside its Loop (1 MiB).
MIN_BYTES = 1 << 20


class _Counts:
    def __init__(self) -> None:
        self.slots = 0


def _pass_through(producers: dict[str, onnx.NodeProto], name: str) -> str:
    """The name ``name`` is an Identity chain of (itself where it is none); ``producers``: the
    body's nodes by the names they write."""
    seen = set()
    while name in producers and producers[name].op_type == "Identity" and name not in seen:
        seen.add(name)
        name = producers[name].input[0]
    return name


def _drop_invariant_slots(graph: onnx.GraphProto, loop: onnx.NodeProto,
                          body: onnx.GraphProto, weights: dict[str, int],
                          counts: _Counts) -> dict[str, str]:
    """Rules 1-3 on ``loop`` of ``graph`` (``weights``: the constants around it, by name, with
    their bytes); returns the Loop outputs gone, each to what replaces it."""
    outputs = {o.name for o in graph.output}
    producers = {name: node for node in body.node for name in node.output if name}
    # Names the body gives values of its own (nodes, initializers, its inputs): a read renamed
    # to one of them would read the body's value, not the weight around it.
    made = {*producers, *(t.name for t in body.initializer), *(v.name for v in body.input)}
    invariant = []
    for k in range(len(loop.input) - 2):
        given = loop.input[2 + k]
        if 2 + k >= len(body.input) or 1 + k >= len(body.output) or not given:
            continue
        if weights.get(given, 0) < MIN_BYTES:  # Rule 2
            continue
        if given in made and given != body.input[2 + k].name:
            continue  # the body's own value of that name would be read instead (its own slot's
            # input of that name goes with the slot)
        final = loop.output[k] if k < len(loop.output) else ""
        if final in outputs:
            continue
        name = body.input[2 + k].name
        if _pass_through(producers, body.output[1 + k].name) != name:
            continue
        if any(_pass_through(producers, out.name) == name
               for j, out in enumerate(body.output) if j != 1 + k):
            continue  # Rule 3: another output of the body (a scan output) emits it
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


def _rewrite(graph: onnx.GraphProto, outer: dict[str, int], counts: _Counts) -> None:
    """Rules 1-3 on ``graph`` and its bodies; ``outer``: the constants of the graphs around
    (name: bytes). A Constant node counts from where it stands."""
    weights = {**outer, **{t.name: tensor_bytes(t) for t in graph.initializer}}
    gone: dict[str, str] = {}
    for node in graph.node:
        if gone:
            graph_layer.rename_reads(node, gone)
        if node.op_type == "Constant" and node.domain in STANDARD_DOMAINS:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                weights.update({o: tensor_bytes(value) for o in node.output if o})
        for body in subgraphs(node):
            _rewrite(body, dict(weights), counts)  # Rule 3
        if node.op_type == "Loop" and node.domain in STANDARD_DOMAINS:
            body = next(a.g for a in node.attribute if a.name == "body")
            gone.update(_drop_invariant_slots(graph, node, body, weights, counts))


@register("hoist-loop-invariants")
class HoistLoopInvariants(Pass):
    """Read the weights a Loop carries through unchanged from outside it (Keras RNNs as Loops).

    ONNX Runtime then folds what the body computes from them, and prepacks them, once."""

    def call(self, model: onnx.ModelProto) -> PassResult:
        counts = _Counts()
        before = graph_layer.count_nodes(model)
        _rewrite(model.graph, {}, counts)
        return PassResult(model, bool(counts.slots), stats={
            "carried_values_dropped": counts.slots,
            "nodes_before": before, "nodes_after": graph_layer.count_nodes(model)})


def hoist_loop_invariants(model: onnx.ModelProto) -> onnx.ModelProto:
    """Function twin of :class:`HoistLoopInvariants`: rewrites ``model`` in place, returns it."""
    return HoistLoopInvariants()(model).model
