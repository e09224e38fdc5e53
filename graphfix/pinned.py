"""Sizes a model's own weights fix for the dynamic dimensions of its inputs.

    X[T, N, ?] -> LSTM(W[1, 4H, 266])          =>  X's axis 2 is 266
    x[N, ?, H, W] -> Conv(w[64, 3, 7, 7])      =>  x's axis 1 is 3
    h[N, S, ?] -> MatMul(h, w[768, 3072])      =>  h's axis 2 is 768

A signature often leaves a size dynamic that the model does not leave free: an RNN's input size
is its ``W``'s, a convolution's channels are its weight's, a product's inner dimension is its
weight's rows. Generated inputs of any other size are refused by the model, and no size ladder
finds them. Each graph input is followed through ops that keep or move its axes (elementwise
ops, casts, normalizations, Transpose, Unsqueeze, Squeeze) to the consumers whose weights fix
an axis, and that size is the one fed.

Rules (``_PINS``: op type -> the axes its weights fix on the operand at a position):
1. RNN, GRU, LSTM: ``X``'s axis 2 is ``W``'s axis 2; an initial state's direction axis is
   ``W``'s axis 0 and its hidden axis ``R``'s axis 2 (``layout`` 1 swaps batch and direction).
   com.microsoft DynamicQuantizeLSTM stores ``W`` transposed: its axis 1.
2. Conv: the input's axis 1 is the weight's axis 1 times ``group``; ConvTranspose: the weight's
   axis 0.
3. MatMul, MatMulInteger, Gemm: the operand's inner axis is the constant other operand's.
4. BatchNormalization, InstanceNormalization: axis 1 is the scale's size; LayerNormalization:
   the trailing axes are the scale's.
5. A binary elementwise op with a constant operand, or an operand whose size ONNX's shape
   inference proves from the graph (a classifier's logits ``[N, 5]`` plus a prior ``[N, ?]``):
   an axis that meets a size above 1 of the other operand (aligned from the right) is that
   size.
Sizes from two consumers that disagree cancel each other: the size stays free.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping

import onnx

from graphfix.graph import STANDARD_DOMAINS, attribute, forget_declared_shapes
from graphfix.model_io import skeleton, tensor_value
from graphfix.shapes import infer_shapes

__all__ = ["pinned_sizes", "baked_sizes", "SAME_SHAPE"]

logger = logging.getLogger(__name__)

Pins = dict[int, int]  # axis of the operand -> size
PinRule = Callable[[onnx.NodeProto, int, int, Mapping[str, list[int]]], Pins]

# Ops whose output 0 has the shape (and so the axes) of input 0.
SAME_SHAPE = frozenset({
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BatchNormalization", "Cast",
    "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "CumSum", "DequantizeLinear", "Dropout",
    "DynamicQuantizeLinear", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
    "Hardmax", "Identity", "InstanceNormalization", "IsInf", "IsNaN", "LayerNormalization",
    "LeakyRelu", "Log", "LogSoftmax", "LpNormalization", "Mish", "Neg", "Not", "QuantizeLinear",
    "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh",
    "Softmax", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu",
    "RMSNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization",
})
_BROADCAST = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "PRelu", "Max", "Min", "Mod", "Equal", "Greater",
    "Less", "GreaterOrEqual", "LessOrEqual", "And", "Or", "Xor", "BitShift", "Where",
})


def _ints(node: onnx.NodeProto, name: str) -> list[int] | None:
    attribute = next((a for a in node.attribute if a.name == name), None)
    return list(attribute.ints) if attribute is not None else None


def _shape_of(weights: Mapping[str, list[int]], node: onnx.NodeProto, slot: int) -> list[int] | None:
    return weights.get(node.input[slot]) if slot < len(node.input) and node.input[slot] else None


# ---------------------------------------------------------------- rules
def _rnn(node: onnx.NodeProto, slot: int, rank: int, weights: Mapping[str, list[int]]) -> Pins:
    """Rule 1."""
    w, r = _shape_of(weights, node, 1), _shape_of(weights, node, 2)
    transposed = node.op_type == "DynamicQuantizeLSTM"
    layout = attribute(node, "layout", 0)
    if slot == 0 and w is not None and len(w) == 3 and rank == 3:
        return {2: w[1] if transposed else w[2]}
    if slot in (5, 6) and rank == 3:  # initial_h, initial_c
        pins: Pins = {}
        if w is not None and len(w) == 3:
            pins[1 if layout else 0] = w[0]
        hidden = attribute(node, "hidden_size", 0) or (r[2] if r is not None and len(r) == 3 else 0)
        if hidden:
            pins[2] = hidden
        return pins
    return {}


def _conv(node: onnx.NodeProto, slot: int, rank: int, weights: Mapping[str, list[int]]) -> Pins:
    """Rule 2."""
    w = _shape_of(weights, node, 1)
    if slot != 0 or w is None or len(w) != rank or rank < 3:
        return {}
    if node.op_type == "ConvTranspose":
        return {1: w[0]}
    return {1: w[1] * attribute(node, "group", 1)}


def _matmul(node: onnx.NodeProto, slot: int, rank: int, weights: Mapping[str, list[int]]) -> Pins:
    """Rule 3."""
    if slot == 0 and rank >= 1:
        other = _shape_of(weights, node, 1)
        if other is not None and other:
            return {rank - 1: other[-2] if len(other) >= 2 else other[0]}
    if slot == 1 and rank >= 2:
        other = _shape_of(weights, node, 0)
        if other is not None and other:
            return {rank - 2: other[-1]}
    return {}


def _gemm(node: onnx.NodeProto, slot: int, rank: int, weights: Mapping[str, list[int]]) -> Pins:
    """Rule 3, with Gemm's transposes."""
    if rank != 2 or slot not in (0, 1):
        return {}
    other = _shape_of(weights, node, 1 - slot)
    if other is None or len(other) != 2:
        return {}
    trans_a, trans_b = attribute(node, "transA", 0), attribute(node, "transB", 0)
    if slot == 0:
        inner = other[1] if trans_b else other[0]
        return {0 if trans_a else 1: inner}
    inner = other[0] if trans_a else other[1]
    return {1 if trans_b else 0: inner}


