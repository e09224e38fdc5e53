"""The sign of zero: what makes a rewrite that is right for numbers wrong for IEEE floats.

``0.0 == -0.0``, yet ``1 / 0.0`` is +inf and ``1 / -0.0`` is -inf. Two rewrites that peers make
lose the difference, and a model whose outputs depend on it then computes something else:

1. merging constants equal as numbers (onnxsim's ``eliminate_duplicate_initializer`` and
   ``eliminate_common_subexpression``): :func:`signed_zero_twins` says when two constants of a
   model are equal as numbers and differ in bytes;
2. dropping ``x + 0.0`` (onnxsim's ``eliminate_nop_with_unit``, ONNX Runtime's
   ``NoopElimination``): ``-0.0 + 0.0`` is 0.0, so the Add is no no-op when ``x`` can be -0.0;
   likewise ``x - (-0.0)``. ``x + (-0.0)``, ``x - 0.0``, ``x * 1`` and ``x / 1`` are exact.
   :func:`inexact_zero_nops` says when a model holds such an Add or Sub.

The passes that hand a model to those tools turn the rewrite off for a model where it matters,
and only there.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix.graph import graphs
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
                for attr in node.attribute:
                    tensor = _attribute_tensor(attr)
                    if tensor is not None and tensor.data_type in _FLOATS:
                        found[node.output[0]] = tensor
    return found


def _attribute_tensor(attr: onnx.AttributeProto) -> onnx.TensorProto | None:
    """A Constant's value as a tensor (value_float(s) too: they merge as numbers as well)."""
    if attr.name == "value":
        return attr.t
    if attr.name == "value_float":
        return numpy_helper.from_array(np.array(attr.f, np.float32))
    if attr.name == "value_floats":
        return numpy_helper.from_array(np.array(list(attr.floats), np.float32))
    return None


def _as_numbers(value: np.ndarray, data_type: int) -> np.ndarray:
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
               _as_numbers(value, tensor.data_type).tobytes())
        if seen.setdefault(key, value.tobytes()) != value.tobytes():
            return True
    return False


def inexact_zero_nops(model: onnx.ModelProto) -> bool:
    """Rule 2: whether ``model`` adds a constant holding +0.0 to something, or subtracts one
    holding -0.0, with every other element zero too (what a tool would take for a no-op)."""
    constants = _constants(model)
    for body in graphs(model.graph):
        for node in body.node:
            if node.op_type not in ("Add", "Sub") or len(node.input) != 2:
                continue
            positions = (0, 1) if node.op_type == "Add" else (1,)
            for position in positions:
                tensor = constants.get(node.input[position])
                if tensor is None or np.prod(tensor.dims, dtype=np.int64) > _SMALL:
                    continue
                value = tensor_value(tensor)
                if value is None or np.any(_as_numbers(value, tensor.data_type) != 0):
                    continue
                positive, negative = _signs(value)
                if (positive if node.op_type == "Add" else negative):
                    return True
    return False
