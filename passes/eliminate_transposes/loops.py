"""Rule 8: a Transpose on a scan output of a Loop or Scan body moves out of the loop.

    Loop(...) <body: ..., s = T(p)(x) -> scan output s>   =>   Loop(...) <body: scan output x>
                                                               then T(0, 1+p) on the stacked output

Each iteration's slice is stacked along a new first axis, so transposing every slice by ``p`` is
transposing the stack by ``(0, 1+p)``: once outside, the Transpose runs once instead of once per
iteration, and meets the Transposes of the outer graph (tf2onnx's loop optimizer does the same).
Scan before opset 9 runs its body once per batch element and step: its scan outputs are
``[batch, steps, ...]`` and the Transpose outside is ``T(0, 1, 2+p)``; its first input is
``sequence_lens``, no state.
"""

from __future__ import annotations

import logging

import onnx

from graphfix.graph import Names, defined_names, outer_refs, subgraphs
from .ops import STANDARD_DOMAINS, attr, is_transpose

__all__ = ["scan_outputs", "lift_scan_transposes"]

logger = logging.getLogger(__name__)


def scan_outputs(node: onnx.NodeProto, opset: int) -> dict[int, int]:
    """A Loop's or Scan's scan outputs that stack along the iteration axis: body output position
    -> the node's output position (``opset``: the default domain's)."""
    if node.domain not in STANDARD_DOMAINS or node.op_type not in ("Loop", "Scan"):
        return {}
    body = next((a.g for a in node.attribute if a.name == "body"), None)
    if body is None:
        return {}
    if node.op_type == "Loop":
        carried = len(node.input) - 2
        first = 1 + carried  # the body's outputs: condition, carried values, scan outputs
        return {first + k: carried + k for k in range(len(body.output) - first)}
    scan_inputs = attr(node, "num_scan_inputs", 0)
    # Scan-8's first input is sequence_lens (optional, but its slot is always there).
    states = len(node.input) - scan_inputs - (1 if opset < 9 else 0)
    if opset < 9:
        return {k: k for k in range(states, len(body.output))}
    axes = attr(node, "scan_output_axes") or [0] * (len(body.output) - states)
    return {states + k: states + k for k in range(len(body.output) - states) if axes[k] == 0}


def _stacking_axes(node: onnx.NodeProto, opset: int) -> int:
    """How many axes a scan output has before the body's: the iterations, and Scan-8's batch."""
    return 2 if node.op_type == "Scan" and opset < 9 else 1


def _body(node: onnx.NodeProto) -> onnx.GraphProto:
    return next(a.g for a in node.attribute if a.name == "body")


def lift_scan_transposes(graph: onnx.GraphProto, names: Names, opset: int) -> int:
    """Rule 8 on the Loops and Scans of ``graph`` (their bodies already optimized); returns how
    many Transposes moved out."""
    lifted = 0
    position = 0
    while position < len(graph.node):
        node = graph.node[position]
        position += 1
        for body_index, outer_index in scan_outputs(node, opset).items():
            transpose = _liftable(_body(node), body_index)
            if transpose is None:
                continue
            lead = _stacking_axes(node, opset)
            perm = [*range(lead), *(lead + int(a) for a in attr(transpose, "perm"))]
            body = _body(node)
            body.output[body_index].name = transpose.input[0]
            body.output[body_index].type.tensor_type.ClearField("shape")
            body.node.remove(transpose)
            outer = node.output[outer_index]
            stacked = names.fresh(f"{outer}_untransposed")
            node.output[outer_index] = stacked
            graph.node.insert(position, onnx.helper.make_node(
                "Transpose", [stacked], [outer], perm=perm,
                name=names.fresh(f"{outer}_transpose")))
            position += 1
            lifted += 1
            logger.debug("lift the Transpose of %s's scan output %s out of the loop",
                         node.name or node.op_type, outer)
    return lifted


def _liftable(body: onnx.GraphProto, index: int) -> onnx.NodeProto | None:
    """The Transpose that writes body output ``index`` when nothing else reads it and its input
    is computed in the body (and is no other output)."""
    name = body.output[index].name
    producer = next((n for n in body.node if name in n.output), None)
    if not is_transpose(producer) or attr(producer, "perm") is None:
        return None
    source = producer.input[0]
    computed = defined_names(body) - {i.name for i in body.input}
    if source not in computed or source in {o.name for o in body.output}:
        return None
    readers = [n for n in body.node if name in n.input or any(
        name in outer_refs(sub) for sub in subgraphs(n))]
    if readers or [o.name for o in body.output].count(name) != 1:
        return None
    return producer
