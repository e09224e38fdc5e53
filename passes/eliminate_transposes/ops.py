"""Op families, as data: what each op does to the axes of its input, for every layer above."""

from __future__ import annotations

from typing import Any

import onnx

from graphfix.graph import STANDARD_DOMAINS
from graphfix.graph import attribute as attr

__all__ = [
    "STANDARD_DOMAINS",
    "ELEMENTWISE_UNARY",
    "BROADCAST_BINARY",
    "REDUCE_OPS",
    "ORDER_SENSITIVE_REDUCE",
    "SHAPE_ONLY",
    "KEEPS_FIRST_DIM",
    "SHAPE_MATH",
    "SAME_RANK",
    "attr",
    "set_attr",
    "is_transpose",
]


ELEMENTWISE_UNARY = frozenset({
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Cast", "CastLike",
    "Ceil", "Celu", "Clip", "Cos", "Cosh", "Dropout", "Elu", "Erf", "Exp", "Floor", "Gelu",
    "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg",
    "Not", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh",
    "Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu",
})
BROADCAST_BINARY = frozenset({
    "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Equal", "Greater",
    "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Mean", "Min", "Mod", "Mul", "Or", "Pow",
    "PRelu", "Sub", "Sum", "Where", "Xor",
})
REDUCE_OPS = frozenset({
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
    "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
})
# Reductions whose float result depends on the order in which elements are combined.
ORDER_SENSITIVE_REDUCE = REDUCE_OPS - {"ReduceMax", "ReduceMin"}
# Ops that only reshape their input: applied to constants, their value is computed (the
# depthwise kernels tf2onnx writes as Transpose(Reshape(W, shape)) fold into one initializer).
SHAPE_ONLY = frozenset({"Cast", "Identity", "Reshape", "Squeeze", "Unsqueeze"})
# Ops whose output's first dimension is their first input's (besides elementwise ops).
KEEPS_FIRST_DIM = frozenset({
    "AveragePool", "BatchNormalization", "Conv", "ConvTranspose", "GlobalAveragePool",
    "GlobalMaxPool", "InstanceNormalization", "LRN", "LayerNormalization", "LogSoftmax", "LpPool",
    "MaxPool", "Softmax",
})
# Side-effect-free ops converters compute Reshape targets with: once a rewrite leaves such a
# computation unread, it goes.
SHAPE_MATH = frozenset({"Cast", "Concat", "Gather", "Identity", "Shape", "Slice", "Squeeze",
                        "Unsqueeze"})
# Ops whose output has the rank of their first input (for graphs shape inference left blank,
# where a converter computed an axes input).
SAME_RANK = frozenset({
    *ELEMENTWISE_UNARY, "AveragePool", "BatchNormalization", "Concat", "Conv", "ConvTranspose",
    "DepthToSpace", "InstanceNormalization", "LRN", "LogSoftmax", "LpPool", "MaxPool", "Pad",
    "Resize", "Slice", "Softmax", "SpaceToDepth", "Split",
})


def set_attr(node: onnx.NodeProto, name: str, value: Any) -> None:
    for i, item in enumerate(node.attribute):
        if item.name == name:
            del node.attribute[i]
            break
    node.attribute.append(onnx.helper.make_attribute(name, value))


def is_transpose(node: onnx.NodeProto | None) -> bool:
    return node is not None and node.op_type == "Transpose" and node.domain in STANDARD_DOMAINS
