"""Symbolic shapes and values: what a graph's shape arithmetic computes, as expressions of the
model's dimensions.

A dimension is an :class:`Expr`: a polynomial with integer coefficients over symbols that
stand for sizes (so every symbol is >= 0). The signature's named dimensions are symbols shared
by every tensor that names them (ONNX: one ``dim_param``, one size); every other unknown size
is a symbol of its own. :class:`SymbolicFacts` walks a graph in order and gives each tensor

- ``shape``: a tuple of expressions (None where the rank is unknown);
- ``value``: for small integer and boolean tensors of rank 0 or 1 (the tensors ``Shape``,
  ``Gather``, ``Concat`` and ``Equal`` compute shapes with), the elements: expressions, or
  True/False, or None for an element not known.

Where graphfix has no rule for an op, the shape ONNX's own inference gives is taken (a named
dimension there is that symbol, an unknown one a fresh symbol).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Optional

import numpy as np
import onnx

from graphfix.graph import STANDARD_DOMAINS, attribute, dim_of
from ._expr import Element, Expr, Shape, Value, product
from graphfix.model_io import tensor_value

__all__ = ["Expr", "SymbolicFacts", "Rule", "VALUE_RULES", "Shape", "Value", "MAX_VALUE_ELEMENTS"]

logger = logging.getLogger(__name__)

# The most elements a tensor may have for its value to be tracked.
MAX_VALUE_ELEMENTS = 64


@dataclasses.dataclass
class _Tensor:
    shape: Shape = None
    value: Value = None
    scalar: bool = False  # value of a rank-0 tensor
    elem_type: int = 0


_INTS = frozenset({onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16,
                   onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                   onnx.TensorProto.UINT32, onnx.TensorProto.UINT64})
_BOOL = onnx.TensorProto.BOOL
# Integer types: (bits, signed).
_BITS = {onnx.TensorProto.INT64: (64, True), onnx.TensorProto.INT32: (32, True),
         onnx.TensorProto.INT16: (16, True), onnx.TensorProto.INT8: (8, True),
         onnx.TensorProto.UINT64: (64, False), onnx.TensorProto.UINT32: (32, False),
         onnx.TensorProto.UINT16: (16, False), onnx.TensorProto.UINT8: (8, False)}


def _in_type(element: Element, elem_type: int) -> Element:
    """``element`` as a tensor of integer ``elem_type`` holds it: a constant wrapped as ONNX
    Runtime wraps it (two's complement: Cast(300, int8) is 44, int32 65536 * 65537 is 65536);
    a size's expression kept in a type of 32 bits or more (a dimension past 2**31 is not
    computed with), not known in a narrower one (Cast(n, uint8) is n mod 256)."""
    if not isinstance(element, Expr) or elem_type not in _BITS:
        return element
    bits, signed = _BITS[elem_type]
    constant = element.constant
    if constant is None:
        return element if bits >= 32 and (signed or element.nonnegative) else None
    wrapped = constant % (1 << bits)
    if signed and wrapped >= 1 << (bits - 1):
        wrapped -= 1 << bits
    return element if wrapped == constant else Expr.of(wrapped)


class SymbolicFacts:
    """Symbolic shapes and values of one graph's tensors (see the module docstring), computed
    by ``rules`` (:data:`graphfix.passes._symbolic_shapes.RULES`: every op's rule)."""

    def __init__(self, graph: onnx.GraphProto, inferred: onnx.GraphProto | None = None,
                 outer: SymbolicFacts | None = None, *, rules: Mapping[str, Rule]) -> None:
        self._rules = rules
        self._tensors: dict[str, _Tensor] = {}
        self._fresh = itertools.count()
        self._outer = outer
        self._inferred: dict[str, onnx.ValueInfoProto] = {}
        if inferred is not None:
            for info in [*inferred.input, *inferred.output, *inferred.value_info]:
                self._inferred[info.name] = info
        for info in graph.input:
            self._tensors[info.name] = self._declared(info)
        for init in graph.initializer:
            if init.name not in self._tensors:  # an input's initializer is only its default
                self._tensors[init.name] = self._constant(init)
        for node in graph.node:
            self._visit(node)

    # ------------------------------------------------------------ queries
    def shape(self, name: str) -> Shape:
        tensor = self._get(name)
        return tensor.shape if tensor else None

    def value(self, name: str) -> Value:
        tensor = self._get(name)
        return tensor.value if tensor else None

    def is_scalar(self, name: str) -> bool:
        tensor = self._get(name)
        return bool(tensor and tensor.scalar)

    def elem_type(self, name: str) -> int:
        tensor = self._get(name)
        return tensor.elem_type if tensor else 0

    def _get(self, name: str) -> _Tensor | None:
        tensor = self._tensors.get(name)
        if tensor is None and self._outer is not None:
            return self._outer._get(name)
        return tensor

    # ------------------------------------------------------------ sources
    def _symbol(self) -> Expr:
        return Expr.of(f"?{next(self._fresh)}")

    def _dims(self, info: onnx.ValueInfoProto) -> Shape:
        if not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
            return None
        out = []
        for dim in info.type.tensor_type.shape.dim:
            size = dim_of(dim)
            if isinstance(size, int):
                out.append(Expr.of(size))
            elif isinstance(size, str) and not size.startswith("unk__"):
                out.append(Expr.of(size))
            else:
                out.append(self._symbol())
        return tuple(out)

    def _declared(self, info: onnx.ValueInfoProto) -> _Tensor:
        elem = info.type.tensor_type.elem_type if info.type.HasField("tensor_type") else 0
        return _Tensor(self._dims(info), elem_type=elem)

    def _constant(self, tensor: onnx.TensorProto) -> _Tensor:
        shape = tuple(Expr.of(int(d)) for d in tensor.dims)
        out = _Tensor(shape, elem_type=tensor.data_type, scalar=not tensor.dims)
        if (tensor.data_type in _INTS or tensor.data_type == _BOOL) and len(tensor.dims) <= 1 and (
            math.prod(tensor.dims) <= MAX_VALUE_ELEMENTS
        ):
            array = tensor_value(tensor)
            if array is not None:
                out.value = tuple(
                    bool(v) if tensor.data_type == _BOOL else Expr.of(int(v))
                    for v in array.reshape(-1)
                )
        return out

    # ------------------------------------------------------------ propagation
    def _visit(self, node: onnx.NodeProto) -> None:
        rule = self._rules.get(node.op_type) if node.domain in STANDARD_DOMAINS else None
        results: list[_Tensor] | None = None
        if rule is not None:
            try:
                results = rule(self, node)
            except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError) as error:
                logger.debug("no symbolic rule result for %s: %s", node.op_type, error)
                results = None
        for position, name in enumerate(node.output):
            if not name:
                continue
            tensor = results[position] if results and position < len(results) else _Tensor()
            if tensor.shape is None and name in self._inferred:
                tensor.shape = self._dims(self._inferred[name])
            if not tensor.elem_type and name in self._inferred:
                info = self._inferred[name]
                if info.type.HasField("tensor_type"):
                    tensor.elem_type = info.type.tensor_type.elem_type
            if tensor.value is not None and tensor.shape is None:
                n = len(tensor.value)
                tensor.shape = () if tensor.scalar else (Expr.of(n),)
            self._tensors[name] = tensor

    def input(self, node: onnx.NodeProto, position: int) -> _Tensor:
        if position >= len(node.input) or not node.input[position]:
            return _Tensor()
        return self._get(node.input[position]) or _Tensor()


