"""How a Transpose moves past each op: one handler per op family, and a table of records.

A handler answers for one consumer ``node`` that reads ``source``, the output of ``T(perm)``:
``handler(facts, node, perm, source) -> Plan | reason``. The :class:`Plan` says how the node
changes when the Transpose moves below it (new attributes, new constant inputs, which inputs
carry data in the transposed layout, and the permutation each output then carries); a string
is why it cannot (the node is a barrier). Handlers read facts, never the graph's edits.

:data:`HANDLERS` maps op types to :class:`HandlerInfo` records, which declare as data what the
look-ahead needs to know of an op family (elementwise, variadic). Adding an op is one handler,
one row in the table, one rule letter in the package docstring, one row in the tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Union

import numpy as np
import onnx

from .facts import GraphFacts, Shape
from .ops import (
    BROADCAST_BINARY,
    ELEMENTWISE_UNARY,
    ORDER_SENSITIVE_REDUCE,
    REDUCE_OPS,
    attr,
)
from .perm import (
    Perm,
    grow,
    normalize_axes,
    per_axis,
    permute_pads,
    shrink,
)

__all__ = ["Plan", "HandlerInfo", "HANDLERS", "Handler"]


@dataclasses.dataclass
class Plan:
    """How a consumer changes when the Transposes on its ``data_slots`` move past it."""

    out_perms: list[Perm | None]
    data_slots: tuple[int, ...]
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)
    # input slot -> new constant value (a fresh initializer is written for it)
    const_inputs: dict[int, np.ndarray] = dataclasses.field(default_factory=dict)
    # input slot -> axes to insert before the compensating Transpose (case 4b: an operand of
    # lower rank, aligned to the full rank first)
    unsqueeze: dict[int, list[int]] = dataclasses.field(default_factory=dict)
    # input slot -> indices of a Gather that reorders a value computed at run time (case 4d:
    # Pad's pads)
    gather: dict[int, list[int]] = dataclasses.field(default_factory=dict)


Handler = Callable[[GraphFacts, onnx.NodeProto, Perm, str], Union[Plan, str]]


@dataclasses.dataclass(frozen=True)
class HandlerInfo:
    """An op family's handler and what the look-ahead may assume of it: ``elementwise`` ops
    give each output element from the same element of their data inputs (a Transpose moves
    through them unchanged); ``variadic`` ones read several data inputs (broadcasting)."""

    handle: Handler
    elementwise: bool = False
    variadic: bool = False


# ---------------------------------------------------------------- case 4a, 4b, 4c
def unary(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4a; Dropout's mask has the data's shape, so it gets the same permutation.
    if source in node.input[1:] and node.input[0] != source:
        return "the Transpose reaches an input that is not the data (CastLike's type)"
    return Plan(out_perms=[perm] * len(node.output), data_slots=(0,))


def broadcast(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4b. Pre-opset-7 style explicit broadcasting is not remapped.
    if attr(node, "broadcast") is not None or attr(node, "axis") is not None:
        return "legacy broadcast attributes"
    slots = tuple(i for i, name in enumerate(node.input) if name)
    return operands(facts, node, slots, perm, source, same_rank=False) or Plan(
        out_perms=[perm], data_slots=slots, unsqueeze=_lower_ranks(facts, node, slots, perm))


def _lower_ranks(facts: GraphFacts, node: onnx.NodeProto, slots: tuple[int, ...],
                 perm: Perm) -> dict[int, list[int]]:
    """Case 4b: non-constant operands of lower rank (not scalars), aligned by broadcasting's
    rule (their axes are the trailing ones) before they are untransposed."""
    out = {}
    for slot in slots:
        rank = facts.rank(node.input[slot])
        if rank is not None and 0 < rank < len(perm) and not facts.is_constant(node.input[slot]):
            out[slot] = list(range(len(perm) - rank))
    return out


def operands(facts: GraphFacts, node: onnx.NodeProto, slots: tuple[int, ...], perm: Perm,
             source: str, *, same_rank: bool) -> str | None:
    """Why the operands in ``slots`` cannot be brought into the untransposed layout."""
    rank = len(perm)
    for slot in slots:
        name = node.input[slot]
        if name == source:
            continue
        operand_rank = facts.rank(name)
        if operand_rank is None:
            return f"rank of operand {name!r} unknown"
        if operand_rank > rank:
            return f"operand {name!r} has a higher rank than the transposed input"
        if operand_rank != rank and same_rank:
            return f"operand {name!r} has a different rank"
    return None


def concat(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4c.
    axes = normalize_axes([attr(node, "axis", 0)], len(perm))
    if axes is None:
        return "axis out of range"
    slots = tuple(i for i, name in enumerate(node.input) if name)
    return operands(facts, node, slots, perm, source, same_rank=True) or Plan(
        out_perms=[perm], data_slots=slots, attrs={"axis": perm[axes[0]]})


def split(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4c.
    axes = normalize_axes([attr(node, "axis", 0)], len(perm))
    if axes is None:
        return "axis out of range"
    return Plan(out_perms=[perm] * len(node.output), data_slots=(0,),
                attrs={"axis": perm[axes[0]]})


# ---------------------------------------------------------------- case 4d, 4e
def pad(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4d.
    rank = len(perm)
    plan = Plan(out_perms=[perm], data_slots=(0,))
    if facts.opset < 11:
        pads = attr(node, "pads")
        if pads is None or len(pads) != 2 * rank:
            return "pads attribute missing or of the wrong length"
        plan.attrs["pads"] = permute_pads(list(pads), perm)
        return plan
    if source in node.input[1:]:
        return "reads the transposed tensor as pads"
    if len(node.input) > 3 and node.input[3]:
        axes_value = facts.const_value(node.input[3])
        if axes_value is None:
            return "axes input is not a constant"
        axes = normalize_axes(axes_value.reshape(-1).tolist(), rank)
        if axes is None:
            return "axes out of range"
        plan.const_inputs[3] = np.array([perm[a] for a in axes], dtype=axes_value.dtype)
        return plan
    pads_value = facts.const_value(node.input[1]) if len(node.input) > 1 else None
    if pads_value is None:
        if len(node.input) > 1 and node.input[1] and facts.static_length(node.input[1]) == 2 * rank:
            # Computed at run time: a Gather reorders them.
            plan.gather[1] = permute_pads(list(range(2 * rank)), perm)
            return plan
        return "pads input is neither a constant nor of length 2*rank"
    if pads_value.size != 2 * rank:
        return "pads input is not of length 2*rank"
    plan.const_inputs[1] = np.array(
        permute_pads(pads_value.reshape(-1).tolist(), perm), dtype=pads_value.dtype)
    return plan


def slice_(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4e.
    rank = len(perm)
    plan = Plan(out_perms=[perm], data_slots=(0,))
    if source in node.input[1:]:
        return "reads the transposed tensor as a bound"
    if facts.opset < 10:
        starts = attr(node, "starts")
        if starts is None:
            return "starts attribute missing"
        axes = normalize_axes(attr(node, "axes", list(range(len(starts)))), rank)
        if axes is None:
            return "axes out of range"
        plan.attrs["axes"] = [perm[a] for a in axes]
        return plan
    if len(node.input) > 3 and node.input[3]:
        axes_value = facts.const_value(node.input[3])
        if axes_value is None:
            return "axes input is not a constant"
        axes = normalize_axes(axes_value.reshape(-1).tolist(), rank)
        dtype = axes_value.dtype
    else:
        count = facts.static_length(node.input[1])
        if count is None:
            return "axes absent and the length of starts is unknown"
        axes = normalize_axes(list(range(count)), rank)
        dtype = facts.index_dtype(node.input[1])
    if axes is None:
        return "axes out of range"
    plan.const_inputs[3] = np.array([perm[a] for a in axes], dtype=dtype)
    return plan


# ---------------------------------------------------------------- case 4f, 4g
def _reduce_axes(facts: GraphFacts, node: onnx.NodeProto, rank: int, from_input: bool
                 ) -> list[int] | None | str:
    """The axes a Reduce or Arg op reduces (None: it is the identity), or why unknown."""
    if node.op_type in ("ArgMax", "ArgMin"):
        raw: list[int] | None = [attr(node, "axis", 0)]
    elif from_input:
        raw = None
        if len(node.input) > 1 and node.input[1]:
            value = facts.const_value(node.input[1])
            if value is None:
                return "axes input is not a constant"
            raw = value.reshape(-1).tolist()
    else:
        raw = attr(node, "axes")
    if not raw:
        if from_input and attr(node, "noop_with_empty_axes", 0):
            return None
        raw = list(range(rank))
    return normalize_axes(raw, rank) or "axes out of range"


def reduce(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4f.
    rank = len(perm)
    if node.op_type in ORDER_SENSITIVE_REDUCE and facts.keeps_order(node):
        return "sum-like reduction would change its float summation order"
    if source in node.input[1:]:
        return "reads the transposed tensor as axes"
    plan = Plan(out_perms=[perm], data_slots=(0,))
    from_input = facts.opset >= 18 or (node.op_type == "ReduceSum" and facts.opset >= 13)
    axes = _reduce_axes(facts, node, rank, from_input)
    if axes is None:
        return plan  # the node is the identity
    if isinstance(axes, str):
        return axes
    new_axes = sorted(perm[a] for a in axes)
    if node.op_type in ("ArgMax", "ArgMin"):
        plan.attrs["axis"] = new_axes[0]
    elif from_input:
        if len(node.input) > 1 and node.input[1]:
            plan.const_inputs[1] = np.array(new_axes, dtype=np.int64)
    elif attr(node, "axes") is not None:
        plan.attrs["axes"] = new_axes
    if not attr(node, "keepdims", 1):
        plan.out_perms = [shrink(perm, set(axes)) if len(axes) < rank else None]
    return plan


def softmax(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4g.
    rank = len(perm)
    axes = normalize_axes([attr(node, "axis", -1 if facts.opset >= 13 else 1)], rank)
    if axes is None:
        return "axis out of range"
    axis = axes[0]
    if facts.opset >= 13:
        return Plan(out_perms=[perm], data_slots=(0,), attrs={"axis": perm[axis]})
    # Before opset 13 the input is coerced to 2-D at ``axis``: every row keeps its elements
    # when the permutation keeps the axes 0..axis-1 among themselves.
    if sorted(perm[:axis]) != list(range(axis)):
        return "opset < 13: the permutation mixes the axes before and after axis"
    if not _keeps_row_order(facts.shape(source), perm, axis):
        if node.op_type == "Hardmax":
            # The first maximum of a row in memory order wins a tie: in another order, another.
            return "opset < 13 Hardmax: the permutation reorders a row, whose first maximum wins"
        if facts.keeps_order(node):
            return "opset < 13: the permutation reorders the elements a row sums"
    return Plan(out_perms=[perm], data_slots=(0,))


def _keeps_row_order(shape: Shape | None, perm: Perm, axis: int) -> bool:
    """Whether each row (axes ``axis``.. flattened) of ``T(perm)(x)``, of ``shape``, lists its
    elements in the order of x's row: the axes longer than 1 keep their order."""
    dims = shape if shape is not None and len(shape) == len(perm) else (None,) * len(perm)
    moved = [perm[i] for i in range(axis, len(perm)) if dims[i] != 1]
    return moved == sorted(moved)


