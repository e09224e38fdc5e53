"""eliminate-transposes: push Transposes through layout-agnostic ops until they cancel.

Converters from NHWC frameworks wrap every Conv in ``Transpose(0,3,1,2)`` ...
``Transpose(0,2,3,1)``. This pass moves each Transpose downstream, swapping it with its consumer,
until it meets its inverse, a constant it can be folded into, or a barrier. Notation: ``T(p)`` is
``Transpose`` with ``perm = p``; ``y = T(p)(x)`` means ``y.shape[i] == x.shape[p[i]]``.

Rules:
1. Identity: ``T(0,1,...,r-1)(x)  =>  x``; a Transpose nothing reads is dropped. At a graph
   output the producer's output takes the output's name; where that is impossible (the source is
   a graph input or another graph output, or a subgraph reads it) the node becomes an
   ``Identity``.
2. Compose: ``T(q)(T(p)(x))  =>  T(r)(x)`` with ``r[i] = p[q[i]]``; the inner Transpose goes when
   nothing else reads it. An inverse pair composes to the identity and disappears by rule 1.
3. Fold: ``T(p)(constant)  =>  constant'`` (a new initializer; an initializer that other nodes
   still read is never modified). A constant is an initializer, a Constant node, or a
   shape-only op (Identity, Reshape, Squeeze, Unsqueeze, and Cast where numpy converts as ONNX
   does) of constants: raw converter output is full of them (``Transpose(Reshape(W, shape))``
   for every depthwise kernel). Such a chain goes once nothing reads it.
4. Push: ``N(T(p)(x), ...)  =>  T(p')(N'(x, ...))`` for ``N`` in the handler table, which remaps
   what depends on the axis order:
   a. elementwise unary ops (Relu, Clip, Cast, Sigmoid, ...): ``p' = p``;
   b. broadcasting binary and variadic ops (Add, Mul, Where, PRelu, comparisons, ...): every
      other operand is rank-aligned (unsqueezed) and permuted by ``p^-1``: constants are
      rewritten, non-constant operands get a compensating ``T(p^-1)``; ``p' = p``;
   c. Concat and Split: ``axis -> p[axis]``; Concat's other inputs as in 4b;
   d. Pad: pads (attribute, or input from opset 11) permuted, or the ``axes`` input (opset 18)
      remapped;
   e. Slice: ``axes -> p[axes]`` (an absent ``axes`` means ``0..len(starts)-1`` and is made
      explicit);
   f. Reduce* and ArgMax/ArgMin: ``axes -> p[axes]`` (attribute, or input from opset 18 and for
      ReduceSum from 13); with ``keepdims=0`` the permutation shrinks to the kept axes;
   g. Softmax, LogSoftmax, Hardmax: ``axis -> p[axis]`` from opset 13; before 13 the input is
      flattened to 2-D at ``axis``, so the push happens only when ``p`` leaves the trailing
      block ``axis..r-1`` in place;
   h. Squeeze (``p'`` shrinks) and Unsqueeze (``p'`` grows, new axes stay in place);
   i. QuantizeLinear / DequantizeLinear: per-axis ``axis -> p[axis]`` (blocked: barrier);
   k. Tile (constant repeats permuted), CumSum (``axis -> p[axis]``), Gather with 0-D or 1-D
      indices (``axis -> p[axis]``; 0-D indices drop the axis as ``keepdims=0`` does);
   j. Reshape that only splits and merges whole axes (GroupNormalization's
      ``[N,H,W,C] -> [N,H,W,G,C/G]``), where each merged group comes from consecutive axes in
      order: the target is rewritten in the untransposed order and ``p'`` moves the groups as
      ``p`` did. A Reshape that only drops and adds size-1 axes (TFLite's Squeeze and
      ExpandDims) is a Squeeze then an Unsqueeze (4h). The target may be computed from ``Shape``
      (the batch read at run time); every other dimension must be static, and not 1 when axes
      split or merge.
   A push happens only when it lowers the number of Transposes: the cost check counts the
   Transposes removed, the compensations added (none when an operand already has that Transpose,
   or when another Transpose is on its way to it through elementwise ops) and, looking ahead,
   whether each new output Transpose will itself cancel further down. A Transpose with several
   consumers is pushed into all of them or none. Where the look-ahead runs out on a long chain,
   a step into a single elementwise consumer (which keeps the count) is taken. ``N(x, T(x))``
   (``x + x^T``) is a barrier: the push would only trade places with its compensation.
5. Size-1 moves: a Transpose that is left and only moves size-1 dimensions (the other dims keep
   their relative order, static shape known) becomes a ``Reshape``.
6. Unsqueeze: ``T(p)(Unsqueeze(x, axes))`` where ``p`` moves only the inserted axes (the others
   keep their order)  =>  ``Unsqueeze(x, axes')`` with the axes where ``p`` puts them. tf2onnx
   writes every Conv1D as ``Unsqueeze -> T(0,3,1,2) -> Conv -> T(0,2,3,1) -> Squeeze``; once the
   pushes cancel the rest, what is left before each Conv is such a Transpose.

7. Absorb: a consumer that ends the layout takes the Transpose in, and nothing is left to push on:
   a. ``Shape(T(p)(x))  =>  Gather(Shape(x), p[start:end])``; ``Size(T(p)(x))  =>  Size(x)``;
   b. ``MatMul(Flatten(T(p)(x)), W)`` (a Flatten, or a Reshape to ``[batch, features]``, with
      ``p`` keeping the batch axis first and every other dimension static; the Gemm of a Keras
      ``Dense`` after ``Flatten`` too)  =>  ``MatMul(Flatten(x), W')`` where ``W'`` is ``W`` with
      its rows in the untransposed order: the classic ``Conv -> Flatten -> Dense`` head. Each
      dot product then adds in another order, so this is a sum-like reduction (below).

Boundaries and barriers: graph inputs and outputs keep their names, types, shapes and layout,
unless asked otherwise: ``inputs_as_nchw`` / ``outputs_as_nchw`` declare named channels-last
inputs and outputs channels-first (a signature change, reported, and recorded in the model's
metadata by :mod:`graphfix.layout`), which lets the boundary Transposes cancel too.
Ops outside the handler table (Resize, Flatten, Conv, ...), ops in other domains, and
nodes holding subgraphs are barriers; the reason is logged at DEBUG. If/Loop/Scan bodies are
optimized as graphs of their own; a value read from an enclosing scope is never rewired or
removed under the body that reads it.

Sum-like reductions (ReduceSum, ReduceMean, ReduceL2, ...) add in memory order, so after a push
the float result can differ in the last bits, and so can the dot products of rule 7b;
``reorder_reductions=False`` makes them barriers and keeps every output bit-identical. Every other
rewrite only moves data.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix import layout, model_io
from graphfix.errors import PassError
from graphfix.graph import dim_of
from graphfix.passes._graphs import subgraphs
from graphfix.options import RunOptions
from graphfix.registry import Pass, PassResult, register

__all__ = ["EliminateTransposes", "eliminate_transposes"]

logger = logging.getLogger(__name__)

Perm = tuple[int, ...]

_DEFAULT_DOMAINS = ("", "ai.onnx")

ELEMENTWISE_UNARY = (
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Cast", "CastLike",
    "Ceil", "Celu", "Clip", "Cos", "Cosh", "Dropout", "Elu", "Erf", "Exp", "Floor", "Gelu",
    "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg",
    "Not", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh",
    "Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu",
)
BROADCAST_BINARY = (
    "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Equal", "Greater",
    "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Mean", "Min", "Mod", "Mul", "Or", "Pow",
    "PRelu", "Sub", "Sum", "Where", "Xor",
)
REDUCE_OPS = (
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
    "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
)
# Reductions whose float result depends on the order in which elements are combined.
_ORDER_SENSITIVE_REDUCE = frozenset(REDUCE_OPS) - {"ReduceMax", "ReduceMin"}

# Transposes one node lets through before it becomes a barrier (a cycle breaker: a node sees
# one or two in every graph met so far).
_MAX_PUSHES_PER_NODE = 4
# How far the cost check looks ahead, in consumers visited per decision.
_LOOKAHEAD_BUDGET = 64
# Full re-scans of the remaining Transposes after the worklist runs dry (a fixed point is reached
# in one or two in practice; the bound keeps a pathological graph linear).
_MAX_SWEEPS = 4
# How far upstream the cost check looks for a Transpose that will arrive at an operand.
_CHAIN_DEPTH = 8
# What the look-ahead finds arriving at an operand when the Transpose is not placed yet.
_PLANNED = onnx.NodeProto(op_type="Transpose", name="planned")
# Ops that only reshape their input: applied to constants, rule 3 computes their value (the
# depthwise kernels tf2onnx writes as Transpose(Reshape(W, shape)) fold into one initializer).
_SHAPE_ONLY = frozenset({"Cast", "Identity", "Reshape", "Squeeze", "Unsqueeze"})
# Ops whose output's first dimension is their first input's (besides elementwise ops).
_KEEPS_FIRST_DIM = frozenset({
    "AveragePool", "BatchNormalization", "Conv", "ConvTranspose", "GlobalAveragePool",
    "GlobalMaxPool", "InstanceNormalization", "LRN", "LayerNormalization", "LogSoftmax", "LpPool",
    "MaxPool", "Softmax",
})
# Consumers that can take a Transpose in (rule 7).
_ABSORBERS = frozenset({"Flatten", "Reshape", "Shape", "Size"})
# Side-effect-free ops converters compute Reshape targets with: once a rewrite leaves such a
# computation unread, it goes.
_SHAPE_MATH = frozenset({"Cast", "Concat", "Gather", "Identity", "Shape", "Slice", "Squeeze",
                         "Unsqueeze"})
# Ops whose output has the rank of their first input (for graphs shape inference left blank,
# where a converter computed an axes input).
_SAME_RANK = frozenset({
    *ELEMENTWISE_UNARY, "AveragePool", "BatchNormalization", "Concat", "Conv", "ConvTranspose",
    "DepthToSpace", "InstanceNormalization", "LRN", "LogSoftmax", "LpPool", "MaxPool", "Pad",
    "Resize", "Slice", "Softmax", "SpaceToDepth", "Split",
})


def _cast(value: np.ndarray, to: int | None) -> np.ndarray | None:
    """``Cast(to)`` of a constant where numpy's conversion is ONNX's: integers and booleans to
    any number, floats to floats (float to integer rounds by implementation: not folded)."""
    try:
        target = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(to)) if to else None
    except (KeyError, TypeError, ValueError):
        return None
    if target is None or target.kind not in "biuf" or value.dtype.kind not in "biuf":
        return None
    if value.dtype.kind == "f" and target.kind != "f" or to == onnx.TensorProto.BFLOAT16:
        return None
    return value.astype(target)


def _is_identity(perm: Sequence[int]) -> bool:
    return all(i == a for i, a in enumerate(perm))


_invert = layout.invert


def _compose(inner: Perm, outer: Perm) -> Perm:
    """``T(outer)(T(inner)(x)) == T(result)(x)``."""
    return tuple(inner[o] for o in outer)


def _shrink(perm: Perm, removed: set[int]) -> Perm:
    """The permutation left on the output of a node that drops the ``removed`` axes of its
    transposed input (axes numbered in the transposed layout)."""
    kept_x = sorted(perm[i] for i in range(len(perm)) if i not in removed)
    position = {axis: k for k, axis in enumerate(kept_x)}
    return tuple(position[perm[i]] for i in range(len(perm)) if i not in removed)


def _grow(perm: Perm, inserted: set[int]) -> Perm:
    """The permutation on the output of a node that inserts size-1 axes at ``inserted`` (output
    positions) into its transposed input: the new axes stay in place, the others keep ``perm``
    among themselves."""
    kept = [i for i in range(len(perm) + len(inserted)) if i not in inserted]
    grown = list(range(len(kept) + len(inserted)))
    for i, position in enumerate(kept):
        grown[position] = kept[perm[i]]
    return tuple(grown)


def _shape_bounds(node: onnx.NodeProto, rank: int) -> tuple[int, int]:
    """``Shape``'s ``start`` and ``end`` for an input of ``rank``, normalized and clamped."""
    bounds = (_attr(node, "start", 0), _attr(node, "end", rank))
    start, end = (min(max(i + rank if i < 0 else i, 0), rank) for i in bounds)
    return start, end


