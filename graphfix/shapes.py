"""Shape inference as graphfix's passes use it: ONNX's, and the shapes of the ONNX Runtime
contrib ops (``com.microsoft``) that ONNX does not know.

    y = com.microsoft.DynamicQuantizeLSTM(x[T, B, 40], ...)  =>  y[T, 1, B, 32]
    t = Transpose<perm=[0, 2, 1, 3]>(y)                     =>  t[T, B, 1, 32]: moves a size-1 axis

ONNX's inference stops at an op it has no schema for: everything after a quantized LSTM, a fused
attention or a FastGelu has no shape, and a Transpose there that only moves a size-1 axis looks
like any other. :data:`CONTRIB_SHAPES` gives those ops' output shapes from their inputs'
(as ONNX Runtime's own contrib op definitions and its symbolic shape inference compute them),
and :func:`infer_shapes` feeds them back to ONNX's inference, which goes on past them.

ONNX Runtime's ``symbolic_shape_infer`` is not used itself: it needs sympy (which
onnxruntime-gpu does not install), writes a file into the working folder when its inference is
incomplete, and lacks the quantized ops (DynamicQuantizeLSTM, DynamicQuantizeMatMul, QGemm).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import onnx

from graphfix.graph import attribute

__all__ = ["CONTRIB_SHAPES", "infer_shapes"]

logger = logging.getLogger(__name__)

Dim = int | str | None
Shape = list[Dim]
# (node, input shapes (None: unknown), constant tensors' shapes) -> output shapes (None: unknown)
ContribRule = Callable[[onnx.NodeProto, Sequence["Shape | None"]], "list[Shape | None]"]

_CONTRIB = "com.microsoft"
_ROUNDS = 8


def _ints(node: onnx.NodeProto, name: str) -> list[int]:
    return next((list(a.ints) for a in node.attribute if a.name == name), [])


def _first(node: onnx.NodeProto, shapes: Sequence[Shape | None]) -> list[Shape | None]:
    """Output 0 has input 0's shape (elementwise ops, normalizations)."""
    return [list(shapes[0]) if shapes and shapes[0] is not None else None]


def _broadcast(a: Shape | None, b: Shape | None) -> Shape | None:
    if a is None or b is None:
        return None
    rank = max(len(a), len(b))
    a, b = [1] * (rank - len(a)) + list(a), [1] * (rank - len(b)) + list(b)
    out: Shape = []
    for x, y in zip(a, b):
        out.append(y if x == 1 else x if y == 1 or x == y else
                   x if isinstance(x, int) and not isinstance(y, int) else
                   y if isinstance(y, int) and not isinstance(x, int) else None)
    return out


def _qlinear_binary(node: onnx.NodeProto, shapes: Sequence[Shape | None]) -> list[Shape | None]:
    """QLinearAdd, QLinearMul: A at input 0, B at input 3."""
    return [_broadcast(shapes[0] if shapes else None, shapes[3] if len(shapes) > 3 else None)]


def _matmul_shape(a: Shape | None, b: Shape | None) -> Shape | None:
    if a is None or b is None or not a or not b:
        return None
    if len(b) == 1:
        return list(a[:-1])
    if len(a) == 1:
        return list(b[:-2]) + [b[-1]]
    batch = _broadcast(a[:-2], b[:-2])
    return None if batch is None else batch + [a[-2], b[-1]]


def _matmul(node: onnx.NodeProto, shapes: Sequence[Shape | None]) -> list[Shape | None]:
    """DynamicQuantizeMatMul, MatMulIntegerToFloat: A at input 0, B at input 1."""
    return [_matmul_shape(shapes[0] if shapes else None, shapes[1] if len(shapes) > 1 else None)]


