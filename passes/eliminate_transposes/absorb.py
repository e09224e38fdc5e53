"""Rule 7: consumers that end the layout and take a Transpose in (Shape, Size, CastLike, and a
Flatten into constant weights).

:func:`absorber` answers for one consumer ``node`` that reads ``source``, the output of
``T(perm)``: the :class:`Absorb` it does, or None. Like the handlers, it reads facts only.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx

from .facts import GraphFacts, Shape
from .ops import STANDARD_DOMAINS, attr
from .perm import Perm

__all__ = ["Absorb", "absorber", "flattens_into_weights"]


@dataclasses.dataclass(frozen=True)
class Absorb:
    """Rule 7: the consumer takes the Transpose in: ``kind`` is "shape", "size" or "flatten"."""

    kind: str


_ABSORBERS = frozenset({"Flatten", "Reshape", "Shape", "Size", "CastLike"})


def absorber(facts: GraphFacts, node: onnx.NodeProto, source: str, perm: Perm) -> Absorb | None:
    """Rule 7: whether ``node``, reading ``T(perm)`` as ``source``, can take it in."""
    if node.op_type not in _ABSORBERS or node.domain not in STANDARD_DOMAINS:
        return None
    if node.op_type == "CastLike":
        # Rule 7c: CastLike reads only the element type of its second input.
        return Absorb("type") if node.input[0] != source and source in node.input[1:] else None
    if node.input[0] != source:
        return None
    if node.op_type == "Shape":
        return Absorb("shape")
    if node.op_type == "Size":
        return Absorb("size")
    if not facts.keep_reduction_order and flattens_into_weights(facts, node, source, perm):
        return Absorb("flatten")
    return None


def flattens_into_weights(facts: GraphFacts, node: onnx.NodeProto, source: str, perm: Perm) -> bool:
    """Rule 7b: ``node`` flattens ``source`` to ``[batch, features]`` and only MatMul/Gemm
    with constant weights read the result."""
    shape = facts.shape(source)
    if perm[0] != 0 or shape is None or len(shape) != len(perm) or source in node.input[1:]:
        return False
    if any(d is None or d <= 0 for d in shape[1:]):
        return False
    features = int(np.prod(shape[1:]))
    if node.op_type == "Flatten":
        axis = attr(node, "axis", 1)
        if (axis + len(perm) if axis < 0 else axis) != 1:
            return False
    elif not _reshapes_to(facts, node, shape, features):
        return False
    out = node.output[0]
    users = facts.index.readers(out)
    if not users or out in facts.index.outputs or out in facts.index.implicit:
        return False
    if any(facts.keeps_order(user) for user in users):  # the products' sums are reordered
        return False
    return all(_weights_rows(facts, user, out) == features for user in users)


def _weights_rows(facts: GraphFacts, user: onnx.NodeProto, flat: str) -> int | None:
    """The number of rows of the constant weights a MatMul/Gemm multiplies ``flat`` by (the
    columns of a ``transB`` Gemm's), or None when it is no such product."""
    if user.domain not in STANDARD_DOMAINS or user.op_type not in ("MatMul", "Gemm"):
        return None
    if len(user.input) < 2 or user.input[0] != flat or user.input[1] == flat:
        return None
    if user.op_type == "Gemm" and attr(user, "transA", 0):
        return None
    weights = user.input[1]
    if not facts.is_constant(weights):
        return None
    shape = facts.shape(weights) if weights in facts.initializers else None
    if shape is None:
        value = facts.const_value(weights)
        shape = None if value is None else value.shape
    side = 1 if user.op_type == "Gemm" and attr(user, "transB", 0) else 0
    return None if shape is None or len(shape) != 2 else shape[side]


def _reshapes_to(facts: GraphFacts, node: onnx.NodeProto, shape: Shape, features: int) -> bool:
    """Whether Reshape ``node`` of a tensor of ``shape`` gives ``[shape[0], features]``."""
    target = "allowzero" if attr(node, "allowzero", 0) else facts.reshape_target(node, shape)
    if isinstance(target, list):
        return len(target) == 2 and target[1] == features
    out = facts.shape(node.output[0])  # shape inference's word
    return out is not None and len(out) == 2 and out[1] == features