def _channels(node: onnx.NodeProto, slot: int, rank: int, weights: Mapping[str, list[int]]) -> Pins:
    """Rule 4: BatchNormalization and InstanceNormalization."""
    scale = _shape_of(weights, node, 1)
    if slot != 0 or rank < 2 or scale is None or len(scale) != 1:
        return {}
    return {1: scale[0]}


def _layer_norm(node: onnx.NodeProto, slot: int, rank: int,
                weights: Mapping[str, list[int]]) -> Pins:
    """Rule 4: LayerNormalization's scale covers the axes from ``axis`` on."""
    scale = _shape_of(weights, node, 1)
    if slot != 0 or scale is None or not scale or len(scale) > rank:
        return {}
    return {rank - len(scale) + i: size for i, size in enumerate(scale) if size > 1}


_PINS: dict[str, PinRule] = {
    **dict.fromkeys(("RNN", "GRU", "LSTM", "DynamicQuantizeLSTM"), _rnn),
    **dict.fromkeys(("Conv", "ConvTranspose", "ConvInteger"), _conv),
    **dict.fromkeys(("MatMul", "MatMulInteger"), _matmul),
    "Gemm": _gemm,
    **dict.fromkeys(("BatchNormalization", "InstanceNormalization"), _channels),
    "LayerNormalization": _layer_norm,
}


