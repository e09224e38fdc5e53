"""What each node allows in lower precision, read from its op schema.

For every node with a float32 input or output, :func:`plan` says which of its float32 slots
follow the node into the lowered type, which accept any type (no Cast is ever needed there),
and which must stay float32, from the type constraints of the op's schema at the model's opset
(the onnx schemas for standard ops, ONNX Runtime's for its contrib ops):

1. Slots bound to one type parameter that allows the lowered type, binding an input and an
   output or several inputs (MatMul's T, Add's T), follow the node.
2. A type parameter bound to a single input and nothing else accepts any allowed type
   (Shape's T, Pow's exponent T1, Resize's roi T2): the slot keeps whatever type it is fed.
3. A slot whose type is concrete (Resize's scales are tensor(float)) or whose parameter does
   not allow the lowered type (LayerNormalization's U outputs, Conv before opset 22 in
   bfloat16) stays float32.
4. An output whose type an attribute sets (Cast's ``to``, Constant's and ConstantOfShape's
   ``value``) follows the node through that attribute; other attribute-typed outputs
   (RandomNormal, EyeLike) stay float32.
5. A node holding a subgraph, or calling a local function, stays float32 whole: bodies are
   not rewritten.
6. Where onnx's type inference binds what the schema leaves apart (:data:`BOUND_BY_INFERENCE`:
   RMSNormalization's Y takes X's type, though the schema types it as the scale's; ONNX
   Runtime computes an opset-23 Attention through its function body, whose products read Q
   and V together), the two parameters are one: X (V) is no slot that reads any type, or a
   float32 RMSNormalization read a float16 X and the lowered model failed the checker (a
   float32 Attention read a float16 V and ONNX Runtime refused the model).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence

import onnx

from graphfix.graph import ONNX_DOMAINS, STANDARD_DOMAINS

__all__ = ["NodePlan", "plan", "RISKY_OPS", "RUNNING_SUMS", "MOVEMENT_OPS", "MATRIX_OPS",
           "ATTRIBUTE_TYPED", "INDEX_SLOTS", "ACCUMULATING", "EXACTNESS_SENSITIVE",
           "value_inputs"]

# The start set of the float32 islands: ops known to overflow float16's range (65504) or to
# lose its precision, each with why. The measurement keeps each one only where it is shown to
# matter, and adds nodes of any other type where it does.
RISKY_OPS: dict[str, str] = {
    "Exp": "overflows past x = 11.1",
    "Pow": "overflows for |x| > 256 when squaring",
    "ReduceSum": "a sum of many terms overflows or loses small terms",
    "ReduceSumSquare": "squares overflow",
    "ReduceMean": "accumulates many terms",
    "ReduceL2": "squares overflow",
    "ReduceLogSumExp": "exponentials overflow",
    "ReduceProd": "products overflow",
    "CumSum": "a running sum loses small terms",
    "Softmax": "exponentials overflow",
    "LogSoftmax": "exponentials overflow",
    "Log": "loses precision near 1",
    "Sqrt": "a variance's small values lose precision",
    "Reciprocal": "small denominators overflow",
    "Div": "small denominators overflow",
    "LayerNormalization": "a variance of large activations overflows",
    "SimplifiedLayerNormalization": "a variance of large activations overflows",
    "GroupNormalization": "a variance of large activations overflows",
    "InstanceNormalization": "a variance of large activations overflows",
    "Range": "float steps of large ranges lose precision",
    "Einsum": "long contractions accumulate",
}

# Ops that stay float32 whatever the measurement: a kernel that adds in the lowered type rounds
# every partial sum, an error inside the op that rounding its inputs and outputs (what the
# search measures) does not show. Past 2048 float16 spaces its values 2 apart: a running sum of
# 3000 values near 1, added in float16, drifts 1.3% of the output's RMS off (onnx's reference
# evaluator). A running sum is memory-bound: float32 costs it little.
RUNNING_SUMS: dict[str, str] = {
    "CumSum": "a running sum added in float16 rounds every partial sum (past 2048, to "
              "multiples of 2): kept float32",
}

# Ops that move or select values and compute nothing: exact in any precision, never the origin
# of an error, and placed on whichever side of a border needs fewer Casts.
MOVEMENT_OPS = frozenset({
    "Identity", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Concat", "Split",
    "Slice", "Gather", "GatherElements", "GatherND", "Expand", "Tile", "Pad", "Where",
    "DepthToSpace", "SpaceToDepth", "ScatterND", "ScatterElements", "Compress", "ReverseSequence",
    "Dropout", "Relu", "MaxPool", "ReduceMax", "ReduceMin", "Max", "Min", "Neg", "Abs",
    "Trilu", "Shape", "Size",
})

# Input slots that give a node its shape, indices or axes, not the values it computes on (what a
# Gather picks from is its data, slot 0; which rows, slot 1, is an index).
INDEX_SLOTS: dict[str, frozenset[int]] = {
    "Expand": frozenset({1}), "Reshape": frozenset({1}), "Tile": frozenset({1}),
    "ConstantOfShape": frozenset({0}), "Gather": frozenset({1}),
    "GatherElements": frozenset({1}), "GatherND": frozenset({1}),
    "Slice": frozenset({1, 2, 3, 4}), "Pad": frozenset({1, 3}), "Resize": frozenset({1, 2, 3}),
    "Squeeze": frozenset({1}), "Unsqueeze": frozenset({1}), "Split": frozenset({1}),
    "TopK": frozenset({1}), "ReduceSum": frozenset({1}), "ReduceMean": frozenset({1}),
    "ReduceMax": frozenset({1}), "ReduceMin": frozenset({1}), "ReduceProd": frozenset({1}),
    "ReduceL2": frozenset({1}), "ReduceSumSquare": frozenset({1}), "OneHot": frozenset({1}),
    "CumSum": frozenset({1}), "Trilu": frozenset({1}), "Where": frozenset({0}),
}

def value_inputs(node: onnx.NodeProto) -> list[str]:
    """The inputs whose values ``node`` computes on: all but :data:`INDEX_SLOTS` (a standard
    op's shape, indices and axes; every input of another domain's op)."""
    index = INDEX_SLOTS.get(node.op_type, frozenset()) \
        if node.domain in STANDARD_DOMAINS else frozenset()
    return [name for slot, name in enumerate(node.input) if name and slot not in index]


# Ops that sum or multiply many values into one: their output grows with the length of what
# they run over (a sum over a sequence, a product over a dimension).
ACCUMULATING = frozenset({
    "ReduceSum", "ReduceMean", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp", "MatMul", "Gemm", "Conv", "ConvTranspose", "CumSum",
    "Einsum", "MatMulInteger", "ConvInteger", "LSTM", "GRU", "RNN", "Range",
})

# Ops whose work is matrix products, where a lowered type pays (tensor cores, half the bytes of
# the weights). When an error builds up over many nodes, the search puts the cheap ops that
# carry it (a residual stream's additions and normalizations) back to float32 before these.
MATRIX_OPS = frozenset({
    "MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "LSTM", "GRU", "RNN",
    # ONNX Runtime's contrib ops (fused attention and products)
    "Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
    "PackedMultiHeadAttention", "DecoderMaskedMultiHeadAttention", "SparseAttention",
    "QAttention", "FusedMatMul", "FusedConv", "FusedGemm", "GemmFastGelu", "MatMulNBits",
})

# Ops whose output moves by a whole unit (or a whole turn) when their input moves by a rounding:
# an integer carried in a lowered float past 2048 makes them wrong, not a little less precise.
EXACTNESS_SENSITIVE = frozenset({
    "Sin", "Cos", "Tan", "Floor", "Ceil", "Round", "Mod", "Less", "Greater", "Equal",
    "LessOrEqual", "GreaterOrEqual",
})

# Ops whose float output type an attribute sets; the rewrite changes the attribute.
ATTRIBUTE_TYPED = frozenset({"Cast", "Constant", "ConstantOfShape"})

_FLOAT = onnx.TensorProto.FLOAT
_TYPE_STR = {onnx.TensorProto.FLOAT16: "tensor(float16)", onnx.TensorProto.BFLOAT16:
             "tensor(bfloat16)", onnx.TensorProto.FLOAT: "tensor(float)"}


@dataclasses.dataclass(frozen=True)
class NodePlan:
    """How a node's float32 slots behave when the node is lowered.

    ``kind``: "lowerable" (may compute in the lowered type), "fixed" (stays float32, see
    ``reason``) or "neutral" (its float32 slots all accept any type: nothing to decide)."""

    kind: str
    low_inputs: tuple[int, ...] = ()
    low_outputs: tuple[int, ...] = ()
    free_inputs: tuple[int, ...] = ()
    reason: str = ""
    movement: bool = False


@dataclasses.dataclass(frozen=True)
class _Schema:
    inputs: tuple[tuple[str, bool], ...]  # (type string, variadic)
    outputs: tuple[tuple[str, bool], ...]
    constraints: Mapping[str, frozenset[str]]
    version: int


def plan(
    node: onnx.NodeProto,
    float_inputs: Sequence[int],
    float_outputs: Sequence[int],
    *,
    low: int,
    opsets: Mapping[str, int],
    local_functions: frozenset[tuple[str, str]],
) -> NodePlan:
    """The plan of ``node`` whose float32 input and output slots are ``float_inputs`` and
    ``float_outputs``, lowered to element type ``low``."""
    if not float_inputs and not float_outputs:
        return NodePlan("neutral")
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
           for a in node.attribute):  # Rule 5
        return NodePlan("fixed", reason=f"{node.op_type} holds a subgraph; bodies stay float32")
    if (node.domain, node.op_type) in local_functions:
        return NodePlan("fixed", reason=f"calls the local function {node.op_type}")
    if node.domain in STANDARD_DOMAINS and node.op_type in RUNNING_SUMS:
        return NodePlan("fixed", reason=RUNNING_SUMS[node.op_type])
    schema = _schema(node.domain or "", node.op_type, opsets.get(node.domain or "", 0)
                     if node.domain not in STANDARD_DOMAINS else opsets.get("", opsets.get("ai.onnx", 0)))
    if node.domain in STANDARD_DOMAINS and node.op_type in ATTRIBUTE_TYPED:
        if float_outputs and schema is not None and _TYPE_STR[low] not in schema.constraints.get(
                schema.outputs[0][0], frozenset({schema.outputs[0][0]})):
            name = _TYPE_STR[low].removeprefix("tensor(").removesuffix(")")
            return NodePlan("fixed", free_inputs=tuple(float_inputs),
                            reason=f"the schema of {node.op_type}-{schema.version} allows no "
                                   f"{name}")
        return _attribute_typed(node, float_inputs, float_outputs)
    if schema is None:
        return NodePlan("fixed", reason=f"no schema known for {node.domain or 'ai.onnx'}::"
                                        f"{node.op_type}")
    return _from_schema(node, schema, float_inputs, float_outputs, _TYPE_STR[low])


def _attribute_typed(node: onnx.NodeProto, float_inputs: Sequence[int],
                     float_outputs: Sequence[int]) -> NodePlan:
    """Rule 4."""
    if node.op_type == "Cast":
        # A float32 -> float32 Cast (exporters write them around Softmax) is an Identity: it
        # follows what it reads. A Cast to float32 of another type follows its readers; one
        # from float32 to another type reads any type.
        if float_outputs and float_inputs:
            return NodePlan("lowerable", low_inputs=(0,), low_outputs=(0,), movement=True)
        if float_outputs:
            return NodePlan("lowerable", low_outputs=(0,), movement=True)
        return NodePlan("neutral", free_inputs=tuple(float_inputs))
    if not float_outputs:
        return NodePlan("neutral")
    if node.op_type == "Constant" and not any(
            a.name in ("value", "value_float", "value_floats") for a in node.attribute):
        return NodePlan("fixed", reason="a Constant of sparse float values")
    return NodePlan("lowerable", low_outputs=(0,), movement=True)


# Rule 6: type parameters onnx's inference binds together, by op: {parameter: the one it is}.
BOUND_BY_INFERENCE: dict[tuple[str, str], dict[str, str]] = {
    ("", "RMSNormalization"): {"T": "V"},
    ("", "Attention"): {"T2": "T1"},
}


def _from_schema(node: onnx.NodeProto, schema: _Schema, float_inputs: Sequence[int],
                 float_outputs: Sequence[int], low: str) -> NodePlan:
    """Rules 1 to 3, and 6."""
    bound_as = BOUND_BY_INFERENCE.get((node.domain if node.domain != "ai.onnx" else "",
                                       node.op_type), {})
    slots: dict[str, list[tuple[str, int]]] = {}
    for side, indices, formals in (("in", float_inputs, schema.inputs),
                                   ("out", float_outputs, schema.outputs)):
        for index in indices:
            type_str = _formal(formals, index)
            type_str = bound_as.get(type_str, type_str) if type_str is not None else None
            if type_str is None:
                return NodePlan("fixed", reason=f"{node.op_type} has more {side}puts than its "
                                                f"schema (version {schema.version})")
            slots.setdefault(type_str, []).append((side, index))
    low_in: list[int] = []
    low_out: list[int] = []
    free: list[int] = []
    for type_str, bound in slots.items():
        allowed = schema.constraints.get(type_str, frozenset({type_str}))
        if low not in allowed:
            continue  # Rule 3
        if len(bound) == 1 and bound[0][0] == "in" and type_str in schema.constraints:
            free.append(bound[0][1])  # Rule 2
            continue
        if all(side == "out" for side, _ in bound):
            continue  # an output typed by an attribute (Rule 4's others): stays float32
        low_in += [i for side, i in bound if side == "in"]
        low_out += [i for side, i in bound if side == "out"]
    if not low_in and not low_out:
        if len(free) == len(float_inputs) and not float_outputs:
            return NodePlan("neutral", free_inputs=tuple(sorted(free)))
        name = low.removeprefix("tensor(").removesuffix(")")
        return NodePlan("fixed", free_inputs=tuple(sorted(free)),
                        reason=f"the schema of {node.op_type}-{schema.version} allows no {name}")
    return NodePlan("lowerable", tuple(sorted(low_in)), tuple(sorted(low_out)),
                    tuple(sorted(free)), movement=node.op_type in MOVEMENT_OPS
                    and (node.domain or "") in STANDARD_DOMAINS and not _reduces(node))


def _reduces(node: onnx.NodeProto) -> bool:
    """A scatter that adds or multiplies what it scatters (``reduction``, opset 16 on)
    computes new values: it is no movement."""
    return any(a.name == "reduction" and a.s not in (b"", b"none") for a in node.attribute)


def _formal(formals: tuple[tuple[str, bool], ...], index: int) -> str | None:
    if index < len(formals):
        return formals[index][0]
    if formals and formals[-1][1]:
        return formals[-1][0]
    return None


@functools.cache
def _schema(domain: str, op_type: str, version: int) -> _Schema | None:
    if domain in ONNX_DOMAINS:
        try:
            found = onnx.defs.get_schema(op_type, version, domain)
        except onnx.defs.SchemaError:
            return None
        return _Schema(
            tuple((f.type_str, f.option == onnx.defs.OpSchema.FormalParameterOption.Variadic)
                  for f in found.inputs),
            tuple((f.type_str, f.option == onnx.defs.OpSchema.FormalParameterOption.Variadic)
                  for f in found.outputs),
            {c.type_param_str: frozenset(c.allowed_type_strs) for c in found.type_constraints},
            found.since_version,
        )
    return _runtime_schemas().get((domain, op_type, version)) or _latest_runtime(
        domain, op_type, version)


def _latest_runtime(domain: str, op_type: str, version: int) -> _Schema | None:
    found = [s for (d, o, _), s in _runtime_schemas().items() if d == domain and o == op_type
             and (version == 0 or s.version <= version)]
    return max(found, key=lambda s: s.version) if found else None


@functools.lru_cache(maxsize=1)
def _runtime_schemas() -> dict[tuple[str, str, int], _Schema]:
    """ONNX Runtime's contrib op schemas (com.microsoft and others), read once."""
    from onnxruntime.capi import onnxruntime_pybind11_state as runtime

    schemas: dict[tuple[str, str, int], _Schema] = {}
    for found in runtime.get_all_operator_schema():
        variadic = type(found).FormalParameterOption.Variadic
        if found.domain in STANDARD_DOMAINS:
            continue
        schemas[(found.domain, found.name, found.since_version)] = _Schema(
            tuple((f.typeStr, f.option == variadic) for f in found.inputs),
            tuple((f.typeStr, f.option == variadic) for f in found.outputs),
            {c.type_param_str: frozenset(c.allowed_type_strs) for c in found.type_constraints},
            found.since_version,
        )
    return schemas


def opsets(model: onnx.ModelProto) -> dict[str, int]:
    """The model's opset version per domain."""
    return {o.domain: o.version for o in model.opset_import}