def _attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for attr in node.attribute:
        if attr.name == name:
            # The cost check reads perm, axis and axes at every step: the common types directly.
            if attr.type == onnx.AttributeProto.INT:
                return attr.i
            if attr.type == onnx.AttributeProto.INTS:
                return list(attr.ints)
            return onnx.helper.get_attribute_value(attr)
    return default


def _set_attr(node: onnx.NodeProto, name: str, value: Any) -> None:
    for i, attr in enumerate(node.attribute):
        if attr.name == name:
            del node.attribute[i]
            break
    node.attribute.append(onnx.helper.make_attribute(name, value))


def _outer_refs(graph: onnx.GraphProto) -> set[str]:
    """Names a (sub)graph reads from enclosing scopes."""
    defined = {i.name for i in graph.input}
    defined.update(i.name for i in graph.initializer)
    defined.update(s.values.name for s in graph.sparse_initializer)
    for node in graph.node:
        defined.update(node.output)
    refs: set[str] = set()
    for node in graph.node:
        refs.update(name for name in node.input if name and name not in defined)
        for sub in subgraphs(node):
            refs.update(_outer_refs(sub) - defined)
    refs.update(o.name for o in graph.output if o.name not in defined)
    return refs


def _all_names(graph: onnx.GraphProto, names: set[str]) -> None:
    names.update(i.name for i in graph.input)
    names.update(o.name for o in graph.output)
    names.update(v.name for v in graph.value_info)
    names.update(i.name for i in graph.initializer)
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
        if node.name:
            names.add(node.name)
        for sub in subgraphs(node):
            _all_names(sub, names)


def _count_transposes(graph: onnx.GraphProto) -> int:
    count = 0
    for node in graph.node:
        if node.op_type == "Transpose" and node.domain in _DEFAULT_DOMAINS:
            count += 1
        for sub in subgraphs(node):
            count += _count_transposes(sub)
    return count


@dataclasses.dataclass
class _Plan:
    """How a consumer changes when the Transposes on its ``data_slots`` move past it."""

    out_perms: list[Perm | None]
    data_slots: tuple[int, ...]
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    # input slot -> new constant value (a fresh initializer is written for it)
    const_inputs: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Absorb:
    """Rule 7: the consumer takes the Transpose in (``kind`` is "shape" or "flatten")."""

    kind: str


Handler = Callable[["_GraphOptimizer", onnx.NodeProto, Perm], "_Plan | str"]
Decision = tuple[int, list[tuple[onnx.NodeProto, "_Plan | _Absorb | None"]]]


# ---------------------------------------------------------------- handlers (rule 4)
def _normalize_axes(axes: Sequence[int], rank: int) -> list[int] | None:
    out = [int(a) + rank if int(a) < 0 else int(a) for a in axes]
    if any(a < 0 or a >= rank for a in out) or len(set(out)) != len(out):
        return None
    return out