# ---------------------------------------------------------------- case 4h
def squeeze(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4h.
    rank = len(perm)
    raw = facts.axes_of(node)
    if isinstance(raw, str):
        return raw
    plan = Plan(out_perms=[], data_slots=(0,))
    if raw is None:
        # Squeeze every size-1 dim: the same dims in either layout, so no edit, but p' needs them.
        shape = facts.shape(node.input[0])
        if shape is None or any(d is None for d in shape):
            return "axes absent and the input shape is not static"
        axes = [i for i, d in enumerate(shape) if d == 1]
    else:
        normalized = normalize_axes(raw, rank)
        if normalized is None:
            return "axes out of range"
        axes = normalized
        new_axes = sorted(perm[a] for a in axes)
        if facts.opset >= 13:
            plan.const_inputs[1] = np.array(new_axes, dtype=np.int64)
        else:
            plan.attrs["axes"] = new_axes
    plan.out_perms = [shrink(perm, set(axes)) if len(axes) < rank else None]
    return plan


def unsqueeze(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4h: the new axes keep their positions; the old axes are permuted among the rest.
    raw = facts.axes_of(node)
    if isinstance(raw, str):
        return raw
    if raw is None:
        return "axes missing"
    axes = normalize_axes(raw, len(perm) + len(raw))
    if axes is None:
        return "axes out of range"
    return Plan(out_perms=[grow(perm, set(axes))], data_slots=(0,))


# ---------------------------------------------------------------- case 4i, 4k
def quantize(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4i.
    if attr(node, "block_size", 0):
        return "blocked quantization: scale would need the permutation too"
    if source in node.input[1:]:
        return "reads the transposed tensor as scale or zero point"
    plan = Plan(out_perms=[perm], data_slots=(0,))
    if facts.opset < 13:
        return plan  # per-tensor only
    scale_rank = facts.rank(node.input[1]) if len(node.input) > 1 else None
    if attr(node, "axis") is not None or scale_rank != 0:
        axes = normalize_axes([attr(node, "axis", 1)], len(perm))
        if axes is None:
            return plan if scale_rank == 0 else "axis out of range"
        plan.attrs["axis"] = perm[axes[0]]
    return plan


def tile(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4k: repeats[i] applies to axis perm[i] of the source.
    if len(node.input) < 2 or node.input[1] == source:
        return "no repeats"
    repeats = facts.const_value(node.input[1])
    if repeats is None:
        if facts.static_length(node.input[1]) in (None, len(perm)):
            # Computed at run time (of the input's rank, as Tile requires): a Gather reorders
            # them.
            return Plan(out_perms=[perm], data_slots=(0,),
                        gather={1: per_axis(range(len(perm)), perm)})
        return "repeats input is neither a constant nor of the input's rank"
    if repeats.size != len(perm):
        return "repeats input is not of the input's rank"
    moved = np.array(per_axis(repeats.reshape(-1).tolist(), perm), dtype=repeats.dtype)
    return Plan(out_perms=[perm], data_slots=(0,), const_inputs={1: moved})


def resize(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4l: nearest-neighbour resizing picks each output index from its own axis alone.
    if attr(node, "mode", b"nearest") != b"nearest":
        # ONNX Runtime's CPU kernels take linear and cubic only with the resized axes in set
        # places (outermost two or outermost and innermost at rank 4), its CUDA kernel only NCHW.
        return "linear and cubic Resize run only in the layouts the runtime's kernels know"
    if source in node.input[1:]:
        return "reads the transposed tensor as a parameter"
    plan = Plan(out_perms=[perm], data_slots=(0,))
    axes = attr(node, "axes")
    if axes is not None:  # opset 18: scales, sizes and roi follow `axes`, which is remapped
        normalized = normalize_axes(axes, len(perm))
        if normalized is None:
            return "axes out of range"
        plan.attrs["axes"] = [perm[a] for a in normalized]
        return plan
    if node.op_type == "Upsample" and facts.opset < 9:
        scales = attr(node, "scales")
        if scales is None or len(scales) != len(perm):
            return "scales attribute missing or of the wrong length"
        plan.attrs["scales"] = [float(v) for v in per_axis(scales, perm)]
        return plan
    slots = {1: 1} if facts.opset < 11 or node.op_type == "Upsample" else {1: 2, 2: 1, 3: 1}
    for slot, halves in slots.items():
        if len(node.input) <= slot or not node.input[slot]:
            continue
        reason = _permute_per_axis_input(facts, node.input[slot], perm, halves, slot, plan)
        if reason:
            return reason
    return plan


def _permute_per_axis_input(facts: GraphFacts, name: str, perm: Perm, halves: int, slot: int,
                            plan: Plan) -> str | None:
    """Case 4l: a 1-D input with ``halves`` values per axis (roi has a begin and an end half)
    in the untransposed order: a constant rewritten, a run-time value reordered by a Gather."""
    rank = len(perm)
    value = facts.const_value(name)
    if value is None:
        if facts.static_length(name) != halves * rank:
            return f"input {name!r} is neither a constant nor of length {halves}*rank"
        plan.gather[slot] = per_axis(range(halves * rank), perm, halves)
        return None
    if value.size == 0:  # an empty roi, scales or sizes stands for an absent one
        return None
    if value.ndim != 1 or value.size != halves * rank:
        return f"input {name!r} is not of length {halves}*rank"
    plan.const_inputs[slot] = np.array(per_axis(value.tolist(), perm, halves), dtype=value.dtype)
    return None


def cumsum(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4k: the running sum keeps its order along the axis, wherever the axis lies.
    axis = facts.const_value(node.input[1]) if len(node.input) > 1 else None
    if axis is None or axis.size != 1 or node.input[1] == source:
        return "axis input is not a constant"
    axes = normalize_axes([int(axis.reshape(-1)[0])], len(perm))
    if axes is None:
        return "axis out of range"
    return Plan(out_perms=[perm], data_slots=(0,),
                const_inputs={1: np.array(perm[axes[0]], dtype=axis.dtype).reshape(axis.shape)})


def gather(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4k: Gather along one axis of the data with 0-D or 1-D indices.
    if node.input[0] != source or source in node.input[1:]:
        return "gathers with the transposed tensor as indices"
    axes = normalize_axes([attr(node, "axis", 0)], len(perm))
    index_rank = facts.rank(node.input[1])
    if axes is None or index_rank not in (0, 1):
        return "axis out of range or indices of rank other than 0 and 1"
    plan = Plan(out_perms=[perm], data_slots=(0,), attrs={"axis": perm[axes[0]]})
    if index_rank == 0:
        plan.out_perms = [shrink(perm, {axes[0]}) if len(perm) > 1 else None]
    return plan


# ---------------------------------------------------------------- case 4j
def reshape(facts: GraphFacts, node: onnx.NodeProto, perm: Perm, source: str) -> Plan | str:
    # Case 4j.
    if node.input[0] != source or source in node.input[1:]:
        return "reads the transposed tensor as its shape"
    if attr(node, "allowzero", 0):
        return "allowzero"
    shape = facts.shape(source)
    if shape is None or len(shape) != len(perm):
        return "input shape unknown"
    target = facts.reshape_target(node, shape)
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
        squeezed = shrink(perm, ones_in) if len(ones_in) < len(perm) else ()
        out_perm = grow(squeezed, ones_out)
        moved: list[int] = [0] * len(target)
        for j, d in enumerate(target):
            moved[out_perm[j]] = -1 if d is None else int(d)
        return _reshape_plan(facts, out_perm, moved)
    return _split_merge(facts, shape, target, perm, offset)


def _split_merge(facts: GraphFacts, shape: Shape, target: list[int | None], perm: Perm,
                 offset: int) -> Plan | str:
    """Case 4j proper: a Reshape that only splits and merges whole axes."""
    static_in = [int(d) for d in shape[offset:]]  # type: ignore[arg-type]
    static_out = [int(d) for d in target[offset:]]  # type: ignore[arg-type]
    if 1 in static_in or 1 in static_out:
        return "size-1 dimensions"  # they could belong to either neighbour's group
    matched = reshape_groups(static_in, static_out)
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
    return _reshape_plan(facts, tuple(out_perm), new_target)


def _reshape_plan(facts: GraphFacts, out_perm: Perm, target: list[int]) -> Plan:
    """Case 4j's plan: the Reshape gets ``target`` (attribute before opset 5, else input)."""
    plan = Plan(out_perms=[out_perm], data_slots=(0,))
    if facts.opset < 5:
        plan.attrs["shape"] = target
    else:
        plan.const_inputs[1] = np.array(target, np.int64)
    return plan


def reshape_groups(
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


HANDLERS: dict[str, HandlerInfo] = {
    **dict.fromkeys(ELEMENTWISE_UNARY, HandlerInfo(unary, elementwise=True)),
    **dict.fromkeys(BROADCAST_BINARY, HandlerInfo(broadcast, elementwise=True, variadic=True)),
    **dict.fromkeys(REDUCE_OPS, HandlerInfo(reduce)),
    "ArgMax": HandlerInfo(reduce),
    "ArgMin": HandlerInfo(reduce),
    "Concat": HandlerInfo(concat),
    "Split": HandlerInfo(split),
    "Pad": HandlerInfo(pad),
    "Slice": HandlerInfo(slice_),
    "Softmax": HandlerInfo(softmax),
    "LogSoftmax": HandlerInfo(softmax),
    "Hardmax": HandlerInfo(softmax),
    "Squeeze": HandlerInfo(squeeze),
    "Unsqueeze": HandlerInfo(unsqueeze),
    "QuantizeLinear": HandlerInfo(quantize),
    "DequantizeLinear": HandlerInfo(quantize),
    "Reshape": HandlerInfo(reshape),
    "Tile": HandlerInfo(tile),
    "CumSum": HandlerInfo(cumsum),
    "Gather": HandlerInfo(gather),
    "Resize": HandlerInfo(resize),
    "Upsample": HandlerInfo(resize),
}