def _fused_matmul(node: onnx.NodeProto, shapes: Sequence[Shape | None]) -> list[Shape | None]:
    """FusedMatMul: MatMul with its operands' last two axes swapped on request."""
    a, b = (list(s) if s is not None else None for s in (shapes[0], shapes[1]))
    if a is None or b is None or attribute(node, "transBatchA") or attribute(node, "transBatchB"):
        return [None]
    if attribute(node, "transA") and len(a) >= 2:
        a[-1], a[-2] = a[-2], a[-1]
    if attribute(node, "transB") and len(b) >= 2:
        b[-1], b[-2] = b[-2], b[-1]
    return [_matmul_shape(a, b)]


def _matmul_nbits(node: onnx.NodeProto, shapes: Sequence[Shape | None]) -> list[Shape | None]:
    """MatMulNBits: A[..., K] times a packed [N, K] weight."""
    a, n = shapes[0] if shapes else None, attribute(node, "N")
    return [list(a[:-1]) + [n] if a is not None and a and n else None]


def _lstm(node: onnx.NodeProto, shapes: Sequence[Shape | None]) -> list[Shape | None]:
    """DynamicQuantizeLSTM: LSTM's shapes (layout 0): Y[T, D, B, H], Y_h and Y_c [D, B, H]."""
    x = shapes[0] if shapes else None
    hidden = attribute(node, "hidden_size")
    if x is None or len(x) != 3 or not hidden:
        return [None, None, None]
    directions = 2 if any(a.name == "direction" and a.s == b"bidirectional"
                          for a in node.attribute) else 1
    return [[x[0], directions, x[1], hidden], [directions, x[1], hidden],
            [directions, x[1], hidden]]


def _attention(node: onnx.NodeProto, shapes: Sequence[Shape | None]) -> list[Shape | None]:
    """Attention: input[B, S, D] with packed q/k/v weights [D, 3H]: output[B, S, H] (or the
    third of qkv_hidden_sizes)."""
    x, w = shapes[0] if shapes else None, shapes[1] if len(shapes) > 1 else None
    sizes = _ints(node, "qkv_hidden_sizes")
    hidden = sizes[2] if len(sizes) == 3 else (
        w[1] // 3 if w is not None and len(w) == 2 and isinstance(w[1], int) else None)
    return [list(x[:-1]) + [hidden] if x is not None and x and hidden else None]


def _embed_layer_norm(node: onnx.NodeProto, shapes: Sequence[Shape | None]) -> list[Shape | None]:
    """EmbedLayerNormalization: ids[B, S] and a word table [V, D]: output[B, S, D], mask
    index [B]."""
    ids, table = shapes[0] if shapes else None, shapes[2] if len(shapes) > 2 else None
    if ids is None or table is None or len(ids) != 2 or len(table) != 2:
        return [None, None]
    return [[ids[0], ids[1], table[1]], [ids[0]]]


CONTRIB_SHAPES: dict[str, ContribRule] = {
    **dict.fromkeys((
        "Gelu", "FastGelu", "BiasGelu", "QuickGelu", "BiasAdd", "SkipLayerNormalization",
        "SkipSimplifiedLayerNormalization", "SimplifiedLayerNormalization",
        "LayerNormalization", "RotaryEmbedding", "BiasSoftmax", "QLinearLeakyRelu",
        "QLinearSigmoid", "QLinearSoftmax", "QuantizeLinear", "DequantizeLinear",
        "GroupNorm", "MultiHeadAttention",
    ), _first),
    **dict.fromkeys(("QLinearAdd", "QLinearMul"), _qlinear_binary),
    **dict.fromkeys(("DynamicQuantizeMatMul", "MatMulIntegerToFloat"), _matmul),
    "FusedMatMul": _fused_matmul,
    "MatMulNBits": _matmul_nbits,
    "DynamicQuantizeLSTM": _lstm,
    "Attention": _attention,
    "EmbedLayerNormalization": _embed_layer_norm,
}


def _dims(value: onnx.ValueInfoProto) -> Shape | None:
    if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else
            d.dim_param if d.HasField("dim_param") else None
            for d in value.type.tensor_type.shape.dim]