def _unary(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4a; Dropout's mask has the data's shape, so it gets the same permutation.
    if g.source in node.input[1:] and node.input[0] != g.source:
        return "the Transpose reaches an input that is not the data (CastLike's type)"
    return _Plan(out_perms=[perm] * len(node.output), data_slots=(0,))


def _broadcast(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4b. Pre-opset-7 style explicit broadcasting is not remapped.
    if _attr(node, "broadcast") is not None or _attr(node, "axis") is not None:
        return "legacy broadcast attributes"
    slots = tuple(i for i, name in enumerate(node.input) if name)
    reason = g.check_operands(node, slots, perm, same_rank=False)
    return reason or _Plan(out_perms=[perm], data_slots=slots)


def _concat(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4c.
    axes = _normalize_axes([_attr(node, "axis", 0)], len(perm))
    if axes is None:
        return "axis out of range"
    slots = tuple(i for i, name in enumerate(node.input) if name)
    reason = g.check_operands(node, slots, perm, same_rank=True)
    return reason or _Plan(out_perms=[perm], data_slots=slots, attrs={"axis": perm[axes[0]]})


def _split(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4c.
    axes = _normalize_axes([_attr(node, "axis", 0)], len(perm))
    if axes is None:
        return "axis out of range"
    return _Plan(out_perms=[perm] * len(node.output), data_slots=(0,),
                 attrs={"axis": perm[axes[0]]})


def _pad(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4d.
    rank = len(perm)
    plan = _Plan(out_perms=[perm], data_slots=(0,))
    if g.opset < 11:
        pads = _attr(node, "pads")
        if pads is None or len(pads) != 2 * rank:
            return "pads attribute missing or of the wrong length"
        plan.attrs["pads"] = _permute_pads(list(pads), perm)
        return plan
    if len(node.input) > 3 and node.input[3]:
        axes_value = g.const_value(node.input[3])
        if axes_value is None:
            return "axes input is not a constant"
        axes = _normalize_axes(axes_value.reshape(-1).tolist(), rank)
        if axes is None:
            return "axes out of range"
        plan.const_inputs[3] = np.array([perm[a] for a in axes], dtype=axes_value.dtype)
        return plan
    pads_value = g.const_value(node.input[1]) if len(node.input) > 1 else None
    if pads_value is None or pads_value.size != 2 * rank:
        return "pads input is not a constant of length 2*rank"
    plan.const_inputs[1] = np.array(
        _permute_pads(pads_value.reshape(-1).tolist(), perm), dtype=pads_value.dtype
    )
    return plan


def _permute_pads(pads: list[int], perm: Perm) -> list[int]:
    rank = len(perm)
    begin, end = [0] * rank, [0] * rank
    for i in range(rank):
        begin[perm[i]] = pads[i]
        end[perm[i]] = pads[rank + i]
    return begin + end


def _slice(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4e.
    rank = len(perm)
    plan = _Plan(out_perms=[perm], data_slots=(0,))
    if g.opset < 10:
        starts = _attr(node, "starts")
        if starts is None:
            return "starts attribute missing"
        axes = _normalize_axes(_attr(node, "axes", list(range(len(starts)))), rank)
        if axes is None:
            return "axes out of range"
        plan.attrs["axes"] = [perm[a] for a in axes]
        return plan
    if len(node.input) > 3 and node.input[3]:
        axes_value = g.const_value(node.input[3])
        if axes_value is None:
            return "axes input is not a constant"
        axes = _normalize_axes(axes_value.reshape(-1).tolist(), rank)
        dtype = axes_value.dtype
    else:
        count = g.static_length(node.input[1])
        if count is None:
            return "axes absent and the length of starts is unknown"
        axes = _normalize_axes(list(range(count)), rank)
        dtype = g.index_dtype(node.input[1])
    if axes is None:
        return "axes out of range"
    plan.const_inputs[3] = np.array([perm[a] for a in axes], dtype=dtype)
    return plan


def _reduce(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4f.
    rank = len(perm)
    if node.op_type in _ORDER_SENSITIVE_REDUCE and not g.reorder_reductions:
        return "sum-like reduction would change its float summation order"
    plan = _Plan(out_perms=[perm], data_slots=(0,))
    axes_from_input = g.opset >= 18 or (node.op_type == "ReduceSum" and g.opset >= 13)
    if node.op_type in ("ArgMax", "ArgMin"):
        axes_raw: list[int] | None = [_attr(node, "axis", 0)]
    elif axes_from_input:
        if len(node.input) > 1 and node.input[1]:
            value = g.const_value(node.input[1])
            if value is None:
                return "axes input is not a constant"
            axes_raw = value.reshape(-1).tolist()
        else:
            axes_raw = None
    else:
        axes_raw = _attr(node, "axes")
    if not axes_raw:
        if axes_from_input and _attr(node, "noop_with_empty_axes", 0):
            return plan  # the node is the identity
        axes_raw = list(range(rank))
    axes = _normalize_axes(axes_raw, rank)
    if axes is None:
        return "axes out of range"
    new_axes = sorted(perm[a] for a in axes)
    if node.op_type in ("ArgMax", "ArgMin"):
        plan.attrs["axis"] = new_axes[0]
    elif axes_from_input:
        if len(node.input) > 1 and node.input[1]:
            plan.const_inputs[1] = np.array(new_axes, dtype=np.int64)
    else:
        if _attr(node, "axes") is not None:
            plan.attrs["axes"] = new_axes
    if not _attr(node, "keepdims", 1):
        plan.out_perms = [_shrink(perm, set(axes)) if len(axes) < rank else None]
    return plan


def _softmax(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4g.
    rank = len(perm)
    axes = _normalize_axes([_attr(node, "axis", -1 if g.opset >= 13 else 1)], rank)
    if axes is None:
        return "axis out of range"
    axis = axes[0]
    if g.opset >= 13:
        return _Plan(out_perms=[perm], data_slots=(0,), attrs={"axis": perm[axis]})
    # Before opset 13 the input is coerced to 2-D at `axis`; the rows stay the same rows, in
    # the same element order, only when the trailing block is untouched.
    if any(perm[i] != i for i in range(axis, rank)):
        return "opset < 13 softmax: permutation crosses the 2-D coercion at axis"
    return _Plan(out_perms=[perm], data_slots=(0,))


def _squeeze(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4h.
    rank = len(perm)
    raw = g.axes_of(node)
    if isinstance(raw, str):
        return raw
    if raw is None:
        # Squeeze every size-1 dim: the same dims in either layout, so no edit, but p' needs them.
        shape = g.shape(node.input[0])
        if shape is None or any(d is None for d in shape):
            return "axes absent and the input shape is not static"
        axes = [i for i, d in enumerate(shape) if d == 1]
        plan = _Plan(out_perms=[], data_slots=(0,))
    else:
        normalized = _normalize_axes(raw, rank)
        if normalized is None:
            return "axes out of range"
        axes = normalized
        plan = _Plan(out_perms=[], data_slots=(0,))
        new_axes = sorted(perm[a] for a in axes)
        if g.opset >= 13:
            plan.const_inputs[1] = np.array(new_axes, dtype=np.int64)
        else:
            plan.attrs["axes"] = new_axes
    plan.out_perms = [_shrink(perm, set(axes)) if len(axes) < rank else None]
    return plan


def _unsqueeze(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4h: the new axes keep their positions; the old axes are permuted among the rest.
    raw = g.axes_of(node)
    if isinstance(raw, str):
        return raw
    if raw is None:
        return "axes missing"
    axes = _normalize_axes(raw, len(perm) + len(raw))
    if axes is None:
        return "axes out of range"
    return _Plan(out_perms=[_grow(perm, set(axes))], data_slots=(0,))


def _tile(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4k: repeats[i] applies to axis perm[i] of the source.
    if len(node.input) < 2 or node.input[1] == g.source:
        return "no repeats"
    repeats = g.const_value(node.input[1])
    if repeats is None or repeats.size != len(perm):
        return "repeats input is not a constant of the input's rank"
    moved = np.empty_like(repeats.reshape(-1))
    moved[list(perm)] = repeats.reshape(-1)
    return _Plan(out_perms=[perm], data_slots=(0,), const_inputs={1: moved})


def _cumsum(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4k: the running sum keeps its order along the axis, wherever the axis lies.
    axis = g.const_value(node.input[1]) if len(node.input) > 1 else None
    if axis is None or axis.size != 1 or node.input[1] == g.source:
        return "axis input is not a constant"
    axes = _normalize_axes([int(axis.reshape(-1)[0])], len(perm))
    if axes is None:
        return "axis out of range"
    return _Plan(out_perms=[perm], data_slots=(0,),
                 const_inputs={1: np.array(perm[axes[0]], dtype=axis.dtype).reshape(axis.shape)})


def _gather(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4k: Gather along one axis of the data with 0-D or 1-D indices.
    if node.input[0] != g.source or g.source in node.input[1:]:
        return "gathers with the transposed tensor as indices"
    axes = _normalize_axes([_attr(node, "axis", 0)], len(perm))
    index_rank = g.rank(node.input[1])
    if axes is None or index_rank not in (0, 1):
        return "axis out of range or indices of rank other than 0 and 1"
    plan = _Plan(out_perms=[perm], data_slots=(0,), attrs={"axis": perm[axes[0]]})
    if index_rank == 0:
        plan.out_perms = [_shrink(perm, {axes[0]}) if len(perm) > 1 else None]
    return plan


def _reshape(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4j.
    source = g.source
    if node.input[0] != source or source in node.input[1:]:
        return "reads the transposed tensor as its shape"
    if _attr(node, "allowzero", 0):
        return "allowzero"
    shape = g.shape(source)
    if shape is None or len(shape) != len(perm):
        return "input shape unknown"
    target = g.reshape_target(node, shape)
    if isinstance(target, str):
        return target
    if 0 in shape or 0 in target:
        return "zero-size dimension"  # a 0 in the rewritten target would copy another axis
    batch = shape[0] is None
    if batch and (target[0] is not None or perm[0] != 0):
        return "the dynamic batch does not stay the first axis on its own"
    offset = int(batch)
    if None in shape[offset:] or None in target[offset:]:
        return "dynamic dimensions besides the batch"
    ones_in = {i for i, d in enumerate(shape) if d == 1}
    ones_out = {j for j, d in enumerate(target) if d == 1}
    if (ones_in or ones_out) and [d for d in shape if d != 1] == [d for d in target if d != 1]:
        # Only size-1 axes go and come (TFLite writes Squeeze and ExpandDims as Reshapes): a
        # Squeeze then an Unsqueeze, as in case 4h.
        squeezed = _shrink(perm, ones_in) if len(ones_in) < len(perm) else ()
        out_perm = _grow(squeezed, ones_out)
        moved: list[int] = [0] * len(target)
        for j, d in enumerate(target):
            moved[out_perm[j]] = -1 if d is None else int(d)
        return _reshape_plan(g, out_perm, moved)
    static_in = [int(d) for d in shape[offset:]]  # type: ignore[arg-type]
    static_out = [int(d) for d in target[offset:]]  # type: ignore[arg-type]
    if 1 in static_in or 1 in static_out:
        return "size-1 dimensions"  # they could belong to either neighbour's group
    matched = _reshape_groups(static_in, static_out)
    if matched is None:
        return "the reshape does not split or merge whole axes"
    groups = [([0], [0])] * offset + [
        ([i + offset for i in ins], [j + offset for j in outs]) for ins, outs in matched]
    # Each group of transposed axes must come from consecutive source axes, in order.
    for ins, _ in groups:
        first = perm[ins[0]]
        if [perm[i] for i in ins] != list(range(first, first + len(ins))):
            return "a merged group of axes is permuted inside"
    new_target: list[int] = []
    out_perm = [0] * len(target)
    for ins, outs in sorted(groups, key=lambda group: perm[group[0][0]]):
        for j in outs:
            out_perm[j] = len(new_target)
            new_target.append(0 if target[j] is None else int(target[j]))  # type: ignore[arg-type]
    return _reshape_plan(g, tuple(out_perm), new_target)


def _reshape_plan(g: _GraphOptimizer, out_perm: Perm, target: list[int]) -> _Plan:
    """Case 4j's plan: the Reshape gets ``target`` (attribute before opset 5, else input)."""
    plan = _Plan(out_perms=[out_perm], data_slots=(0,))
    if g.opset < 5:
        plan.attrs["shape"] = target
    else:
        plan.const_inputs[1] = np.array(target, np.int64)
    return plan


def _reshape_groups(
    dims_in: list[int], dims_out: list[int]
) -> list[tuple[list[int], list[int]]] | None:
    """The finest pairing of consecutive input axes with consecutive output axes of equal size
    (a Reshape that only splits and merges axes); None when the products never line up."""
    groups = []
    i = j = 0
    while i < len(dims_in) and j < len(dims_out):
        ins, outs = [i], [j]
        size_in, size_out = dims_in[i], dims_out[j]
        while size_in != size_out:
            if size_in < size_out:
                i += 1
                if i == len(dims_in):
                    return None
                ins.append(i)
                size_in *= dims_in[i]
            else:
                j += 1
                if j == len(dims_out):
                    return None
                outs.append(j)
                size_out *= dims_out[j]
        groups.append((ins, outs))
        i += 1
        j += 1
    return groups if i == len(dims_in) and j == len(dims_out) else None


def _quantize(g: _GraphOptimizer, node: onnx.NodeProto, perm: Perm) -> _Plan | str:
    # Case 4i.
    if _attr(node, "block_size", 0):
        return "blocked quantization: scale would need the permutation too"
    plan = _Plan(out_perms=[perm], data_slots=(0,))
    if g.opset < 13:
        return plan  # per-tensor only
    scale_rank = g.rank(node.input[1]) if len(node.input) > 1 else None
    if _attr(node, "axis") is not None or scale_rank != 0:
        axes = _normalize_axes([_attr(node, "axis", 1)], len(perm))
        if axes is None:
            if scale_rank == 0:
                return plan
            return "axis out of range"
        plan.attrs["axis"] = perm[axes[0]]
    return plan


_PUSH_THROUGH: dict[str, Handler] = {
    **dict.fromkeys(ELEMENTWISE_UNARY, _unary),
    **dict.fromkeys(BROADCAST_BINARY, _broadcast),
    **dict.fromkeys(REDUCE_OPS, _reduce),
    "ArgMax": _reduce,
    "ArgMin": _reduce,
    "Concat": _concat,
    "Split": _split,
    "Pad": _pad,
    "Slice": _slice,
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "Hardmax": _softmax,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "QuantizeLinear": _quantize,
    "DequantizeLinear": _quantize,
    "Reshape": _reshape,
    "Tile": _tile,
    "CumSum": _cumsum,
    "Gather": _gather,
}


@dataclasses.dataclass
class _Stats:
    folded_into_constants: int = 0
    pushed_through: int = 0
    converted_to_reshape: int = 0
    identity_dropped: int = 0
    absorbed_by_consumers: int = 0


class _Names:
    """Fresh, deterministic names, unique across the whole model."""

    def __init__(self, taken: set[str]) -> None:
        self._taken = taken
        self._next: dict[str, int] = {}  # per base: the suffix to try first (no rescans)

    def fresh(self, base: str) -> str:
        candidate = base
        n = self._next.get(base, 0)
        if n:
            candidate = f"{base}_{n}"
        while candidate in self._taken:
            n += 1
            candidate = f"{base}_{n}"
        self._next[base] = n + 1
        self._taken.add(candidate)
        return candidate


class _GraphOptimizer:
    """Rules 1-5 on one graph, with producer/consumer maps kept up to date by every edit."""

    def __init__(
        self,
        graph: onnx.GraphProto,
        *,
        opset: int,
        ir_version: int,
        names: _Names,
        shapes: dict[str, tuple[int | None, ...]],
        elem_types: dict[str, int],
        leading: dict[str, str],
        stats: _Stats,
        reorder_reductions: bool,
    ) -> None:
        self.graph = graph
        self.opset = opset
        self.ir_version = ir_version
        self.names = names
        self.shapes = shapes
        self.elem_types = elem_types
        self.leading = leading
        self.stats = stats
        self.reorder_reductions = reorder_reductions
        self.modified = False

        self.nodes: list[onnx.NodeProto] = list(graph.node)
        self.order: dict[int, int] = {id(n): i for i, n in enumerate(self.nodes)}
        self.dead: set[int] = set()
        self.producer: dict[str, onnx.NodeProto] = {}
        self.consumers: dict[str, dict[int, onnx.NodeProto]] = {}
        self.implicit: dict[str, set[int]] = {}  # tensor -> nodes whose subgraphs read it
        self.graph_inputs = {i.name for i in graph.input}
        self.graph_outputs = {o.name for o in graph.output}
        self.initializers: dict[str, onnx.TensorProto] = {
            i.name: i for i in graph.initializer if i.name not in self.graph_inputs
        }
        self.removed_initializers: set[str] = set()
        self.new_initializers: list[onnx.TensorProto] = []
        for node in self.nodes:
            for name in node.output:
                if name:
                    self.producer[name] = node
            for name in node.input:
                if name:
                    self.consumers.setdefault(name, {})[id(node)] = node
            for sub in subgraphs(node):
                for name in _outer_refs(sub):
                    self.consumers.setdefault(name, {})[id(node)] = node
                    self.implicit.setdefault(name, set()).add(id(node))
        self.worklist: list[onnx.NodeProto] = []
        self.queued: set[int] = set()
        self.source: str = ""  # the transposed tensor the running handler is asked about
        self.pushing: str = ""  # the output of the Transpose being pushed
        self.origin: str = ""  # the input of the Transpose being pushed
        self.renamed: dict[str, str] = {}  # tensors renamed to a graph output's name
        self.reader: onnx.NodeProto | None = None  # the node a push is rewriting
        self.pinned: set[int] = set()  # compensations waiting for an arriving Transpose
        self.perms: dict[int, Perm | None] = {}
        self.folded: dict[str, np.ndarray | None] = {}  # values of shape-only ops (rule 3)
        self.pushes = 0
        self.max_pushes = 8 * len(self.nodes) + 64
        self.pushed: dict[int, int] = {}  # node -> Transposes pushed through it so far
        self.compensates: dict[int, int] = {}  # compensating Transpose -> the node it feeds
        self.whole_shapes: dict[str, str] = {}  # source -> its whole Shape (rule 7a)

    # ------------------------------------------------------------ facts about tensors
    def const_value(self, name: str) -> np.ndarray | None:
        if name in self.initializers:
            # Weights left in their data file are read here, this tensor alone, when a rule
            # needs the value; None when the external data was never loaded.
            return model_io.tensor_value(self.initializers[name])
        node = self.producer.get(name)
        if node is not None and node.op_type in _SHAPE_ONLY and node.domain in _DEFAULT_DOMAINS:
            if name not in self.folded:
                self.folded[name] = self._shape_only_value(node)
            return self.folded[name]
        if node is not None and node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS:
            for attr in node.attribute:
                if attr.name == "value":
                    return numpy_helper.to_array(attr.t)
                if attr.name in ("value_float", "value_int"):
                    return np.array(onnx.helper.get_attribute_value(attr),
                                    dtype=np.float32 if attr.name == "value_float" else np.int64)
                if attr.name in ("value_floats", "value_ints"):
                    return np.array(onnx.helper.get_attribute_value(attr),
                                    dtype=np.float32 if attr.name == "value_floats" else np.int64)
        return None

    def _shape_only_value(self, node: onnx.NodeProto) -> np.ndarray | None:
        """Rule 3's constants include a shape-only op (``_SHAPE_ONLY``) of constants."""
        return _fold_shape_only(node, self.opset, self.const_value)

    def is_constant(self, name: str) -> bool:
        if name in self.initializers:
            return model_io.has_value(self.initializers[name])
        return self.const_value(name) is not None

    def transpose_perm(self, node: onnx.NodeProto) -> Perm | None:
        key = id(node)
        if key in self.perms:
            return self.perms[key]
        perm = _attr(node, "perm")
        if perm is None:
            rank = self.rank(node.input[0])
            result = None if rank is None else tuple(reversed(range(rank)))
        else:
            result = tuple(int(a) for a in perm)
        self.perms[key] = result
        return result

    def _set_perm(self, node: onnx.NodeProto, perm: Perm) -> None:
        _set_attr(node, "perm", list(perm))
        self.perms[id(node)] = perm

    def rank(self, name: str) -> int | None:
        return self._rank(name, _CHAIN_DEPTH)

    def _rank(self, name: str, depth: int) -> int | None:
        node = self.producer.get(name)
        if node is not None and node.op_type == "Transpose" and node.domain in _DEFAULT_DOMAINS:
            perm = _attr(node, "perm")
            if perm is not None:
                return len(perm)
        if name in self.initializers:
            return len(self.initializers[name].dims)
        if name in self.shapes:
            return len(self.shapes[name])
        value = self.const_value(name)
        if value is not None:
            return value.ndim
        # Shape inference left it blank (an axes input a converter computed): derived from the
        # producer's inputs, ``depth`` producers up at most.
        if node is None or node.domain not in _DEFAULT_DOMAINS or depth <= 0:
            return None
        if node.op_type in _SAME_RANK and node.input and node.input[0]:
            return self._rank(node.input[0], depth - 1)
        if node.op_type in BROADCAST_BINARY:
            ranks = [self._rank(i, depth - 1) for i in node.input if i]
            known = [r for r in ranks if r is not None]
            return max(known) if known and len(known) == len(ranks) else None
        if node.op_type in ("Squeeze", "Unsqueeze") and node.input:
            axes = self.axes_of(node)
            base = self._rank(node.input[0], depth - 1)
            if base is None or not isinstance(axes, list):
                return None
            return base - len(axes) if node.op_type == "Squeeze" else base + len(axes)
        return None

    def shape(self, name: str) -> tuple[int | None, ...] | None:
        if name in self.initializers:
            return tuple(self.initializers[name].dims)
        return self.shapes.get(name)

    def static_length(self, name: str) -> int | None:
        value = self.const_value(name)
        if value is not None:
            return int(value.size)
        shape = self.shape(name)
        if shape is not None and len(shape) == 1 and shape[0] is not None:
            return shape[0]
        return None

    def index_dtype(self, name: str) -> type:
        value = self.const_value(name)
        if value is not None:
            return value.dtype.type
        if self.elem_types.get(name) == onnx.TensorProto.INT32:
            return np.int32
        return np.int64

    def axes_of(self, node: onnx.NodeProto) -> list[int] | None | str:
        """Squeeze/Unsqueeze axes: attribute before opset 13, input from 13."""
        return _squeeze_axes(node, self.opset, self.const_value)

    def only_consumer(self, name: str, node: onnx.NodeProto) -> bool:
        users = self.consumers.get(name, {})
        return list(users) == [id(node)] and name not in self.graph_outputs

    def check_operands(
        self, node: onnx.NodeProto, slots: tuple[int, ...], perm: Perm, *, same_rank: bool
    ) -> str | None:
        """Why the operands in ``slots`` cannot be brought into the untransposed layout."""
        rank = len(perm)
        for slot in slots:
            name = node.input[slot]
            if name == self.source:
                continue
            operand_rank = self.rank(name)
            if operand_rank is None:
                return f"rank of operand {name!r} unknown"
            if operand_rank > rank:
                return f"operand {name!r} has a higher rank than the transposed input"
            if operand_rank == rank or operand_rank == 0 and not same_rank:
                continue
            if same_rank:
                return f"operand {name!r} has a different rank"
            if not self.is_constant(name):
                return f"non-constant operand {name!r} of lower rank"
        return None

    # ------------------------------------------------------------ cost check (rule 4)
    def operand_cost(self, name: str, node: onnx.NodeProto, perm: Perm, source: str) -> int:
        """Transposes added (+) or removed (-) by bringing operand ``name`` of ``node`` from the
        transposed layout ``perm`` back to the untransposed one."""
        if self.rank(name) == 0 or self.is_constant(name):
            return 0
        inverse = _invert(perm)
        producer = self.producer.get(name)
        if producer is not None and producer.op_type == "Transpose" and (
            producer.domain in _DEFAULT_DOMAINS
        ):
            inner = self.transpose_perm(producer)
            if inner is not None and len(inner) == len(perm):
                identity = _is_identity(_compose(inner, inverse))
                if self.only_consumer(name, node):
                    return -1 if identity else 0
                return 0 if identity else 1
        if self._arriving_transpose(name, node, perm, source) is not None:
            return -1
        if self._sibling_transpose(name, inverse, source) is not None:
            return 0
        return 1

    def _sibling_transpose(self, name: str, perm: Perm, exclude: str) -> onnx.NodeProto | None:
        """A Transpose(perm) that already reads ``name`` (its output can be shared)."""
        for user in self.consumers.get(name, {}).values():
            if user.op_type == "Transpose" and user.domain in _DEFAULT_DOMAINS and (
                user.output[0] != exclude and self.transpose_perm(user) == perm
            ):
                return user
        return None

    def _arriving_transpose(
        self, name: str, node: onnx.NodeProto, perm: Perm, pushed: str
    ) -> onnx.NodeProto | None:
        """The ``T(perm)`` that ``name``, read by ``node`` alone, comes from through a chain of
        single-reader elementwise ops it will be pushed through. It will reach ``node`` and
        cancel the compensation, so the operand costs what a direct ``T(perm)`` operand costs.
        The chain may end at ``pushed``, the transposed tensor being pushed now, whatever else
        reads it: that push moves the Transpose past all of its readers (``N(t, f(t))``, as in
        Swish ``t * Sigmoid(t)``)."""
        current, reader = name, node
        for _ in range(_CHAIN_DEPTH):
            if current == pushed and current != name:
                producer = self.producer.get(current)
                if producer is not None and producer.op_type == "Transpose" and (
                    producer.domain in _DEFAULT_DOMAINS
                ):
                    return producer if self.transpose_perm(producer) == perm else None
                # Looking ahead, ``pushed`` is the output of a node the Transpose was planned
                # into: it will carry T(perm) and be pushed past all of its readers the same way
                # (Swish after a Squeeze, as Keras's Conv1D converts).
                return _PLANNED
            if not self.only_consumer(current, reader) or current in self.implicit:
                return None
            producer = self.producer.get(current)
            if producer is None or producer.domain not in _DEFAULT_DOMAINS:
                return None
            if producer.op_type == "Transpose":
                return producer if self.transpose_perm(producer) == perm else None
            handler = _PUSH_THROUGH.get(producer.op_type)
            if handler is not _unary and handler is not _broadcast or (
                sum(1 for o in producer.output if o) != 1
            ):
                return None
            data = [i for i in producer.input[: 1 if handler is _unary else None]
                    if i and not (self.rank(i) == 0 or self.is_constant(i))]
            if len(data) != 1:
                return None
            self.source = data[0]
            plan = handler(self, producer, perm)
            if isinstance(plan, str) or plan.out_perms[0] != perm:
                return None
            current, reader = data[0], producer
        return None

    def consumer_cost(
        self, node: onnx.NodeProto, source: str, perm: Perm, budget: list[int]
    ) -> tuple[int, _Plan | _Absorb | None] | None:
        """Cost of moving ``T(perm)`` on tensor ``source`` past ``node``; None: cannot."""
        absorb = self.absorber(node, source, perm)
        if absorb is not None:
            return 0, absorb
        if node.op_type == "Transpose" and node.domain in _DEFAULT_DOMAINS:
            outer = self.transpose_perm(node)
            if outer is None or len(outer) != len(perm):
                return None
            dead = not self.consumers.get(node.output[0]) and (
                node.output[0] not in self.graph_outputs
            )
            return (-1 if dead or _is_identity(_compose(perm, outer)) else 0), None
        handler = _PUSH_THROUGH.get(node.op_type) if node.domain in _DEFAULT_DOMAINS else None
        if handler is None:
            logger.debug("barrier %s (%s): no handler for %s::%s", node.name, source,
                         node.domain or "ai.onnx", node.op_type)
            return None
        if any(True for _ in subgraphs(node)):
            return None
        if self.pushed.get(id(node), 0) >= _MAX_PUSHES_PER_NODE:
            # Two Transposes that keep trading places round a node (each move looks like a
            # gain to the look-ahead) would otherwise spin until the global push limit.
            logger.debug("barrier %s (%s): pushed through %d times already", node.name,
                         node.op_type, _MAX_PUSHES_PER_NODE)
            return None
        self.source = source
        plan = handler(self, node, perm)
        if isinstance(plan, str):
            logger.debug("barrier %s (%s): %s", node.name, node.op_type, plan)
            return None
        cost = 0
        seen: set[str] = {source}
        for slot in plan.data_slots:
            name = node.input[slot]
            if name == self.origin:
                # N(x, T(x)): the push would only trade places with the compensation T(x)
                # (x + x^T), and the two can chase each other.
                logger.debug("barrier %s (%s): reads the untransposed %s too", node.name,
                             node.op_type, name)
                return None
            operand_producer = self.producer.get(name)
            if operand_producer is not None and operand_producer.op_type == "Transpose" and (
                operand_producer.input[0] == source
            ):
                # N(t, T(t)): the operand's Transpose is also a consumer of the pushed tensor.
                logger.debug("barrier %s (%s): reads %s through another Transpose too",
                             node.name, node.op_type, source)
                return None
            if name not in seen:
                seen.add(name)
                cost += self.operand_cost(name, node, perm, source)
        for out, out_perm in zip(node.output, plan.out_perms):
            if out and out_perm is not None:
                cost += self.place_cost(out, out_perm, budget)
        return cost, plan

    def absorber(self, node: onnx.NodeProto, source: str, perm: Perm) -> _Absorb | None:
        """Rule 7: whether ``node``, reading ``T(perm)`` as ``source``, can take it in."""
        if node.op_type not in _ABSORBERS or node.domain not in _DEFAULT_DOMAINS or (
            node.input[0] != source
        ):
            return None
        if node.op_type == "Shape":
            return _Absorb("shape")
        if node.op_type == "Size":
            return _Absorb("size")
        if node.op_type in ("Flatten", "Reshape") and self.reorder_reductions and (
            self._flattens_into_weights(node, source, perm)
        ):
            return _Absorb("flatten")
        return None

    def _flattens_into_weights(self, node: onnx.NodeProto, source: str, perm: Perm) -> bool:
        """Rule 7b: ``node`` flattens ``source`` to ``[batch, features]`` and only MatMul/Gemm
        with constant weights read the result."""
        shape = self.shape(source)
        if perm[0] != 0 or shape is None or len(shape) != len(perm) or source in node.input[1:]:
            return False
        if any(d is None or d <= 0 for d in shape[1:]):
            return False
        features = int(np.prod(shape[1:]))
        if node.op_type == "Flatten":
            axis = _attr(node, "axis", 1)
            if (axis + len(perm) if axis < 0 else axis) != 1:
                return False
        elif not self._reshapes_to(node, shape, features):
            return False
        out = node.output[0]
        users = list(self.consumers.get(out, {}).values())
        if not users or out in self.graph_outputs or out in self.implicit:
            return False
        for user in users:
            if user.domain not in _DEFAULT_DOMAINS or user.op_type not in ("MatMul", "Gemm"):
                return False
            if len(user.input) < 2 or user.input[0] != out or user.input[1] == out:
                return False
            if user.op_type == "Gemm" and _attr(user, "transA", 0):
                return False
            weights = user.input[1]
            if not self.is_constant(weights):
                return False
            weight_shape = self.shape(weights) if weights in self.initializers else None
            if weight_shape is None:
                value = self.const_value(weights)
                weight_shape = None if value is None else value.shape
            side = 1 if user.op_type == "Gemm" and _attr(user, "transB", 0) else 0
            if weight_shape is None or len(weight_shape) != 2 or weight_shape[side] != features:
                return False
        return True

    def _reshapes_to(
        self, node: onnx.NodeProto, shape: tuple[int | None, ...], features: int
    ) -> bool:
        """Whether Reshape ``node`` of a tensor of ``shape`` gives ``[shape[0], features]``."""
        target = "allowzero" if _attr(node, "allowzero", 0) else self.reshape_target(node, shape)
        if isinstance(target, list):
            return len(target) == 2 and target[1] == features
        out = self.shape(node.output[0])  # shape inference's word
        return out is not None and len(out) == 2 and out[1] == features

    def same_batch(self, tensor: str, source: str) -> bool:
        """Whether ``tensor``'s first dimension is ``source``'s (a converter reads the batch off
        another tensor than the one it reshapes)."""
        if tensor == source:
            return True
        producer = self.producer.get(source)
        if producer is not None and producer.op_type == "Transpose" and (
            producer.input[0] == tensor and (self.transpose_perm(producer) or (1,))[0] == 0
        ):
            return True
        symbol = self.leading.get(source)
        if symbol is not None and self.leading.get(tensor) == symbol:
            return True
        return self._batch_root(tensor) == self._batch_root(source)

    def _batch_root(self, name: str) -> str:
        """The furthest tensor up a chain of ops that keep a dynamic first dimension as it is
        (shape inference names it afresh after a Reshape)."""
        for _ in range(4 * _CHAIN_DEPTH):
            shape = self.shape(name)
            node = self.producer.get(name)
            if not shape or shape[0] is not None or node is None or not node.input or (
                node.domain not in _DEFAULT_DOMAINS
            ):
                return name
            op, upstream = node.op_type, None
            if op in ELEMENTWISE_UNARY or op in _KEEPS_FIRST_DIM or op == "Transpose" and (
                self.transpose_perm(node) or (1,)
            )[0] == 0:
                upstream = node.input[0]
            elif op in BROADCAST_BINARY:
                # Followed only when one operand alone can set the first dimension: every other
                # one has a lower rank or a static 1 there.
                ranks = [(i, self.shape(i)) for i in node.input if i]
                if all(dims is not None for _, dims in ranks):
                    setting = [i for i, dims in ranks if len(dims) == len(shape)  # type: ignore
                               and dims[0] != 1]  # type: ignore[index]
                    if len(setting) == 1 and self.shape(setting[0])[0] is None:  # type: ignore
                        upstream = setting[0]
            elif op == "Reshape" and len(node.input) > 1:
                entries = self.shape_entries(node.input[1])
                rest = [e for e in entries[1:] if isinstance(e, int)] if entries else []
                source_shape = self.shape(node.input[0])
                if entries and entries[0] in (0, -1) and len(rest) == len(entries) - 1 and (
                    source_shape and None not in source_shape[1:] and source_shape[0] is None
                    and int(np.prod(source_shape[1:])) == int(np.prod(rest))
                ):
                    upstream = node.input[0]
            if upstream is None:
                return name
            name = upstream
        return name

    def reshape_target(
        self, node: onnx.NodeProto, shape: tuple[int | None, ...]
    ) -> list[int | None] | str:
        """Reshape ``node``'s output shape for an input of ``shape`` (None: the input's dynamic
        batch, copied), or why it is not known."""
        if self.opset < 5:
            entries: list[int | tuple[str, int]] | None = list(_attr(node, "shape") or [])
        else:
            entries = self.shape_entries(node.input[1]) if len(node.input) > 1 else None
        if not entries:
            return "target shape not known"
        source = node.input[0]
        target: list[int | None] = []
        for k, entry in enumerate(entries):
            if isinstance(entry, tuple):
                tensor, axis = entry
                dims = self.shape(tensor)
                if axis == 0 and shape[0] is None and self.same_batch(tensor, source):
                    target.append(None)
                    continue
                if dims is None or axis >= len(dims) or dims[axis] is None:
                    return "target shape computed from an unknown dimension"
                entry = dims[axis]  # type: ignore[assignment]
            if entry == 0:
                if k >= len(shape):
                    return "target copies a dimension the input lacks"
                target.append(shape[k])
            elif entry == -1 or int(entry) > 0:  # type: ignore[arg-type]
                target.append(int(entry))  # type: ignore[arg-type]
            else:
                return "invalid target shape"
        if target.count(-1) > 1 or shape.count(None) > 1 or target.count(None) > 1:
            return "target shape not known"
        if -1 in target:
            total = int(np.prod([d for d in shape if d is not None]))
            known = int(np.prod([d for d in target if d is not None and d != -1]))
            if known == 0 or total % known:
                return "invalid target shape"
            # With a dynamic batch, -1 is the batch when the other entries take the rest.
            inferred = None if None in shape and None not in target and total == known else (
                total // known)
            target[target.index(-1)] = inferred
        if target.count(None) != shape.count(None):
            return "the dynamic dimension is merged or split"
        return target

    def shape_entries(self, name: str, depth: int = _CHAIN_DEPTH
                      ) -> list[int | tuple[str, int]] | None:
        """The value of a 1-D int64 tensor a converter computes from ``Shape`` (tf2onnx's and
        PyTorch's ``Reshape(x, Concat(Shape(x)[0:1], [-1]))``): each entry an int, or
        ``(tensor, axis)`` for a dimension of a tensor; None when it is not such a tensor."""
        value = self.const_value(name)
        if value is not None:
            if value.ndim > 1 or not np.issubdtype(value.dtype, np.integer):
                return None
            return [int(v) for v in value.reshape(-1)]
        node = self.producer.get(name)
        if node is None or depth <= 0 or node.domain not in _DEFAULT_DOMAINS or not node.input:
            return None
        op = node.op_type
        if op == "Shape":
            rank = self.rank(node.input[0])
            if rank is None:
                return None
            start, end = _shape_bounds(node, rank)
            return [(node.input[0], axis) for axis in range(start, end)]
        if op in ("Identity", "Squeeze", "Unsqueeze") or op == "Cast" and _attr(node, "to") in (
            onnx.TensorProto.INT32, onnx.TensorProto.INT64
        ):
            return self.shape_entries(node.input[0], depth - 1)
        if op == "Concat":
            parts = [self.shape_entries(i, depth - 1) for i in node.input]
            if any(part is None for part in parts):
                return None
            return [entry for part in parts for entry in part]  # type: ignore[union-attr]
        data = self.shape_entries(node.input[0], depth - 1)
        if data is None:
            return None
        if op == "Gather" and len(node.input) > 1 and _attr(node, "axis", 0) == 0:
            indices = self.const_value(node.input[1])
            if indices is None or indices.ndim > 1:
                return None
            picked = [int(i) + len(data) if int(i) < 0 else int(i) for i in indices.reshape(-1)]
            return None if any(i < 0 or i >= len(data) for i in picked) else [
                data[i] for i in picked]
        if op == "Slice" and self.opset >= 10:
            bounds = [self.const_value(i) if i else None for i in node.input[1:5]]
            if bounds[0] is None or bounds[1] is None or bounds[0].size != 1 or (
                bounds[1].size != 1
            ):
                return None
            if len(bounds) > 2 and bounds[2] is not None and int(bounds[2].reshape(-1)[0]) not in (
                0, -1
            ):
                return None
            step = 1 if len(bounds) < 4 or bounds[3] is None else int(bounds[3].reshape(-1)[0])
            if step != 1:
                return None
            start, end = (int(np.clip(int(b.reshape(-1)[0]), -2**62, 2**62)) for b in bounds[:2])
            return data[slice(start, end)]
        return None

    def place_cost(self, name: str, perm: Perm, budget: list[int]) -> int:
        """Transposes that remain from putting ``T(perm)`` on ``name`` and pushing it on: at most
        1 (it stays where it is), less when it can travel on and cancel."""
        if _is_identity(perm) or not self.consumers.get(name) and name not in self.graph_outputs:
            return 0
        decision = self.push_cost(name, perm, budget)
        return 1 if decision is None else min(1, decision[0])

    def push_cost(self, name: str, perm: Perm, budget: list[int]) -> Decision | None:
        """Change in the number of Transposes from moving ``T(perm)`` on ``name`` past all of
        its consumers (the Transpose itself not counted); None when one of them refuses."""
        if name in self.graph_outputs or name in self.implicit:
            return None
        users = list(self.consumers.get(name, {}).values())
        if not users:
            return None
        budget[0] -= len(users)
        if budget[0] < 0:
            return None
        total = 0
        plans: list[tuple[onnx.NodeProto, _Plan | _Absorb | None]] = []
        for user in users:
            result = self.consumer_cost(user, name, perm, budget)
            if result is None:
                return None
            total += result[0]
            plans.append((user, result[1]))
        return total, plans

    # ------------------------------------------------------------ graph edits
    def _enqueue(self, node: onnx.NodeProto) -> None:
        if id(node) not in self.queued and id(node) not in self.dead:
            self.queued.add(id(node))
            self.worklist.append(node)

    def _set_input(self, node: onnx.NodeProto, slot: int, name: str) -> None:
        old = node.input[slot]
        node.input[slot] = name
        if name:
            self.consumers.setdefault(name, {})[id(node)] = node
        if old and old not in node.input:
            self.consumers.get(old, {}).pop(id(node), None)
            self._drop_if_unused(old)

    def _drop_if_unused(self, name: str) -> None:
        """Remove a dead Transpose, Constant or initializer that produced ``name``."""
        if self.consumers.get(name) or name in self.graph_outputs:
            return
        if name in self.initializers:
            del self.initializers[name]
            self.removed_initializers.add(name)
            return
        node = self.producer.get(name)
        if node is not None and node.domain in _DEFAULT_DOMAINS and id(node) not in self.dead and (
            node.op_type in ("Transpose", "Constant")
            or node.op_type in _SHAPE_ONLY and self.const_value(name) is not None
            or node.op_type in _SHAPE_MATH and len(node.output) == 1
        ):
            self._remove_node(node)

    def _remove_node(self, node: onnx.NodeProto) -> None:
        self.dead.add(id(node))
        self.modified = True
        for name in node.output:
            if self.producer.get(name) is node:
                del self.producer[name]
        for name in set(node.input):
            if name:
                self.consumers.get(name, {}).pop(id(node), None)
                self._drop_if_unused(name)

    def _add_node(self, node: onnx.NodeProto, order: int) -> None:
        self.nodes.append(node)
        self.order[id(node)] = order
        for name in node.output:
            self.producer[name] = node
        for name in node.input:
            if name:
                self.consumers.setdefault(name, {})[id(node)] = node
        self.modified = True

    def _new_transpose(self, source: str, perm: Perm, output: str, order: int) -> onnx.NodeProto:
        node = onnx.helper.make_node(
            "Transpose", [source], [output], name=self.names.fresh(f"{output}_transpose"),
            perm=list(perm),
        )
        self._add_node(node, order)
        self._enqueue(node)
        return node

    def _new_initializer(self, value: np.ndarray, base: str, order: int = 0) -> str:
        name = self.names.fresh(base)
        self._add_constant(numpy_helper.from_array(value, name), order)
        return name

    def _add_constant(self, tensor: onnx.TensorProto, order: int) -> None:
        if self.ir_version < 4:
            # IR 3 lists every initializer as a graph input; a Constant leaves the inputs alone.
            node = onnx.helper.make_node("Constant", [], [tensor.name], value=tensor,
                                         name=self.names.fresh(f"{tensor.name}_constant"))
            self._add_node(node, order)
        else:
            self.initializers[tensor.name] = tensor
            self.new_initializers.append(tensor)
        self.modified = True

    # ------------------------------------------------------------ rules
    def run(self) -> None:
        for node in self.nodes:
            if node.op_type == "Transpose" and node.domain in _DEFAULT_DOMAINS:
                self._enqueue(node)
        self.worklist.reverse()  # pop in graph order: upstream Transposes move first
        for _ in range(_MAX_SWEEPS):
            changed = False
            while self.worklist:
                node = self.worklist.pop()
                self.queued.discard(id(node))
                if id(node) not in self.dead and self._visit(node):
                    changed = True
            if not changed:
                break
            for node in self.nodes:
                if node.op_type == "Transpose" and node.domain in _DEFAULT_DOMAINS:
                    self._enqueue(node)
            self.worklist.reverse()
        self._size_one_moves()
        self._write_back()

    def _visit(self, node: onnx.NodeProto) -> bool:
        if node.op_type != "Transpose":
            return False
        perm = self.transpose_perm(node)
        if perm is None:
            logger.debug("keep %s: rank unknown and no perm", node.name)
            return False
        changed = False
        while True:
            # Rule 2: compose with the Transpose that feeds this one.
            producer = self.producer.get(node.input[0])
            if producer is None or producer.op_type != "Transpose" or (
                producer.domain not in _DEFAULT_DOMAINS
            ):
                break
            inner = self.transpose_perm(producer)
            if inner is None or len(inner) != len(perm):
                break
            perm = _compose(inner, perm)
            self._set_perm(node, perm)
            self._set_input(node, 0, producer.input[0])
            self.modified = changed = True
        source, output = node.input[0], node.output[0]
        if not self.consumers.get(output) and output not in self.graph_outputs:
            self._remove_node(node)  # Rule 1: nothing reads it
            return True
        # Rule 1.
        if _is_identity(perm):
            self._drop_identity(node)
            return True
        # Rule 6.
        if self._absorb_into_unsqueeze(node, perm):
            return True
        # Rule 3.
        if output not in self.graph_outputs:
            value = self.const_value(source)
            if value is not None and value.ndim == len(perm):
                tensor = numpy_helper.from_array(np.ascontiguousarray(value.transpose(perm)),
                                                 output)
                self._remove_node(node)
                self._add_constant(tensor, self.order[id(node)])
                self.stats.folded_into_constants += 1
                for user in self.consumers.get(output, {}).values():
                    if user.op_type == "Transpose":
                        self._enqueue(user)
                return True
        # Rule 4.
        if id(node) in self.pinned:
            logger.debug("keep %s: waits for the Transpose arriving at %s", node.name, source)
            return changed
        reader = self.compensates.get(id(node))
        if reader in self.consumers.get(output, {}) and self.pushed.get(reader, 0) >= 2:
            # Pushed back through the node it compensates for, it would undo that push; once
            # the node has seen a second push, the two Transposes are trading places round it.
            logger.debug("keep %s: would undo the push it compensates for", node.name)
            return changed
        budget = [_LOOKAHEAD_BUDGET]
        self.origin = source
        decision = self.push_cost(output, perm, budget)
        if budget[0] < 0 and (decision is None or decision[0] > 0):
            # The look-ahead ran out before it saw where the Transpose ends up: a step into a
            # single elementwise consumer costs nothing (one Transpose out, one in, same
            # elements), so long chains are walked a step at a time.
            decision = self._free_step(output, perm)
        if decision is None:
            return changed
        cost, plans = decision
        if cost > 0:
            logger.debug("keep %s: pushing would not lower the Transpose count (%+d)",
                         node.name, cost - 1)
            return changed
        self.pushes += 1
        if self.pushes > self.max_pushes:
            logger.debug("keep %s: push limit of %d reached", node.name, self.max_pushes)
            return changed
        logger.debug("push %s (perm %s) into %s: %+d Transposes", node.name, perm,
                     [user.op_type for user, _ in plans], cost - 1)
        for user, plan in plans:
            # A cancellation settled on the way may have renamed the source (rule 1).
            source = self.renamed.get(source, source)
            if plan is None:
                self._compose_into(user, source, perm)
            elif isinstance(plan, _Absorb):
                self._absorb(user, plan, output, source, perm)
            else:
                self._apply(user, plan, output, source, perm)
        if id(node) not in self.dead:
            self._remove_node(node)
        return True

    def _free_step(self, name: str, perm: Perm) -> Decision | None:
        users = list(self.consumers.get(name, {}).values())
        if len(users) != 1 or name in self.graph_outputs or name in self.implicit:
            return None
        (user,) = users
        if user.domain not in _DEFAULT_DOMAINS or _PUSH_THROUGH.get(user.op_type) is not _unary:
            return None
        if len(user.output) != 1 or any(True for _ in subgraphs(user)):
            return None
        return 0, [(user, _unary(self, user, perm))]  # type: ignore[list-item]

    def _compose_into(self, user: onnx.NodeProto, source: str, perm: Perm) -> None:
        outer = self.transpose_perm(user)
        assert outer is not None
        composed = _compose(perm, outer)
        self._set_perm(user, composed)
        self._set_input(user, 0, source)
        # Settle the cancellation now, as the cost check counted it: left for later, a pending
        # identity could be composed back into a real permutation by the next push.
        if not self.consumers.get(user.output[0]) and user.output[0] not in self.graph_outputs:
            self._remove_node(user)
        elif _is_identity(composed):
            self._drop_identity(user)
        else:
            self._enqueue(user)

    def _absorb_into_unsqueeze(self, node: onnx.NodeProto, perm: Perm) -> bool:
        """Rule 6: ``T(p)(Unsqueeze(x, axes))`` where ``p`` only moves the inserted axes is an
        Unsqueeze that inserts them where ``p`` puts them."""
        source = node.input[0]
        unsqueeze = self.producer.get(source)
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or (
            unsqueeze.domain not in _DEFAULT_DOMAINS
        ) or not self.only_consumer(source, node) or source in self.implicit:
            return False
        axes = self.axes_of(unsqueeze)
        inserted = _normalize_axes(axes, len(perm)) if isinstance(axes, list) else None
        if inserted is None:
            return False
        kept = [axis for axis in perm if axis not in inserted]
        if kept != sorted(kept):
            return False
        moved = [i for i, axis in enumerate(perm) if axis in inserted]
        if self.opset < 13:
            _set_attr(unsqueeze, "axes", moved)
        else:
            order = self.order[id(unsqueeze)]
            name = self._new_initializer(np.array(moved, np.int64),
                                         f"{unsqueeze.name or 'Unsqueeze'}_axes", order)
            self._set_input(unsqueeze, 1, name)
        shape = self.shapes.pop(source, None)
        if shape is not None and len(shape) == len(perm):
            self.shapes[source] = tuple(shape[axis] for axis in perm)
        logger.debug("absorb %s into %s: axes %s -> %s", node.name, unsqueeze.name, axes, moved)
        self._set_perm(node, tuple(range(len(perm))))
        self._drop_identity(node)
        return True

    def _drop_identity(self, node: onnx.NodeProto) -> None:
        source, output = node.input[0], node.output[0]
        if output not in self.graph_outputs and output not in self.implicit:
            for user in list(self.consumers.get(output, {}).values()):
                for slot, name in enumerate(user.input):
                    if name == output:
                        self._set_input(user, slot, source)
            self._remove_node(node)
            self.stats.identity_dropped += 1
            return
        producer = self.producer.get(source)
        if (producer is not None and source not in self.graph_outputs
                and source not in self.implicit and output not in self.implicit):
            # The graph output keeps its name: the producer writes it directly and the other
            # readers of the source read it under that name.
            producer.output[list(producer.output).index(source)] = output
            self.renamed[source] = output
            self.producer[output] = producer
            self.producer.pop(source, None)
            self._remove_node(node)
            for user in list(self.consumers.get(source, {}).values()):
                for slot, name in enumerate(user.input):
                    if name == source:
                        self._set_input(user, slot, output)
            self.stats.identity_dropped += 1
            return
        node.op_type = "Identity"
        del node.attribute[:]
        self.perms.pop(id(node), None)
        self.modified = True
        self.stats.identity_dropped += 1

    def _apply(
        self, user: onnx.NodeProto, plan: _Plan, transposed: str, source: str, perm: Perm
    ) -> None:
        order = self.order[id(user)]
        inverse = _invert(perm)
        rank = len(perm)
        done: dict[str, str] = {transposed: source}
        self.pushing = transposed
        self.reader = user
        for slot in plan.data_slots:
            name = user.input[slot]
            if name not in done:
                done[name] = self._untranspose_operand(name, inverse, rank, order)
            if done[name] != name:
                self._set_input(user, slot, done[name])
        for key, value in plan.attrs.items():
            _set_attr(user, key, value)
        for slot, value in plan.const_inputs.items():
            while len(user.input) <= slot:
                user.input.append("")
            new = self._new_initializer(value, f"{user.name or user.op_type}_{slot}", order)
            self._set_input(user, slot, new)
        for index, out_perm in enumerate(plan.out_perms):
            out = user.output[index] if index < len(user.output) else ""
            if not out or out_perm is None or _is_identity(out_perm):
                continue  # a result whose layout does not change (a full reduction) keeps its name
            moved = self.names.fresh(f"{out}_untransposed")
            self._record_shape(out, out_perm, moved, inverse=True)
            user.output[index] = moved
            self.producer.pop(out, None)
            self.producer[moved] = user
            if self.consumers.get(out) or out in self.graph_outputs:
                self._new_transpose(moved, out_perm, out, order)
        self.stats.pushed_through += 1
        self.pushed[id(user)] = self.pushed.get(id(user), 0) + 1
        self.modified = True
        for name in user.input:
            producer = self.producer.get(name)
            if producer is not None and producer.op_type == "Transpose":
                self._enqueue(producer)

    def _absorb(
        self, user: onnx.NodeProto, plan: _Absorb, transposed: str, source: str, perm: Perm
    ) -> None:
        """Rule 7: ``user`` reads ``source`` instead of ``T(perm)(source)``."""
        order = self.order[id(user)]
        label = user.name or user.op_type
        if plan.kind == "shape":
            rank = len(perm)
            start, end = _shape_bounds(user, rank)
            picked = list(perm[start:end])
            out = user.output[0]
            if picked != list(range(start, end)):
                # Every Shape of this Transpose reads one whole Shape of the source: one node
                # more for the first, none for the others.
                whole = self.whole_shapes.get(source)
                if whole is None:
                    del user.attribute[:]
                    whole = self.names.fresh(f"{out}_untransposed")
                    self.whole_shapes[source] = whole
                    self.shapes[whole] = (rank,)
                    user.output[0] = whole
                    self.producer[whole] = user
                else:
                    self._remove_node(user)
                indices = self._new_initializer(np.array(picked, np.int64),
                                                f"{label}_perm", order)
                gather = onnx.helper.make_node("Gather", [whole, indices], [out], axis=0,
                                               name=self.names.fresh(f"{label}_gather"))
                self._add_node(gather, order)
                if id(user) in self.dead:
                    self.stats.absorbed_by_consumers += 1
                    self.modified = True
                    return
        elif plan.kind == "flatten":
            shape = self.shape(transposed)
            assert shape is not None
            untransposed = [0] * len(perm)  # dims 1.. of the source (the batch stays first)
            for i, axis in enumerate(perm[1:], 1):
                untransposed[axis] = int(shape[i])  # type: ignore[arg-type]
            positions = np.arange(int(np.prod(untransposed[1:]))).reshape(untransposed[1:])
            # positions[j] of the transposed flattening is row j's place in the untransposed one
            positions = positions.transpose([axis - 1 for axis in perm[1:]]).reshape(-1)
            rows = np.argsort(positions)
            for reader in list(self.consumers.get(user.output[0], {}).values()):
                weights = reader.input[1]
                value = self.const_value(weights)
                assert value is not None
                side = 1 if reader.op_type == "Gemm" and _attr(reader, "transB", 0) else 0
                moved = np.ascontiguousarray(np.take(value, rows, axis=side))
                name = self._new_initializer(moved, f"{weights}_reordered",
                                             self.order[id(reader)])
                self._set_input(reader, 1, name)
                self.stats.folded_into_constants += 1
        self._set_input(user, 0, source)
        self.stats.absorbed_by_consumers += 1
        self.modified = True

    def _untranspose_operand(self, name: str, inverse: Perm, rank: int, order: int) -> str:
        """``name`` expressed in the untransposed layout (case 4b)."""
        operand_rank = self.rank(name)
        if operand_rank == 0:
            return name
        producer = self.producer.get(name)
        if producer is not None and producer.op_type == "Transpose" and (
            producer.domain in _DEFAULT_DOMAINS
        ) and self.transpose_perm(producer) == _invert(inverse):
            return producer.input[0]  # T(p^-1)(T(p)(z)) is z
        sibling = self._sibling_transpose(name, inverse, self.pushing)
        if sibling is not None:
            return sibling.output[0]
        value = self.const_value(name)
        if value is not None:
            aligned = value.reshape((1,) * (rank - value.ndim) + value.shape)
            moved = np.ascontiguousarray(aligned.transpose(inverse))
            while moved.ndim > 0 and moved.shape[0] == 1:  # leading 1s broadcast anyway
                moved = moved.reshape(moved.shape[1:])
            if moved.shape == value.shape and moved.tobytes() == value.tobytes():
                return name
            self.stats.folded_into_constants += 1
            return self._new_initializer(moved, f"{name}_transposed", order)
        arriving = self._arriving_transpose(name, self.reader, _invert(inverse), self.pushing)
        new = self.names.fresh(f"{name}_transposed")
        self._record_shape(name, inverse, new, inverse=False)
        compensation = self._new_transpose(name, inverse, new, order)
        assert self.reader is not None
        self.compensates[id(compensation)] = id(self.reader)
        if arriving is not None and arriving is not _PLANNED:
            # The compensation waits for the Transpose on its way to cancel it; pushed on first,
            # the two would chase each other round the node.
            self.pinned.add(id(compensation))
            self._enqueue(arriving)
        return new

    def _record_shape(self, known: str, perm: Perm, new: str, *, inverse: bool) -> None:
        """Shape of ``new`` = ``T(perm)(known)`` (or ``known = T(perm)(new)`` when
        ``inverse``), for rule 5 later on."""
        shape = self.shape(known)
        if shape is None or len(shape) != len(perm):
            return
        if inverse:
            moved: list[int | None] = [None] * len(perm)
            for i, axis in enumerate(perm):
                moved[axis] = shape[i]
            self.shapes[new] = tuple(moved)
        else:
            self.shapes[new] = tuple(shape[axis] for axis in perm)

    # ------------------------------------------------------------ rule 5 and write-back
    def _size_one_moves(self) -> None:
        if self.opset < 5 or self.ir_version < 4:
            return  # no shape input before opset 5; at IR 3 the shape would be one node more
        for node in list(self.nodes):
            if id(node) in self.dead or node.op_type != "Transpose" or (
                node.domain not in _DEFAULT_DOMAINS
            ):
                continue
            perm = self.transpose_perm(node)
            if perm is None:
                continue
            shape = self.shapes.get(node.output[0])
            source_shape = self.shape(node.input[0])
            if (shape is None or len(shape) != len(perm)) and source_shape is not None and (
                len(source_shape) == len(perm)
            ):
                shape = tuple(source_shape[axis] for axis in perm)
            if shape is None or len(shape) != len(perm):
                continue
            moved = [perm[i] for i, d in enumerate(shape) if d != 1]
            # An unknown size is copied (0) where the axis stays in place; at most one other
            # is inferred (-1). ONNX Runtime refuses a target with two -1s.
            unknown = [i for i, d in enumerate(shape) if d is None and perm[i] != i]
            if moved != sorted(moved) or len(unknown) > 1 or 0 in shape:
                continue  # a literal 0 in a target copies a dimension
            target = np.array([d if d is not None else (0 if perm[i] == i else -1)
                               for i, d in enumerate(shape)], dtype=np.int64)
            shape_name = self._new_initializer(target, f"{node.output[0]}_shape",
                                               self.order[id(node)])
            node.op_type = "Reshape"
            del node.attribute[:]
            self.perms.pop(id(node), None)
            node.input.append(shape_name)
            self.consumers.setdefault(shape_name, {})[id(node)] = node
            self.stats.converted_to_reshape += 1
            self.modified = True

    def _write_back(self) -> None:
        if not self.modified:
            return
        live = [n for n in self.nodes if id(n) not in self.dead]
        live.sort(key=lambda n: self.order[id(n)])
        ordered = self._toposort(live)
        del self.graph.node[:]
        self.graph.node.extend(ordered)
        if self.removed_initializers or self.new_initializers:
            # Removed in place: rebuilding the list would copy every weight it keeps.
            initializers = self.graph.initializer
            for index in reversed(range(len(initializers))):
                if initializers[index].name in self.removed_initializers:
                    del initializers[index]
            initializers.extend(
                i for i in self.new_initializers if i.name not in self.removed_initializers
            )
        present = set(self.graph_inputs) | set(self.graph_outputs) | set(self.initializers)
        for node in ordered:
            present.update(node.output)
        stale = [v for v in self.graph.value_info if v.name not in present]
        if stale:
            kept_info = [v for v in self.graph.value_info if v.name in present]
            del self.graph.value_info[:]
            self.graph.value_info.extend(kept_info)

    def _toposort(self, nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
        """Stable depth-first topological order: each node after its producers."""
        producer = {name: n for n in nodes for name in n.output if name}
        needs: dict[int, list[onnx.NodeProto]] = {}
        for node in nodes:
            deps = [name for name in node.input if name]
            for sub in subgraphs(node):
                deps.extend(sorted(_outer_refs(sub)))
            needs[id(node)] = [producer[d] for d in deps if d in producer]
        emitted: set[int] = set()
        ordered: list[onnx.NodeProto] = []
        for root in nodes:
            if id(root) in emitted:
                continue
            stack: list[tuple[onnx.NodeProto, int]] = [(root, 0)]
            on_stack = {id(root)}
            while stack:
                node, index = stack[-1]
                deps = needs[id(node)]
                if index < len(deps):
                    stack[-1] = (node, index + 1)
                    dep = deps[index]
                    if id(dep) not in emitted and id(dep) not in on_stack:
                        stack.append((dep, 0))
                        on_stack.add(id(dep))
                    continue
                stack.pop()
                on_stack.discard(id(node))
                emitted.add(id(node))
                ordered.append(node)
        return ordered


def _shape_facts(
    model: onnx.ModelProto,
) -> tuple[dict[str, tuple[int | None, ...]], dict[str, int], dict[str, str]]:
    """Static shapes (None for unknown dims), element types, and the symbol of a symbolic first
    dimension (the batch, as inference names it) from ONNX shape inference, run on a copy that
    carries only the small initializers' data."""
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    graph = light.graph
    graph.name = model.graph.name
    graph.input.extend(model.graph.input)
    graph.output.extend(model.graph.output)
    graph.value_info.extend(model.graph.value_info)
    small: dict[str, np.ndarray] = {}
    overridable = {i.name for i in model.graph.input}  # an initializer listed as an input
    for init in model.graph.initializer:
        if init.data_location != onnx.TensorProto.EXTERNAL and len(init.raw_data) <= 4096 and (
            sum(len(f) for f in (init.float_data, init.int64_data, init.int32_data)) <= 1024
        ):
            graph.initializer.append(init)
            if init.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and (
                init.name not in overridable
            ):
                small[init.name] = numpy_helper.to_array(init)
        else:
            graph.initializer.add(name=init.name, data_type=init.data_type, dims=init.dims)
    # Axes and shapes that converters compute from constants (tf2onnx's TFLite front end writes
    # Unsqueeze(x, Reshape(axes, [1]))) are given to inference as the constants they are.
    outputs = {o.name for o in model.graph.output}
    opset = next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), 0)
    for node in model.graph.node:
        if node.op_type in _SHAPE_ONLY and node.domain in _DEFAULT_DOMAINS and (
            node.output and node.output[0] not in outputs
        ):
            value = _fold_shape_only(node, opset, small.get)
            if value is not None and value.size <= 1024 and value.dtype.kind in "iu":
                small[node.output[0]] = value
                graph.initializer.append(numpy_helper.from_array(value, node.output[0]))
                continue
        graph.node.append(node)
    try:
        inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False, data_prop=True)
    except Exception as error:  # onnx raises several types (InferenceError, ValueError, ...)
        logger.debug("shape inference failed, going on with declared shapes: %s", error)
        inferred = light
    shapes: dict[str, tuple[int | None, ...]] = {}
    types: dict[str, int] = {}
    leading: dict[str, str] = {}

    def collect(g: onnx.GraphProto) -> None:
        for info in (*g.input, *g.output, *g.value_info):
            tensor_type = info.type.tensor_type
            if not info.type.HasField("tensor_type"):
                continue
            types[info.name] = tensor_type.elem_type
            if tensor_type.HasField("shape"):
                dims = tensor_type.shape.dim
                shapes[info.name] = tuple(
                    size if isinstance(size := dim_of(d), int) else None for d in dims
                )
                if dims and dims[0].HasField("dim_param") and dims[0].dim_param:
                    leading[info.name] = dims[0].dim_param
        for node in g.node:
            for sub in subgraphs(node):
                collect(sub)

    collect(inferred.graph)
    return shapes, types, leading


def _fold_shape_only(
    node: onnx.NodeProto, opset: int, value_of: Callable[[str], np.ndarray | None]
) -> np.ndarray | None:
    """The value of a shape-only op (``_SHAPE_ONLY``) whose inputs ``value_of`` knows; None when
    an input is not constant or the op cannot apply."""
    if not node.input or len(node.output) != 1:
        return None
    data = value_of(node.input[0])
    if data is None:
        return None
    if node.op_type == "Identity":
        return data
    if node.op_type == "Cast":
        return _cast(data, _attr(node, "to"))
    if node.op_type == "Reshape":
        second = value_of(node.input[1]) if len(node.input) > 1 and node.input[1] else None
        shape = _attr(node, "shape") if opset < 5 else (
            None if second is None else second.reshape(-1).tolist())
        if shape is None:
            return None
        allow_zero = bool(_attr(node, "allowzero", 0))
        target = [data.shape[i] if d == 0 and not allow_zero and i < data.ndim else int(d)
                  for i, d in enumerate(shape)]
        try:
            return data.reshape(target)
        except ValueError:
            return None
    axes = _squeeze_axes(node, opset, value_of)
    if isinstance(axes, str):
        return None
    if node.op_type == "Squeeze":
        if axes is None:
            return data.reshape([d for d in data.shape if d != 1])
        normalized = _normalize_axes(axes, data.ndim)
        if normalized is None or any(data.shape[a] != 1 for a in normalized):
            return None
        return data.reshape([d for i, d in enumerate(data.shape) if i not in normalized])
    if axes is None:  # Unsqueeze needs its axes
        return None
    normalized = _normalize_axes(axes, data.ndim + len(axes))
    if normalized is None:
        return None
    return np.expand_dims(data, tuple(normalized))


def _squeeze_axes(
    node: onnx.NodeProto, opset: int, value_of: Callable[[str], np.ndarray | None]
) -> list[int] | None | str:
    """Squeeze/Unsqueeze axes: attribute before opset 13, input from 13; None when absent, a
    reason when computed at run time."""
    if opset < 13:
        axes = _attr(node, "axes")
        return None if axes is None else list(axes)
    if len(node.input) < 2 or not node.input[1]:
        return None
    value = value_of(node.input[1])
    if value is None:
        return "axes input is not a constant"
    return value.reshape(-1).tolist()


def _graphs_bottom_up(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    for node in graph.node:
        for sub in subgraphs(node):
            yield from _graphs_bottom_up(sub)
    yield graph


def _names_option(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise PassError(f"{key} must be a list of tensor names, got {value!r}")
    return tuple(dict.fromkeys(value))


@register("eliminate-transposes")
class EliminateTransposes(Pass):
    """Cancel, compose, fold and push Transposes through layout-agnostic ops (NHWC clean-up).

    Options:
        reorder_reductions: push through sum-like reductions (ReduceSum, ReduceMean, ReduceL2,
            ...), whose float results may then differ in the last bits because elements are
            added in another order. False keeps every output bit-identical.
        inputs_as_nchw: names of channels-last graph inputs (``[N, ..., C]``, rank 3 or more) to
            declare channels-first (``[N, C, ...]``): a signature change, made on request only.
            The converter's Transpose after such an input then cancels. Recorded in the model's
            metadata (:mod:`graphfix.layout`), so that parity feeds each model its own layout
            and a second run leaves the input alone.
        outputs_as_nchw: the same for graph outputs.
    """

    def __init__(
        self,
        *,
        reorder_reductions: bool = True,
        inputs_as_nchw: Sequence[str] = (),
        outputs_as_nchw: Sequence[str] = (),
    ) -> None:
        if not isinstance(reorder_reductions, bool):
            raise PassError(
                f"reorder_reductions must be a bool, got {type(reorder_reductions).__name__}"
            )
        self.reorder_reductions = reorder_reductions
        self.inputs_as_nchw = _names_option("inputs_as_nchw", inputs_as_nchw)
        self.outputs_as_nchw = _names_option("outputs_as_nchw", outputs_as_nchw)

    @classmethod
    def configured(cls, run: RunOptions) -> EliminateTransposes:
        return cls(reorder_reductions=not run.keep_reduction_order,
                   inputs_as_nchw=run.inputs_as_nchw, outputs_as_nchw=run.outputs_as_nchw)

    def call(self, model: onnx.ModelProto) -> PassResult:
        opset = next(
            (o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), 0
        )
        before = _count_transposes(model.graph)
        stats = _Stats()
        warnings = _channels_first(model, self.inputs_as_nchw, self.outputs_as_nchw)
        modified = bool(warnings)
        if _count_transposes(model.graph):
            taken: set[str] = set()
            _all_names(model.graph, taken)
            names = _Names(taken)
            shapes, elem_types, leading = _shape_facts(model)
            for graph in list(_graphs_bottom_up(model.graph)):
                optimizer = _GraphOptimizer(
                    graph, opset=opset, ir_version=model.ir_version, names=names,
                    shapes=shapes, elem_types=elem_types, leading=leading, stats=stats,
                    reorder_reductions=self.reorder_reductions,
                )
                optimizer.run()
                modified = modified or optimizer.modified
        after = _count_transposes(model.graph)
        return PassResult(
            model,
            modified=modified,
            stats={
                "transposes_before": before,
                "transposes_after": after,
                "transposes_removed": before - after,
                "folded_into_constants": stats.folded_into_constants,
                "pushed_through": stats.pushed_through,
                "converted_to_reshape": stats.converted_to_reshape,
                "identity_dropped": stats.identity_dropped,
                "absorbed_by_consumers": stats.absorbed_by_consumers,
                "signature_changes": len(warnings),
            },
            warnings=warnings,
        )


def _channels_first(
    model: onnx.ModelProto, inputs: Sequence[str], outputs: Sequence[str]
) -> list[str]:
    """Declare the named graph inputs and outputs channels-first, with a Transpose inside that
    keeps what the graph computes; one line per change (none for a tensor already changed)."""
    if not inputs and not outputs:
        return []
    graph = model.graph
    done = layout.read(model)
    initializers = {i.name for i in graph.initializer}
    declared = {
        "input": {i.name: i for i in graph.input if i.name not in initializers},
        "output": {o.name: o for o in graph.output},
    }
    for kind, names in (("input", inputs), ("output", outputs)):
        unknown = [n for n in names if n not in declared[kind]]
        if unknown:
            raise PassError(
                f"{kind}s_as_nchw: no graph {kind} named {', '.join(map(repr, unknown))}",
                hint=f"the model's {kind}s are {', '.join(map(repr, declared[kind])) or 'none'}",
            )
    read_inside: set[str] = set()
    for node in graph.node:
        for sub in subgraphs(node):
            read_inside |= _outer_refs(sub)
    produced = {name for node in graph.node for name in node.output}
    output_names = [o.name for o in graph.output]
    todo = [(kind, name) for kind, wanted in (("input", inputs), ("output", outputs))
            for name in wanted if name not in done[f"{kind}s"]]
    for kind, name in todo:  # every refusal before the first edit: nothing half-done
        info = declared[kind][name]
        dims = info.type.tensor_type.shape.dim if info.type.HasField("tensor_type") else []
        if not info.type.tensor_type.HasField("shape") or len(dims) < 3:
            raise PassError(
                f"{kind}s_as_nchw: {kind} {name!r} is not a tensor of known rank 3 or more",
                hint="only channels-last tensors [N, ..., C] can be declared [N, C, ...]",
            )
        if name in read_inside:
            raise PassError(f"{kind}s_as_nchw: {kind} {name!r} is read inside a subgraph")
        if kind == "input" and name in output_names:
            raise PassError(f"inputs_as_nchw: input {name!r} is also a graph output")
        if kind == "output" and (name not in produced or output_names.count(name) > 1):
            raise PassError(f"outputs_as_nchw: output {name!r} is not computed by a node of "
                            "the graph (or is listed twice)")
    taken: set[str] = set()
    _all_names(graph, taken)
    names = _Names(taken)
    changes: dict[str, dict[str, Perm]] = {"inputs": {}, "outputs": {}}
    lines = []
    for kind, name in todo:
        info = declared[kind][name]
        dims = info.type.tensor_type.shape.dim
        rank = len(dims)
        to_first: Perm = (0, rank - 1, *range(1, rank - 1))
        inner = names.fresh(f"{name}_channels_last")
        for node in graph.node:
            for slot, used in enumerate(node.input):
                if used == name:
                    node.input[slot] = inner  # the readers read the old layout under a new name
        if kind == "input":
            graph.node.insert(0, onnx.helper.make_node(
                "Transpose", [name], [inner], perm=list(_invert(to_first)),
                name=names.fresh(f"{name}_to_channels_last")))
        else:
            producer = next(n for n in graph.node if name in n.output)
            producer.output[list(producer.output).index(name)] = inner
            graph.node.append(onnx.helper.make_node(
                "Transpose", [inner], [name], perm=list(to_first),
                name=names.fresh(f"{name}_to_channels_first")))
        moved = [onnx.TensorShapeProto.Dimension() for _ in dims]
        for i, axis in enumerate(to_first):
            moved[i].CopyFrom(dims[axis])
        del dims[:]
        dims.extend(moved)
        changes[f"{kind}s"][name] = to_first
        shape = [d.dim_value if d.HasField("dim_value") else d.dim_param or "?" for d in dims]
        lines.append(f"signature changed: {kind} {name!r} is now channels-first {shape} "
                     f"(the original's transposed by {list(to_first)})")
    layout.record(model, inputs=changes["inputs"], outputs=changes["outputs"])
    return lines


def eliminate_transposes(
    model: onnx.ModelProto,
    *,
    reorder_reductions: bool = True,
    inputs_as_nchw: Sequence[str] = (),
    outputs_as_nchw: Sequence[str] = (),
) -> onnx.ModelProto:
    """Function twin of :class:`EliminateTransposes`: rewrites ``model`` in place, returns it."""
    return EliminateTransposes(
        reorder_reductions=reorder_reductions, inputs_as_nchw=inputs_as_nchw,
        outputs_as_nchw=outputs_as_nchw,
    )(model).model