# ---------------------------------------------------------------- the walk
class _Walk:
    """Follows one graph input's axes to the consumers that fix them."""

    def __init__(self, graph: onnx.GraphProto, ranks: Mapping[str, int],
                 weights: Mapping[str, list[int]], axes: Mapping[str, list[int]],
                 proven: Mapping[str, list[int | None]] | None = None) -> None:
        self.ranks, self.weights = ranks, weights
        self.proven = proven or {}  # sizes shape inference proves (None: not proven)
        self.axes = axes  # small int64 constants by name: Unsqueeze and Squeeze axes
        self.readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
        for node in graph.node:
            if node.domain not in STANDARD_DOMAINS and node.domain != "com.microsoft":
                continue
            for slot, name in enumerate(node.input):
                if name:
                    self.readers.setdefault(name, []).append((node, slot))

    def pins(self, name: str, rank: int) -> dict[int, int | None]:
        """Input axis -> the size its consumers fix (None where two disagree)."""
        found: dict[int, int | None] = {}
        seen: set[str] = set()
        pending: list[tuple[str, dict[int, int]]] = [(name, {a: a for a in range(rank)})]
        while pending:
            tensor, axes = pending.pop()  # axes: input axis -> this tensor's axis
            if tensor in seen or not axes:
                continue
            seen.add(tensor)
            here = self.ranks.get(tensor)
            if here is None:
                continue
            back = {t: a for a, t in axes.items()}
            for node, slot in self.readers.get(tensor, ()):
                rule = _PINS.get(node.op_type)
                if rule is not None:
                    for axis, size in rule(node, slot, here, self.weights).items():
                        if axis in back and size > 0:
                            previous = found.get(back[axis], size)
                            found[back[axis]] = size if previous == size else None
                if node.op_type in _BROADCAST:
                    self._broadcast(node, slot, here, back, found)
                for output, moved in self._follow(node, slot, here, axes):
                    pending.append((output, moved))
        return found

    def _broadcast(self, node: onnx.NodeProto, slot: int, rank: int, back: dict[int, int],
                   found: dict[int, int | None]) -> None:
        """Rule 5."""
        for other_slot, other in enumerate(node.input):
            if other_slot == slot or not other:
                continue
            constant = self.weights.get(other) or self.proven.get(other)
            if constant is None:
                continue
            for axis in range(rank):
                position = axis - (rank - len(constant))
                if position >= 0 and (constant[position] or 0) > 1 and axis in back:
                    previous = found.get(back[axis], constant[position])
                    found[back[axis]] = constant[position] if previous == constant[position] \
                        else None

    def _follow(self, node: onnx.NodeProto, slot: int, rank: int,
                axes: dict[int, int]) -> list[tuple[str, dict[int, int]]]:
        """Where the tensor's axes go through ``node``: (output, input axis -> its axis)."""
        if not node.output or not node.output[0]:
            return []
        output = node.output[0]
        out_rank = self.ranks.get(output)
        op = node.op_type
        if out_rank is None:
            return []
        if (op in SAME_SHAPE and slot == 0) or (op in _BROADCAST and out_rank >= rank):
            shift = out_rank - rank
            return [(output, {a: t + shift for a, t in axes.items()})]
        if op == "Transpose" and slot == 0:
            perm = _ints(node, "perm") or list(reversed(range(rank)))
            return [(output, {a: perm.index(t) for a, t in axes.items() if t in perm})]
        if op in ("Unsqueeze", "Squeeze") and slot == 0:
            listed = _ints(node, "axes")
            if listed is None:
                listed = self.axes.get(node.input[1]) if len(node.input) > 1 else None
            if listed is None:
                return []
            if op == "Unsqueeze":
                inserted = sorted(a % out_rank for a in listed)
                kept = [p for p in range(out_rank) if p not in inserted]
            else:
                removed = {a % rank for a in listed}
                position = {t: i for i, t in enumerate(p for p in range(rank) if p not in removed)}
                return [(output, {a: position[t] for a, t in axes.items() if t in position})]
            return [(output, {a: kept[t] for a, t in axes.items() if t < len(kept)})]
        return []


def pinned_sizes(model: onnx.ModelProto) -> dict[str, dict[int, int]]:
    """Graph input name -> {axis: size} for the dynamic axes the model's weights fix (see the
    module's rules); inputs and axes nothing fixes are left out."""
    graph = model.graph
    fed = {value.name for value in graph.input}
    weights = {t.name: list(t.dims) for t in graph.initializer if t.name not in fed}
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None:
                weights[node.output[0]] = list(value.dims)
    walk = _Walk(graph, _ranks(model), weights, _int_vectors(graph), _proven_sizes(model))
    found: dict[str, dict[int, int]] = {}
    for value in graph.input:
        if value.name not in fed or value.name in weights:
            continue
        dims = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else None
        if dims is None or not value.type.tensor_type.HasField("shape"):
            continue
        dynamic = {axis for axis, dim in enumerate(dims)
                   if not (dim.HasField("dim_value") and dim.dim_value > 0)}
        if not dynamic:
            continue
        pins = {axis: size for axis, size in walk.pins(value.name, len(dims)).items()
                if axis in dynamic and size is not None}
        if pins:
            found[value.name] = pins
            logger.debug("sizes the weights fix for input %s: %s", value.name, pins)
    return found