# ---------------------------------------------------------------- rules
Rule = Callable[[SymbolicFacts, onnx.NodeProto], Optional[list[_Tensor]]]


def _ints(value: Value) -> list[int] | None:
    if value is None or any(not isinstance(v, Expr) or v.constant is None for v in value):
        return None
    return [v.constant for v in value]  # type: ignore[union-attr, misc]


def _same(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source = facts.input(node, 0)
    return [_Tensor(source.shape, source.value, source.scalar, source.elem_type)]


def _shape(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    shape = facts.input(node, 0).shape
    if shape is None:
        return [_Tensor()]
    rank = len(shape)
    start, end = int(attribute(node, "start", 0)), int(attribute(node, "end", rank))
    start, end = (min(max(i + rank if i < 0 else i, 0), rank) for i in (start, end))
    dims = shape[start:end]
    return [_Tensor((Expr.of(len(dims)),), tuple(dims), elem_type=onnx.TensorProto.INT64)]


def _size(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    shape = facts.input(node, 0).shape
    if shape is None:
        return [_Tensor()]
    return [_Tensor((), (product(shape),), scalar=True, elem_type=onnx.TensorProto.INT64)]


def _gather(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    data, indices = facts.input(node, 0), facts.input(node, 1)
    axis = int(attribute(node, "axis", 0))
    index = _ints(indices.value)
    shape = None
    if data.shape is not None and indices.shape is not None:
        axis = axis + len(data.shape) if axis < 0 else axis
        shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
    value = None
    if data.value is not None and index is not None and axis == 0 and not data.scalar:
        n = len(data.value)
        value = tuple(data.value[i + n if i < 0 else i] for i in index)
    return [_Tensor(shape, value, indices.scalar and value is not None, data.elem_type)]


def _unsqueeze(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source = facts.input(node, 0)
    axes = _ints(facts.input(node, 1).value) if len(node.input) > 1 else attribute(node, "axes")
    if axes is None or source.shape is None:
        return [_Tensor()]
    rank = len(source.shape) + len(axes)
    axes = sorted(a + rank if a < 0 else a for a in axes)  # type: ignore[union-attr]
    dims = list(source.shape)
    for a in axes:
        dims.insert(a, Expr.of(1))
    value = source.value if (source.scalar and axes == [0]) or (
        source.value is not None and len(source.shape) == 1 and rank == 1) else None
    return [_Tensor(tuple(dims), value, False, source.elem_type)]


def _squeeze(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source = facts.input(node, 0)
    axes = _ints(facts.input(node, 1).value) if len(node.input) > 1 else attribute(node, "axes")
    if source.shape is None or (axes is None and len(node.input) > 1 and node.input[1]):
        return [_Tensor()]  # axes computed at run time are not "every axis of size 1"
    rank = len(source.shape)
    if axes is None:
        axes = [i for i, d in enumerate(source.shape) if d.constant == 1]
        if any(d.constant is None for d in source.shape):
            return [_Tensor()]
    axes = {a + rank if a < 0 else a for a in axes}  # type: ignore[union-attr]
    dims = tuple(d for i, d in enumerate(source.shape) if i not in axes)
    scalar = not dims and source.value is not None and len(source.value) == 1
    return [_Tensor(dims, source.value if scalar else None, scalar, source.elem_type)]


def _concat(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    parts = [facts.input(node, i) for i in range(len(node.input))]
    shapes = [p.shape for p in parts]
    axis = int(attribute(node, "axis", 0))
    shape = None
    if all(s is not None for s in shapes) and shapes and len({len(s) for s in shapes}) == 1:
        rank = len(shapes[0])
        axis = axis + rank if axis < 0 else axis
        total = Expr.of(0)
        for s in shapes:
            total = total + s[axis]
        shape = shapes[0][:axis] + (total,) + shapes[0][axis + 1:]
    value = None
    if all(p.value is not None and not p.scalar for p in parts) and shape and len(shape) == 1:
        value = tuple(v for p in parts for v in p.value)  # type: ignore[union-attr]
    return [_Tensor(shape, value, False, parts[0].elem_type if parts else 0)]


def _slice(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source = facts.input(node, 0)
    if len(node.input) > 1:
        starts, ends = (_ints(facts.input(node, i).value) for i in (1, 2))
        axes = _ints(facts.input(node, 3).value) if len(node.input) > 3 and node.input[3] else None
        steps = _ints(facts.input(node, 4).value) if len(node.input) > 4 and node.input[4] else None
        if (axes is None and len(node.input) > 3 and node.input[3]) or (
                steps is None and len(node.input) > 4 and node.input[4]):
            return [_Tensor()]  # given, but computed at run time: not the defaults
    else:
        starts, ends, axes = (attribute(node, k) for k in ("starts", "ends", "axes"))
        steps = None
    if source.shape is None or starts is None or ends is None:
        return [_Tensor()]
    rank = len(source.shape)
    axes = list(axes) if axes is not None else list(range(len(starts)))  # type: ignore[arg-type]
    steps = list(steps) if steps is not None else [1] * len(axes)
    dims = list(source.shape)
    value = list(source.value) if source.value is not None and rank == 1 else None
    for start, end, axis, step in zip(starts, ends, axes, steps):  # type: ignore[arg-type]
        axis = axis + rank if axis < 0 else axis
        size = dims[axis].constant
        if size is None:
            if step == 1 and start == 0 and end >= 2**62:
                continue  # the whole axis, whatever its size
            return [_Tensor()]
        picked = _picked(size, start, end, step)
        dims[axis] = Expr.of(len(picked))
        if value is not None:
            value = [value[i] for i in picked]
    return [_Tensor(tuple(dims), tuple(value) if value is not None else None, False,
                    source.elem_type)]


def _picked(size: int, start: int, end: int, step: int) -> range:
    """The indices ONNX's Slice takes from an axis of ``size``: a negative start or end counts
    from the end, then both are clamped to the axis ([0, size] going forward, [-1, size - 1]
    going back: a start before the first element going back starts at it, where Python's
    slice takes nothing)."""
    if step == 0:
        raise ValueError("a Slice step of 0")
    start, end = (i + size if i < 0 else i for i in (start, end))
    if step > 0:
        start, end = min(max(start, 0), size), min(max(end, 0), size)
    else:
        start, end = min(max(start, 0), size - 1), min(max(end, -1), size - 1)
    return range(start, end, step)


def _broadcast(shapes: Sequence[Shape]) -> Shape:
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)  # type: ignore[arg-type]
    out = []
    for axis in range(rank):
        dims = [s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0]  # type: ignore
        kept = [d for d in dims if d.constant != 1]
        if not kept:
            out.append(Expr.of(1))
        elif all(d == kept[0] for d in kept):
            out.append(kept[0])
        else:
            return None
    return tuple(out)


def _elementwise(op: Callable[..., Element], result_type: int | None = None) -> Rule:
    """A broadcasting op: the shape broadcast, and the value element by element."""

    def rule(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
        parts = [facts.input(node, i) for i in range(len(node.input))]
        shape = _broadcast([p.shape for p in parts])
        value = None
        if shape is not None and len(shape) <= 1 and all(p.value is not None for p in parts):
            n = shape[0].constant if shape else 1
            if n is not None:
                values = [p.value * n if len(p.value) == 1 else p.value for p in parts]  # type: ignore
                value = tuple(op(*items) for items in zip(*values))
        scalar = all(p.scalar for p in parts)
        elem = result_type or (parts[0].elem_type if parts else 0)
        if value is not None:
            value = tuple(_in_type(v, elem) for v in value)
        return [_Tensor(shape, value, scalar and value is not None, elem)]

    return rule


def _arith(fn: Callable[[Expr, Expr], Expr | None]) -> Callable[..., Element]:
    def apply(a: Element, b: Element) -> Element:
        if isinstance(a, Expr) and isinstance(b, Expr):
            return fn(a, b)
        return None

    return apply


def _div(a: Expr, b: Expr) -> Expr | None:
    if a.nonnegative and b.constant is not None and b.constant > 0:
        return a.divide(b)  # exact: no rounding question
    if a.constant is not None and b.constant is not None and b.constant != 0:
        quotient = abs(a.constant) // abs(b.constant)  # ONNX integer Div truncates
        return Expr.of(quotient if (a.constant < 0) == (b.constant < 0) else -quotient)
    return a.divide(b) if a.nonnegative and b.nonnegative else None


def _equal(a: Element, b: Element) -> Element:
    if isinstance(a, Expr) and isinstance(b, Expr):
        if a == b:
            return True
        difference = a - b
        if difference.constant is not None:
            return difference.constant == 0
        # A size (or a sum of products of sizes) is never negative.
        if a.nonnegative and b.constant is not None and b.constant < 0:
            return False
        if b.nonnegative and a.constant is not None and a.constant < 0:
            return False
        return None
    if isinstance(a, bool) and isinstance(b, bool):
        return a == b
    return None


def _compare(fn: Callable[[int], bool]) -> Callable[..., Element]:
    """An order comparison, known when the difference of its operands is a constant."""

    def apply(a: Element, b: Element) -> Element:
        if isinstance(a, Expr) and isinstance(b, Expr):
            difference = (a - b).constant
            return None if difference is None else fn(difference)
        return None

    return apply


def _logical(fn: Callable[[bool, bool], bool], short: bool | None) -> Callable[..., Element]:
    def apply(a: Element, b: Element) -> Element:
        if isinstance(a, bool) and isinstance(b, bool):
            return fn(a, b)
        if short is not None and (a is short or b is short):
            return short
        return None

    return apply


def _not(a: Element) -> Element:
    return (not a) if isinstance(a, bool) else None


def _where(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    cond, a, b = (facts.input(node, i) for i in range(3))
    shape = _broadcast([cond.shape, a.shape, b.shape])
    value = None
    if shape is not None and len(shape) <= 1 and all(
        p.value is not None for p in (cond, a, b)
    ):
        n = shape[0].constant if shape else 1
        if n is not None:
            c, x, y = (p.value * n if len(p.value) == 1 else p.value  # type: ignore
                       for p in (cond, a, b))
            value = tuple(xi if ci is True else yi if ci is False else None
                          for ci, xi, yi in zip(c, x, y))
    return [_Tensor(shape, value, cond.scalar and a.scalar and b.scalar and value is not None,
                    a.elem_type)]


def _cast(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    source = facts.input(node, 0)
    to = int(attribute(node, "to", 0))
    value = None
    if to in _INTS and source.elem_type in _INTS and source.value is not None:
        value = tuple(_in_type(v, to) for v in source.value)
    return [_Tensor(source.shape, value, source.scalar and value is not None, to)]


def _range(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    start, limit, delta = (facts.input(node, i).value for i in range(3))
    if not (start and limit and delta) or not all(isinstance(v[0], Expr) for v in (start, limit, delta)):
        return [_Tensor()]
    length = None
    if delta[0].constant == 1:  # type: ignore[union-attr]
        length = limit[0] - start[0]  # type: ignore[operator]
        if not length.nonnegative and length.constant is None:
            length = None
        elif length.constant is not None:
            length = Expr.of(max(length.constant, 0))
    return [_Tensor((length,) if length is not None else None,
                    elem_type=facts.input(node, 0).elem_type)]


def _constant_of_shape(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    target = facts.input(node, 0).value
    if target is None or any(not isinstance(t, Expr) for t in target):
        return [_Tensor()]
    fill = attribute(node, "value")
    elem = fill.data_type if isinstance(fill, onnx.TensorProto) else onnx.TensorProto.FLOAT
    value = None
    if isinstance(fill, onnx.TensorProto) and len(target) <= 1 and elem in _INTS | {_BOOL}:
        n = target[0].constant if target else 1  # type: ignore[union-attr]
        if n is not None and n <= MAX_VALUE_ELEMENTS:
            item = np.asarray(tensor_value(fill)).reshape(-1)[0]
            value = ((bool(item) if elem == _BOOL else Expr.of(int(item))),) * n
    # an empty target is a scalar's shape (torch.zeros(()) as TorchScript exports it): one
    # value of rank 0, not a 1-D tensor of one
    scalar = not target and value is not None
    return [_Tensor(tuple(target), value, scalar, elem)]  # type: ignore[arg-type]


def _extreme(a: Expr, b: Expr, pick: Callable[[int, int], int]) -> Expr | None:
    difference = (a - b).constant
    if difference is None:
        return None
    return a if pick(difference, 0) == difference else b


_ADD = _arith(lambda a, b: a + b)
_SUB = _arith(lambda a, b: a - b)
_MUL = _arith(lambda a, b: a * b)
_DIV = _arith(_div)

VALUE_RULES: dict[str, Rule] = {
    "Identity": _same,
    "Shape": _shape,
    "Size": _size,
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": _concat,
    "Slice": _slice,
    "Cast": _cast,
    "Add": _elementwise(_ADD),
    "Sub": _elementwise(_SUB),
    "Mul": _elementwise(_MUL),
    "Div": _elementwise(_DIV),
    "Equal": _elementwise(_equal, _BOOL),
    "And": _elementwise(_logical(lambda a, b: a and b, False), _BOOL),
    "Or": _elementwise(_logical(lambda a, b: a or b, True), _BOOL),
    "Not": _elementwise(_not, _BOOL),
    "Less": _elementwise(_compare(lambda d: d < 0), _BOOL),
    "LessOrEqual": _elementwise(_compare(lambda d: d <= 0), _BOOL),
    "Greater": _elementwise(_compare(lambda d: d > 0), _BOOL),
    "GreaterOrEqual": _elementwise(_compare(lambda d: d >= 0), _BOOL),
    "Max": _elementwise(_arith(lambda a, b: _extreme(a, b, max))),
    "Min": _elementwise(_arith(lambda a, b: _extreme(a, b, min))),
    "Where": _where,
    "Range": _range,
    "ConstantOfShape": _constant_of_shape,
}


def _constant_node(facts: SymbolicFacts, node: onnx.NodeProto) -> list[_Tensor]:
    value = attribute(node, "value")
    if isinstance(value, onnx.TensorProto):
        return [facts._constant(value)]
    return [_Tensor()]


VALUE_RULES["Constant"] = _constant_node
