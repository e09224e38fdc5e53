"""Symbolic shape rules: ops whose result :class:`~graphfix.passes._symbolic.SymbolicFacts` tracks by
its shape only (Reshape, Expand, Transpose, MatMul, Gemm, Split, Flatten, and the ops that keep
their input's shape). The value rules, and the walk that applies both, are in
:mod:`graphfix.passes._symbolic`.
"""

from __future__ import annotations

import onnx

from graphfix.graph import attribute

from ._expr import Expr, Shape, Value, product
from ._symbolic import (
    VALUE_RULES,
    Rule,
    SymbolicFacts,
    _broadcast,
    _div,
    _ints,
    _Tensor,
)

__all__ = ["SHAPE_RULES", "RULES"]


def _reshape_dims(source: Shape, target: Value, allowzero: bool) -> Shape:
    """The output shape of ``Reshape(x, target)`` for ``x`` of shape ``source``."""
    if target is None or any(not isinstance(t, Expr) for t in target):
        return None
    dims: list[Expr | None] = []
    for axis, entry in enumerate(target):
        assert isinstance(entry, Expr)
        if entry.constant == 0 and not allowzero:
            if source is None or axis >= len(source):
                return None
            dims.append(source[axis])
        elif entry.constant == -1:
            dims.append(None)
        else:
            dims.append(entry)
    if dims.count(None) > 1:
        return None
    if None in dims:
        if source is None:
            return None
        known = product([d for d in dims if d is not None])
        inferred = product(source).divide(known) if known.constant != 0 else None
        if inferred is None:
            return None
        dims[dims.index(None)] = inferred
    return tuple(d for d in dims if d is not None)


def _reshape(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source, target = facts.input(node, 0), facts.input(node, 1)
    shape = _reshape_dims(source.shape, target.value, bool(attribute(node, "allowzero", 0)))
    value = source.value if source.value is not None and shape is not None and len(shape) <= 1 else None
    return [_Tensor(shape, value, shape == () and value is not None, source.elem_type)]


def _expand(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source, target = facts.input(node, 0), facts.input(node, 1)
    if target.value is None or any(not isinstance(t, Expr) for t in target.value):
        return [_Tensor(elem_type=source.elem_type)]
    shape = _broadcast([source.shape, tuple(target.value)])  # type: ignore[arg-type]
    return [_Tensor(shape, elem_type=source.elem_type)]


def _transpose(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source = facts.input(node, 0)
    if source.shape is None:
        return [_Tensor()]
    perm = attribute(node, "perm") or list(reversed(range(len(source.shape))))
    return [_Tensor(tuple(source.shape[p] for p in perm), elem_type=source.elem_type)]  # type: ignore


def _matmul(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    a, b = facts.input(node, 0), facts.input(node, 1)
    if a.shape is None or b.shape is None or len(a.shape) < 2 or len(b.shape) < 2:
        return [_Tensor(elem_type=a.elem_type)]
    batch = _broadcast([a.shape[:-2], b.shape[:-2]])
    if batch is None:
        return [_Tensor(elem_type=a.elem_type)]
    return [_Tensor(batch + (a.shape[-2], b.shape[-1]), elem_type=a.elem_type)]


def _gemm(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    a, b = facts.input(node, 0), facts.input(node, 1)
    if a.shape is None or b.shape is None or len(a.shape) != 2 or len(b.shape) != 2:
        return [_Tensor(elem_type=a.elem_type)]
    rows = a.shape[1] if attribute(node, "transA", 0) else a.shape[0]
    columns = b.shape[0] if attribute(node, "transB", 0) else b.shape[1]
    return [_Tensor((rows, columns), elem_type=a.elem_type)]


def _split(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    """Split's outputs: the input's shape with the split axis cut; equal parts share one size
    (so the parts of ``Split(x)`` are known to have equal shapes even when the size is not)."""
    source = facts.input(node, 0)
    count = len(node.output)
    if source.shape is None or not count:
        return [_Tensor(elem_type=source.elem_type) for _ in node.output]
    rank = len(source.shape)
    axis = int(attribute(node, "axis", 0))
    axis = axis + rank if axis < 0 else axis
    whole = source.shape[axis]
    if len(node.input) > 1 and node.input[1]:
        sizes = _ints(facts.input(node, 1).value)
        parts = [Expr.of(n) for n in sizes] if sizes is not None else None
    elif attribute(node, "split") is not None:
        parts = [Expr.of(int(n)) for n in attribute(node, "split")]  # type: ignore[union-attr]
    elif attribute(node, "num_outputs") is not None and whole.constant is None:
        # Opset 18: parts of ceil(size / n), the last one what is left: not provably equal.
        equal = facts._symbol()
        parts = [equal] * (count - 1) + [facts._symbol()]
    elif whole.constant is not None:
        # Equal parts; opset 18's uneven ones are left to ONNX's inference.
        parts = None if whole.constant % count else [Expr.of(whole.constant // count)] * count
    else:
        parts = [_div(whole, Expr.of(count)) or facts._symbol()] * count
    if parts is None or len(parts) != count:
        return [_Tensor(elem_type=source.elem_type) for _ in node.output]
    return [_Tensor(source.shape[:axis] + (part,) + source.shape[axis + 1:],
                    elem_type=source.elem_type) for part in parts]


def _flatten(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source = facts.input(node, 0)
    if source.shape is None:
        return [_Tensor(elem_type=source.elem_type)]
    rank = len(source.shape)
    axis = int(attribute(node, "axis", 1))
    axis = axis + rank if axis < 0 else axis
    shape = (product(source.shape[:axis]), product(source.shape[axis:]))
    return [_Tensor(shape, elem_type=source.elem_type)]


def _keeps_shape(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source = facts.input(node, 0)
    return [_Tensor(source.shape, elem_type=source.elem_type)]


_SAME_SHAPE = (
    "Abs", "Ceil", "Cos", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
    "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax", "Mish", "Neg", "Reciprocal", "Relu",
    "Round", "Selu", "Sigmoid", "Sign", "Sin", "Softmax", "Softplus", "Softsign", "Sqrt",
    "Tanh", "Dropout", "SimplifiedLayerNormalization", "InstanceNormalization",
    "BatchNormalization", "IsNaN", "IsInf", "Clip",
)

SHAPE_RULES: dict[str, Rule] = {
    **dict.fromkeys(_SAME_SHAPE, _keeps_shape),
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Expand": _expand,
    "Transpose": _transpose,
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Split": _split,
}

# Every op's rule: the shape rules here, and the value rules of :mod:`._symbolic` over them.
RULES: dict[str, Rule] = {**SHAPE_RULES, **VALUE_RULES}
