"""The sign of zero: what makes a rewrite that is right for numbers wrong for IEEE floats.

``0.0 == -0.0``, yet ``1 / 0.0`` is +inf and ``1 / -0.0`` is -inf. Two rewrites that peers make
lose the difference, and a model whose outputs depend on it then computes something else:

1. merging constants equal as numbers (onnxsim's ``eliminate_duplicate_initializer`` and
   ``eliminate_common_subexpression``): :func:`signed_zero_twins` says when two constants of a
   model are equal as numbers and differ in bytes;
2. dropping ``x + 0.0`` (onnxsim's ``eliminate_nop_with_unit``, ONNX Runtime's
   ``NoopElimination``): ``-0.0 + 0.0`` is 0.0, so the Add is no no-op when ``x`` can be -0.0;
   likewise ``x - (-0.0)``. ``x + (-0.0)``, ``x - 0.0``, ``x * 1`` and ``x / 1`` are exact.
   The two results are equal as numbers, so dropping such an Add changes what the model
   computes only where the sign of a zero decides a value further on: a divisor (Div,
   Reciprocal: +inf or -inf), the base of a Pow whose exponent may be negative, and what
   graphfix cannot see into (an op of another domain, a local function, a subgraph the value
   enters, what leaves a Scan). What leaves a Loop body is followed into its next iteration
   and past the Loop, what leaves an If branch past the If.
   :func:`inexact_zero_nops` says when a model holds such an Add or Sub whose result's sign
   of zero can reach one of those, following it through the ops that carry a sign of zero and
   stopping at those that cannot (Exp, Softmax, an Add of a constant with no zero, a
   comparison, a Cast to a type with no signed zero, ...). Exporters' zero biases (a freshly
   initialised model) are the common case, and there the sign never matters.

The passes that hand a model to those tools turn the rewrite off for a model where it matters,
and only there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import numpy as np
import onnx

from graphfix.graph import STANDARD_DOMAINS, constant_tensor, graphs, subgraphs
from graphfix.graph import reads as node_reads
from graphfix.model_io import tensor_value

__all__ = ["signed_zero_twins", "inexact_zero_nops"]

_FLOATS = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                     onnx.TensorProto.BFLOAT16})
# Tensors this small are read to look for zeros; an Add of a larger constant is no no-op.
_SMALL = 64


def _constants(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """Float constants by name, in every graph: initializers and Constant values."""
    found: dict[str, onnx.TensorProto] = {}
    for body in graphs(model.graph):
        for tensor in body.initializer:
            if tensor.data_type in _FLOATS:
                found[tensor.name] = tensor
        for node in body.node:
            if node.op_type == "Constant" and node.output:
                tensor = constant_tensor(node)
                if tensor is not None and tensor.data_type in _FLOATS:
                    found[node.output[0]] = tensor
    return found


def _as_numbers(value: np.ndarray) -> np.ndarray:
    """``value`` with every zero as +0.0 (bfloat16 held as its bits: a zero is any pattern with
    no bit but the sign's)."""
    if value.dtype.kind == "f":
        return value + value.dtype.type(0)
    bits = value.view(np.uint16)
    return np.where((bits & 0x7FFF) == 0, np.uint16(0), bits)


def _signs(value: np.ndarray) -> tuple[bool, bool]:
    """Whether ``value`` holds a +0.0, and a -0.0 (bfloat16 as its bits)."""
    if value.dtype.kind == "f":
        zeros = value == 0
        negative = np.signbit(value)
    else:
        bits = value.view(np.uint16)
        zeros = (bits & 0x7FFF) == 0
        negative = (bits & 0x8000) != 0
    return bool(np.any(zeros & ~negative)), bool(np.any(zeros & negative))


def signed_zero_twins(model: onnx.ModelProto) -> bool:
    """Rule 1: whether two float constants of ``model`` are equal as numbers and differ in
    bytes (the same values but for the sign of a zero). Only tensors that share a type and
    shape with another are read."""
    constants = list(_constants(model).values())
    kinds = Counter((t.data_type, tuple(t.dims)) for t in constants)
    seen: dict[tuple[object, ...], bytes] = {}
    for tensor in constants:
        if kinds[(tensor.data_type, tuple(tensor.dims))] < 2:
            continue
        value = tensor_value(tensor)
        if value is None:
            continue
        key = (tensor.data_type, tuple(tensor.dims),
               _as_numbers(value).tobytes())
        if seen.setdefault(key, value.tobytes()) != value.tobytes():
            return True
    return False


def inexact_zero_nops(model: onnx.ModelProto) -> bool:
    """Rule 2: whether ``model`` adds a constant holding +0.0 to something, or subtracts one
    holding -0.0, with every other element zero too (what a tool would take for a no-op), where
    the sign of the result's zeros can reach a value it decides (a divisor, a Pow's base,
    something graphfix cannot see into)."""
    constants = _constants(model)
    local = {(f.domain, f.name) for f in model.functions}
    for body, holders in _bodies(model.graph):
        origins = [node.output[0] for node in body.node if node.output
                   and _inexact_nop(node, constants)]
        if origins and _sign_escapes(body, set(origins), constants, local, list(holders)):
            return True
    return False


_Holders = tuple[tuple[onnx.GraphProto, onnx.NodeProto], ...]


def _bodies(graph: onnx.GraphProto, holders: _Holders = ()
            ) -> Iterator[tuple[onnx.GraphProto, _Holders]]:
    """Every graph, with the graphs and nodes that hold it, outermost first (carried along
    the walk: protobuf gives a new wrapper, hence a new id(), at every access)."""
    yield graph, holders
    for node in graph.node:
        for sub in subgraphs(node):
            yield from _bodies(sub, (*holders, (graph, node)))


def _sign_escapes(body: onnx.GraphProto, tainted: set[str],
                  constants: dict[str, onnx.TensorProto], local: set[tuple[str, str]],
                  holders: list[tuple[onnx.GraphProto, onnx.NodeProto]]) -> bool:
    """Whether a zero's sign from ``tainted`` in ``body`` reaches a value it decides, in the
    body or past it: a Loop body's carried outputs are its inputs in the next iteration and
    the Loop's outputs after the last; an If branch's outputs are the If's outputs. What leaves
    any other subgraph (Scan's) counts as reaching a use."""
    while True:
        if _sign_reaches_a_use(body, tainted, constants, local):
            return True
        if not holders:
            return False  # the main graph's outputs are the model's results
        graph, node = holders[-1]
        leaving = [i for i, value in enumerate(body.output) if value.name in tainted]
        if not leaving:
            return False
        if node.op_type == "Loop":  # outputs: condition, carried values, scan outputs
            carried = len(node.input) - 2
            again = {body.input[i + 1].name for i in leaving
                     if 1 <= i <= carried and i + 1 < len(body.input)}
            if not again <= tainted:
                tainted |= again
                continue
            outer = {node.output[i - 1] for i in leaving if 1 <= i <= len(node.output)}
        elif node.op_type == "If":
            outer = {node.output[i] for i in leaving if i < len(node.output)}
        else:
            return True
        outer.discard("")
        body, tainted, holders = graph, outer, holders[:-1]
        if not tainted:
            return False


def _inexact_nop(node: onnx.NodeProto, constants: dict[str, onnx.TensorProto]) -> bool:
    if node.op_type not in ("Add", "Sub") or len(node.input) != 2 or (
            node.domain not in STANDARD_DOMAINS):
        return False
    positions = (0, 1) if node.op_type == "Add" else (1,)
    for position in positions:
        value = _small_value(constants.get(node.input[position]))
        if value is None or np.any(_as_numbers(value) != 0):
            continue
        positive, negative = _signs(value)
        if (positive if node.op_type == "Add" else negative):
            return True
    return False


def _small_value(tensor: onnx.TensorProto | None) -> np.ndarray | None:
    if tensor is None or np.prod(tensor.dims, dtype=np.int64) > _SMALL:
        return None
    return tensor_value(tensor)


# Ops whose outputs hold no zero whose sign follows an input's (or no float at all).
_SIGN_STOPS = frozenset({
    "Exp", "Softmax", "LogSoftmax", "Sigmoid", "Cos", "Cosh", "Softplus", "Log",
    "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or", "Xor",
    "IsNaN", "IsInf", "Shape", "Size", "ArgMax", "ArgMin", "NonZero",
})
_FLOAT_TYPES = _FLOATS


def _sign_reaches_a_use(graph: onnx.GraphProto, tainted: set[str],
                        constants: dict[str, onnx.TensorProto],
                        local: set[tuple[str, str]]) -> bool:
    """Whether a zero's sign from ``tainted`` reaches, in ``graph``, an input whose value it
    decides; ``tainted`` grows by every name it reaches. Followed to a fixed point, so the
    graph's node order does not matter."""
    changed = True
    while changed:
        changed = False
        for node in graph.node:
            read = node_reads(node)
            hit = [i for i, name in enumerate(node.input) if name in tainted]
            if not hit and not any(name in tainted for name in read):
                continue
            if _decided_by_sign(node, hit, constants, local):
                return True
            if _carries_sign(node, hit, constants):
                new = {name for name in node.output if name and name not in tainted}
                if new:
                    tainted |= new
                    changed = True
    return False


def _decided_by_sign(node: onnx.NodeProto, hit: list[int],
                     constants: dict[str, onnx.TensorProto],
                     local: set[tuple[str, str]]) -> bool:
    if node.domain not in STANDARD_DOMAINS or (node.domain, node.op_type) in local:
        return True
    if any(True for _ in subgraphs(node)):
        return True
    if node.op_type == "Div":
        return 1 in hit
    if node.op_type == "Reciprocal":
        return True
    if node.op_type == "Pow" and 0 in hit:
        exponent = _small_value(constants.get(node.input[1])) if len(node.input) > 1 else None
        return exponent is None or exponent.dtype.kind != "f" or not bool(np.all(exponent > 0))
    return False


def _carries_sign(node: onnx.NodeProto, hit: list[int],
                  constants: dict[str, onnx.TensorProto]) -> bool:
    if node.op_type in _SIGN_STOPS:
        return False
    if node.op_type == "Pow":
        return 0 in hit  # x ** -0.0 is x ** 0.0
    if node.op_type == "Cast":
        to = next((a.i for a in node.attribute if a.name == "to"), None)
        return to in _FLOAT_TYPES
    if node.op_type in ("Add", "Sub") and len(hit) == 1 and len(node.input) == 2:
        # x + c, with no zero in the constant c, is c's value whatever x's zero's sign
        value = _small_value(constants.get(node.input[1 - hit[0]]))
        return value is None or bool(np.any(_as_numbers(value) == 0))
    return True