# The most sizes baked_sizes gives, and the largest: a size past it would be tried only to be
# refused for its memory.
_MOST_BAKED = 8
_LARGEST_BAKED = 8192


def baked_sizes(model: onnx.ModelProto) -> tuple[int, ...]:
    """The sizes (2 to 8192, at most eight, in graph order) that the main graph's Reshapes hold
    as constants in their target shapes, whole or as a constant part of a Concat, and the
    product of each target's (a length the Reshape cuts into rows of them).

    torch's legacy exporter bakes a size it traced into a Reshape where the module read it
    from a tensor's shape in Python: nn.MultiheadAttention (and so nn.TransformerEncoder)
    reshapes its key and value to ``[10, batch * heads, head_size]`` after tracing 10 tokens.
    Whatever the signature says, the model then runs at that sequence length only, and no
    size ladder finds it. These sizes are tried last for the dynamic dimensions
    (:func:`graphfix.feeds.dynamic_sizes`)."""
    graph = model.graph
    vectors = _int_vectors(graph)
    producers = {output: node for node in graph.node for output in node.output}
    found: list[int] = []
    for node in graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2:
            continue
        target = node.input[1]
        concat = producers.get(target)
        parts = [target] if target in vectors else list(concat.input) if (
            concat is not None and concat.op_type == "Concat") else []
        sizes = [size for part in parts for size in vectors.get(part, ()) if size >= 2]
        product = math.prod(sizes)
        # each size, then their product: x.view(b, -1, 2, 3) needs a length of 6 (or 12...)
        for size in [*sizes, *([product] if len(sizes) > 1 else [])]:
            if size <= _LARGEST_BAKED and size not in found:
                found.append(size)
    return tuple(found[:_MOST_BAKED])


def _int_vectors(graph: onnx.GraphProto) -> dict[str, list[int]]:
    """The int64 scalars and vectors of at most 16 values the graph holds as weights (not
    inputs) or Constants, by name."""
    fed = {value.name for value in graph.input}
    vectors: dict[str, list[int]] = {}
    for tensor in graph.initializer:
        if tensor.data_type == onnx.TensorProto.INT64 and len(tensor.dims) <= 1 and (
                tensor.name not in fed):
            value = tensor_value(tensor)
            if value is not None and value.size <= 16:
                vectors[tensor.name] = [int(v) for v in value.reshape(-1)]
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            value = next((a.t for a in node.attribute if a.name == "value"), None)
            if value is not None and value.data_type == onnx.TensorProto.INT64 and len(
                    value.dims) <= 1:
                array = onnx.numpy_helper.to_array(value)
                if array.size <= 16:
                    vectors[node.output[0]] = [int(v) for v in array.reshape(-1)]
    return vectors


def _ranks(model: onnx.ModelProto) -> dict[str, int]:
    """The rank of every main-graph tensor ONNX's shape inference knows."""
    light = skeleton(model)
    try:
        inferred = infer_shapes(light).graph
    except Exception as error:  # noqa: BLE001 - onnx raises several types
        logger.debug("shape inference failed (%s): no sizes from weights", error)
        inferred = light.graph
    ranks: dict[str, int] = {}
    for value in (*inferred.input, *inferred.value_info, *inferred.output):
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            ranks[value.name] = len(value.type.tensor_type.shape.dim)
    for tensor in model.graph.initializer:
        ranks[tensor.name] = len(tensor.dims)
    return ranks


def _proven_sizes(model: onnx.ModelProto) -> dict[str, list[int | None]]:
    """The sizes of the main graph's tensors that ONNX's shape inference proves from the
    signature and the weights, the shapes the model only declares left out (an exporter may
    declare the sizes it traced); None for a size not proven."""
    light = skeleton(model)
    forget_declared_shapes(light.graph)
    try:
        inferred = infer_shapes(light).graph
    except Exception as error:  # noqa: BLE001 - onnx raises several types
        logger.debug("shape inference failed (%s): no sizes from computed operands", error)
        return {}
    proven: dict[str, list[int | None]] = {}
    for value in (*inferred.value_info, *inferred.output, *inferred.input):
        if value.type.HasField("tensor_type") and value.type.tensor_type.HasField("shape"):
            proven[value.name] = [d.dim_value if d.HasField("dim_value") else None
                                  for d in value.type.tensor_type.shape.dim]
    return proven