def infer_shapes(model: onnx.ModelProto, *, data_prop: bool = False) -> onnx.ModelProto:
    """ONNX's shape inference on ``model`` (not strict: an op it cannot infer leaves its outputs
    unknown), with the outputs of the contrib ops :data:`CONTRIB_SHAPES` knows added as value
    infos and inferred again, until nothing more is learnt. ``model`` is not changed; give it
    a copy without large weights (each round copies it). Raises what ONNX's inference raises."""
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=data_prop)
    contrib = [n for n in model.graph.node
               if n.domain == _CONTRIB and n.op_type in CONTRIB_SHAPES]
    for _ in range(_ROUNDS if contrib else 0):
        known = _known(inferred.graph)
        elem = _elem_types(inferred.graph)
        added: list[onnx.ValueInfoProto] = []
        for node in contrib:
            if all(not name or name in known for name in node.output):
                continue
            inputs = [known.get(name) if name else None for name in node.input]
            for position, shape in enumerate(CONTRIB_SHAPES[node.op_type](node, inputs)):
                name = node.output[position] if position < len(node.output) else ""
                if shape is None or not name or name in known:
                    continue
                elem_type = _output_type(node, position, elem)
                added.append(onnx.helper.make_tensor_value_info(name, elem_type, shape))
        if not added:
            break
        seeded = onnx.ModelProto()
        seeded.CopyFrom(model)
        seeded.graph.value_info.extend(added)
        seeded.graph.value_info.extend(v for v in inferred.graph.value_info
                                       if v.name not in {a.name for a in added})
        logger.debug("shapes of %d contrib op outputs given to ONNX's inference", len(added))
        inferred = onnx.shape_inference.infer_shapes(seeded, strict_mode=False,
                                                      data_prop=data_prop)
    return inferred


def _known(graph: onnx.GraphProto) -> dict[str, Shape]:
    known: dict[str, Shape] = {}
    for value in (*graph.input, *graph.value_info, *graph.output):
        dims = _dims(value)
        if dims is not None:
            known.setdefault(value.name, dims)
    for tensor in graph.initializer:
        known[tensor.name] = list(tensor.dims)
    return known


def _elem_types(graph: onnx.GraphProto) -> Mapping[str, int]:
    types = {v.name: v.type.tensor_type.elem_type for v in (*graph.input, *graph.value_info)
             if v.type.HasField("tensor_type")}
    types.update((t.name, t.data_type) for t in graph.initializer)
    return types


# Element type of outputs that are not input 0's: (op, output) -> type.
_OUTPUT_TYPES: dict[tuple[str, int], int] = {
    ("DynamicQuantizeMatMul", 0): onnx.TensorProto.FLOAT,
    ("MatMulIntegerToFloat", 0): onnx.TensorProto.FLOAT,
    ("EmbedLayerNormalization", 1): onnx.TensorProto.INT32,
    ("DynamicQuantizeLSTM", 0): onnx.TensorProto.FLOAT,
    ("DynamicQuantizeLSTM", 1): onnx.TensorProto.FLOAT,
    ("DynamicQuantizeLSTM", 2): onnx.TensorProto.FLOAT,
}


def _output_type(node: onnx.NodeProto, position: int, types: Mapping[str, int]) -> int:
    """The element type of a contrib op's output: a fixed one, a quantized op's float output
    (its scale's type), else input 0's."""
    fixed = _OUTPUT_TYPES.get((node.op_type, position))
    if fixed is not None:
        return fixed
    if node.op_type == "DequantizeLinear" and len(node.input) > 1:
        return types.get(node.input[1], onnx.TensorProto.FLOAT)
    if node.op_type in ("QuantizeLinear",) and len(node.input) > 2:
        return types.get(node.input[2], onnx.TensorProto.UINT8)
    return types.get(node.input[0], 0) if node.input else 0
