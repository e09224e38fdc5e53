"""Attention blocks ONNX Runtime's optimizer does not match, fused into ``MultiHeadAttention``.

ONNX Runtime 1.31's attention patterns are written against the legacy exporter's graphs. The
dynamo exporter (``torch.onnx.export(..., dynamo=True)``, the default since torch 2.9) writes the
same block more plainly, and none of them match::

    q = Transpose(0,2,1,3)(Reshape(Q, [B, S, N, H]))       Q = MatMul(x, Wq) + bq  (B, S, N*H)
    k = Transpose(0,2,3,1)(Reshape(K, [B, L, N, H]))       (or q's form with its last two
                                                           dimensions swapped: a Transpose, or
                                                           torch's SDPA through 3-D Reshapes)
    v = Transpose(0,2,1,3)(Reshape(V, [B, L, N, H]))
    p = Softmax(-1)(MatMul(q, k) * scale [+ bias])         scale: a Mul or Div by a constant,
    y = Reshape(Transpose(0,2,1,3)(MatMul(p, v)), [B, S, N*H])   on the scores or on q and k

(torch's scaled_dot_product_attention, decomposed, adds ``p = Where(IsNaN(p), 0, p)``: a row
whose every key is masked with -inf gives zeros. Fused where every bias is finite by
construction, so that no row can be NaN, or made of constants that are finite or -inf: then
each head's rows of the fused output whose every key is -inf are set to zero, as the guard
sets them, by ``Where(IsInf(ReduceMax(bias)), 0, y)`` over the output split into heads).

A Llama-style decoder works on the heads after the split: rotary embeddings on q and k, the
key/value heads of grouped-query attention repeated (``Reshape(Expand(Unsqueeze(k)))``), and
its exporters upcast the probabilities with a ``Cast`` to the type they already have. There q
is taken as it reaches the scores, (batch, heads, S, head_size), and merged for
MultiHeadAttention's (batch, S, hidden) by a Transpose and a Reshape; k and v are given split,
(batch, heads, L, head_size), which MultiHeadAttention reads as they are.

:func:`fuse_attention` replaces each such block by ``com.microsoft::MultiHeadAttention(Q, K, V,
attention_bias=bias)`` with ``num_heads`` and the block's own ``scale``: the projections and
their biases stay as they are, the block's Reshapes, Transposes, MatMuls, scaling and Softmax
go. Where q, k and v are the projections of one input (self-attention: ``MatMul(x, W) + b``,
constant weights and biases, read by the block alone, or the three equal parts of one such
projection, split: GPT-2's c_attn), the three projections are packed into one weight (a
weight read elsewhere too is not packed: it would be kept twice) and the block becomes
``com.microsoft::Attention(x, [Wq|Wk|Wv], [bq|bk|bv], attention_bias=bias)``: one matrix
product where there were three, and the kernel ONNX
Runtime's own BERT fusion uses (float32, and float16 where the caller runs on CUDA: ONNX
Runtime's CPU provider has no float16 Attention kernel and runs it in float32 between casts
it inserts). The last Reshape stays where it merges the heads into another shape than (batch,
sequence, hidden), as GPT-2's into two dimensions. Only a block whose intermediate tensors
nothing else reads is fused. The additive biases (the exporter's mask, ``0`` or the lowest
float per key; T5's position bias) are summed into ``attention_bias`` when each has four
dimensions (as shape inference says), and a bias of one row for every query (batch, 1, 1, L)
is expanded to the query's length; any other block is left alone. The caller checks the
result by running it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import onnx
from onnx import helper

from graphfix.graph import drop_unread_initializers, live_nodes
from .heads import GraphView

__all__ = ["fuse_attention", "tensor_info", "tensor_shapes"]

_CONTRIB = "com.microsoft"
_SPLIT = [0, 2, 1, 3]
_KEY = [0, 2, 3, 1]
_SWAP = [0, 1, 3, 2]


@dataclasses.dataclass
class _Block:
    query: str
    key: str
    value: str
    biases: list[str]  # added to the scores (rank 4 each)
    scale: float
    query_split: bool  # the query is given split into heads (batch, heads, S, head_size)
    merge: onnx.NodeProto  # the heads-merging Reshape: the block's last node
    merged: bool  # that Reshape gives (batch, sequence, hidden), as MultiHeadAttention does
    heads: int = 0  # the block's heads
    # torch's NaN guard over biases that may hold -inf: the element type of the rows the
    # fused output sets to zero where every key is masked (None: no such rows)
    masked_rows: int | None = None
    # q, k and v given sequence first, (S, batch, hidden), split into heads the way
    # nn.MultiheadAttention does it (through batch x heads); the heads merged back sequence
    # first too, (S, batch, heads, head_size)
    seq_first: bool = False
    # the key and value have one head, which the products broadcast over the query's
    # (multi-query attention: Falcon); they are expanded for MultiHeadAttention
    shared_kv: bool = False


_FLOAT_TYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16,
                onnx.TensorProto.DOUBLE: np.float64}
_CAST_TYPES = {**_FLOAT_TYPES, onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32}
_UNARY = {"Sqrt": np.sqrt, "Reciprocal": np.reciprocal, "Neg": np.negative}
_BINARY = {"Mul": np.multiply, "Div": np.true_divide, "Add": np.add, "Sub": np.subtract}
_COMPUTED_OPS = frozenset({*_UNARY, *_BINARY, "Cast", "Gather", "Slice"})


class _View(GraphView):
    def __init__(self, model: onnx.ModelProto,
                 shapes: dict[str, tuple[int | None, ...]] | None = None,
                 types: dict[str, int] | None = None) -> None:
        super().__init__(model)
        self.outputs = {o.name for o in model.graph.output}
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          0)
        self.shapes = dict(shapes or {})
        own = list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)
        self.shapes.update(_shapes(own))
        self.types = dict(types or {})
        self.types.update(_types(own))
        self.types.update({t.name: t.data_type for t in model.graph.initializer})

    def rank(self, name: str) -> int | None:
        shape = self.shapes.get(name)
        return None if shape is None else len(shape)

    def only_reader(self, name: str) -> onnx.NodeProto | None:
        """The one node that reads ``name``, where nothing else does (a graph output neither)."""
        readers = self.readers.get(name, [])
        if len(readers) != 1 or name in self.outputs:
            return None
        return readers[0]

    def scalar(self, name: str) -> float | None:
        value = self.constant(name)
        if value is None:
            value = self.computed(name)
        if value is None:
            return None
        value = np.asarray(value)
        if value.size != 1 or value.dtype.kind != "f":
            return None
        return float(value.reshape(()))

    def computed(self, name: str, depth: int = 10) -> np.ndarray | None:
        """The value of a small tensor computed from constants and known sizes (an exporter's
        ``sqrt(1 / sqrt(head_size))``, head_size read through Shape), evaluated here; None
        where some input is not known or the value is not small."""
        if name in self.initializers and int(np.prod(self.initializers[name].dims)) > 16:
            return None  # a weight: not decoded for nothing
        value = self.constant(name)
        if value is not None:
            return np.asarray(value)
        node = self.producer.get(name)
        if node is None or depth == 0 or not node.input:
            return None
        op = node.op_type
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if op == "Shape":
            shape = self.shapes.get(node.input[0])
            if shape is None or any(d is None for d in shape):
                return None
            return np.array(shape, np.int64)[attrs.get("start", 0):attrs.get("end", None)]
        if op not in _COMPUTED_OPS:  # before looking upstream: activations are not walked
            return None
        inputs = []
        for name_in in node.input:
            inputs.append(self.computed(name_in, depth - 1) if name_in else None)
            if inputs[-1] is None or inputs[-1].size > 16:
                return None
        with np.errstate(all="ignore"):
            if op in _UNARY and len(inputs) == 1:
                return _UNARY[op](inputs[0])
            if op == "Cast" and attrs.get("to") in _CAST_TYPES:
                return inputs[0].astype(_CAST_TYPES[attrs["to"]])
            if op in _BINARY and len(inputs) == 2 and inputs[1] is not None:
                left, right = inputs
                if op == "Div" and left.dtype.kind in "iu" and right.dtype.kind in "iu":
                    return (left // right) if (right != 0).all() else None
                return _BINARY[op](left, right).astype(np.result_type(left, right))
            if op == "Gather" and len(inputs) == 2 and inputs[1] is not None:
                return np.take(inputs[0], inputs[1], axis=attrs.get("axis", 0))
            if op == "Slice" and inputs[0].ndim == 1 and len(inputs) >= 3 and \
                    all(i is not None for i in inputs[1:]) and \
                    (len(inputs) < 4 or list(inputs[3].reshape(-1)) in ([0], [-1])) and \
                    (len(inputs) < 5 or list(inputs[4].reshape(-1)) == [1]):
                start, end = int(inputs[1].reshape(-1)[0]), int(inputs[2].reshape(-1)[0])
                return inputs[0][max(start, -len(inputs[0])):min(end, len(inputs[0]))
                                 if end >= 0 else end]
        return None

    def scalar_int(self, name: str) -> int | None:
        """An integer constant of one element (a Gather's index)."""
        value = self.constant(name)
        if value is None:
            return None
        value = np.asarray(value)
        if value.size != 1 or value.dtype.kind not in "iu":
            return None
        return int(value.reshape(()))


def _perm(node: onnx.NodeProto) -> list[int] | None:
    if node.op_type != "Transpose":
        return None
    return next((list(a.ints) for a in node.attribute if a.name == "perm"), None)


def _unscale(view: _View, name: str) -> tuple[str, float, list[onnx.NodeProto]]:
    """``name`` without a Mul or Div by a constant scalar in front of it: the tensor scaled,
    the factor, and the scaling node (if any)."""
    node = view.producer.get(name)
    if node is None or node.op_type not in ("Mul", "Div") or len(node.input) != 2:
        return name, 1.0, []
    for index in (1, 0) if node.op_type == "Mul" else (1,):
        factor = view.scalar(node.input[index])
        if factor is not None and factor != 0.0:
            other = node.input[1 - index]
            return other, (factor if node.op_type == "Mul" else 1.0 / factor), [node]
    return name, 1.0, []


def _flat_swap(view: _View, name: str) -> str | None:
    """``Reshape(Transpose<perm=[0,2,1]>(Reshape(t, [B*N, L, H])), [B, N, H, L])``: ``t`` with
    its last two dimensions swapped through three dimensions, as torch's
    scaled_dot_product_attention transposes k when the exporter decomposes it. Its targets
    are computed at run time: the caller's check is what confirms the block."""
    outer = view.producer.get(name)
    if outer is None or outer.op_type != "Reshape":
        return None
    middle = view.producer.get(outer.input[0])
    if middle is None or _perm(middle) != [0, 2, 1]:
        return None
    inner = view.producer.get(middle.input[0])
    if inner is None or inner.op_type != "Reshape":
        return None
    return inner.input[0]


_FLAT_SWAP: list[int] = []  # a chain step: _flat_swap rather than one Transpose
_BATCH_FIRST = [1, 0, 2]  # (S, batch x heads, head_size) -> (batch x heads, S, head_size)


def _split_key(view: _View, name: str) -> tuple[str, float] | None:
    """The key split into heads (batch, heads, L, head_size) that ``name`` holds with its last
    two dimensions swapped (a Transpose, or torch's SDPA through 3-D Reshapes), maybe scaled
    before or after: that tensor and the factor. A Llama-style block computes its key so:
    rotary embeddings, and grouped-query heads repeated, after the split."""
    name, factor, _ = _unscale(view, name)
    node = view.producer.get(name)
    inner = node.input[0] if node is not None and _perm(node) == _SWAP else _flat_swap(view, name)
    if inner is None:
        return None
    inner, more, _ = _unscale(view, inner)
    return inner, factor * more


def _split(view: _View, name: str, num_heads: int) -> bool:
    """Whether ``name`` is known to hold (batch, ``num_heads``, length, head_size)."""
    shape = view.shapes.get(name)
    return shape is not None and len(shape) == 4 and shape[1] in (None, num_heads)


def _heads(view: _View, name: str, perms: list[list[list[int]]]) -> tuple[str, float] | None:
    """The projection (batch, sequence, hidden) that ``name`` splits into heads, and the
    factor: one of the Transpose chains ``perms`` over a Reshape, an optional scaling before
    or after it."""
    name, factor, _ = _unscale(view, name)
    for chain in perms:
        current: str | None = name
        for perm in reversed(chain):
            if perm is _FLAT_SWAP:
                current = _flat_swap(view, current)
                if current is None:
                    break
                continue
            node = view.producer.get(current)
            if node is None or _perm(node) != perm:
                break
            current = node.input[0]
        else:
            inner, more, _ = _unscale(view, current)
            reshape = view.producer.get(inner)
            if reshape is None or reshape.op_type != "Reshape":
                continue
            return reshape.input[0], factor * more
    return None


def _seq_first_heads(view: _View, name: str, chains: list[tuple[list[list[int]], list[int]]]
                     ) -> tuple[str, float] | None:
    """The sequence-first projection ``t`` (S, batch, hidden) that ``name`` splits into heads as
    nn.MultiheadAttention does, and the factor: ``Reshape(T(Reshape(t, [S, batch x heads,
    head_size])))``, T Transposes that move batch x heads first (``[1, 0, 2]``; ``[1, 2, 0]``
    for a key given transposed, as the dynamo exporter writes it), the target (batch, heads,
    ...); each of ``chains`` is the Transposes before that (as :func:`_heads` walks them) and
    T's perm; a scaling before or after. Its targets are computed at run time: the caller's
    check, on two batch sizes, is what confirms the block."""
    name, factor, _ = _unscale(view, name)
    for leading, perm in chains:
        current: str | None = name
        for step in reversed(leading):
            node = view.producer.get(current) if current is not None else None
            current = _flat_swap(view, current) if step is _FLAT_SWAP else (
                node.input[0] if node is not None and _perm(node) == step else None)
            if current is None:
                break
        if current is None:
            continue
        current, more, _ = _unscale(view, current)
        outer = view.producer.get(current)
        if outer is None or outer.op_type != "Reshape":
            continue
        composite = [0, 1, 2]
        node = view.producer.get(outer.input[0])
        while node is not None and node.op_type == "Transpose" and _perm(node) is not None \
                and len(_perm(node)) == 3:
            composite = [_perm(node)[i] for i in composite]
            node = view.producer.get(node.input[0])
        if composite == perm and node is not None and node.op_type == "Reshape":
            return node.input[0], factor * more
    return None


def _reaches_scores(view: _View, name: str, depth: int = 4) -> bool:
    """Whether ``name`` is q @ k (a MatMul), maybe scaled, maybe plus biases."""
    inner, _, _ = _unscale(view, name)
    node = view.producer.get(inner)
    if node is None or depth == 0:
        return False
    if node.op_type == "MatMul":
        return True
    return node.op_type == "Add" and any(_reaches_scores(view, i, depth - 1)
                                         for i in node.input)


def _nan_guard(view: _View, name: str) -> str | None:
    """``Where(IsNaN(p), 0, p)`` on the probabilities ``name`` (torch's
    scaled_dot_product_attention, decomposed: a row whose every key is masked with -inf gives
    zeros, not NaN): its output. With finite biases no row is NaN, and the guard computes
    ``p`` itself."""
    readers = view.readers.get(name, [])
    isnan = next((n for n in readers if n.op_type == "IsNaN"), None)
    where = next((n for n in readers if n.op_type == "Where"), None)
    if len(readers) != 2 or isnan is None or where is None or name in view.outputs:
        return None
    if list(where.input) != [isnan.output[0], where.input[1], name] or \
            view.only_reader(isnan.output[0]) is not where or view.scalar(where.input[1]) != 0.0:
        return None
    return where.output[0]


def _mask_values(view: _View, name: str, depth: int = 8) -> set[float] | None:
    """The values the bias ``name`` can hold, where it is built of constants: a ``Where``
    between two scalars (the exporter's mask: 0, and the lowest float or -inf), maybe moved
    (Expand, Unsqueeze, Reshape), Cast to a float type (in that type: float32's lowest is -inf
    in float16) or summed; None for any other bias (computed values: a position bias)."""
    node = view.producer.get(name)
    if node is None or depth == 0:
        return None
    if node.op_type == "Where":
        values = [view.scalar(i) for i in node.input[1:]]
        return None if None in values else set(values)
    if node.op_type in ("Expand", "Unsqueeze", "Reshape"):
        return _mask_values(view, node.input[0], depth - 1)
    if node.op_type == "Cast":
        to = next((a.i for a in node.attribute if a.name == "to"), None)
        inner = _mask_values(view, node.input[0], depth - 1)
        if inner is None or to not in _FLOAT_TYPES:
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            return {float(v) for v in np.array(sorted(inner), np.float64).astype(
                _FLOAT_TYPES[to])}
    if node.op_type == "Add" and len(node.input) == 2:
        left, right = (_mask_values(view, i, depth - 1) for i in node.input)
        if left is None or right is None:
            return None
        with np.errstate(over="ignore", invalid="ignore"):
            return {float(np.float32(a) + np.float32(b)) for a in left for b in right}
    return None


def _guarded_rows(view: _View, biases: list[str], scores: str) -> int | None | bool:
    """What torch's NaN guard over ``biases`` needs of a fusion: False where no row can be
    NaN (every bias finite by construction: the guard computes ``p`` itself); the element
    type of the rows to set to zero where the biases, each built of constants, finite or -inf,
    may hold -inf for a whole row: such a row is NaN in MultiHeadAttention where the guard
    gives zeros; None where the block cannot be fused (another bias, +inf or NaN possible)."""
    values = [_mask_values(view, bias) for bias in biases]
    if any(v is None for v in values):
        return None
    every = set().union(*values)
    if all(np.isfinite(v) for v in every):
        return False
    if any(np.isnan(v) or v == np.inf for v in every):
        return None
    dtype = view.types.get(scores)
    return dtype if dtype in _FLOAT_TYPES else None


def _block(view: _View, softmax: onnx.NodeProto, num_heads: int) -> _Block | None:
    # the default axis is -1 from opset 13, 1 before it (then over the flattened trailing
    # dimensions, the same as the last one only for axis 3)
    axis = next((a.i for a in softmax.attribute if a.name == "axis"),
                -1 if view.opset >= 13 else 1)
    if axis not in (-1, 3):
        return None
    last, biases = softmax, []  # the node walked last, toward the scores
    scores = softmax.input[0]
    while True:  # the additive biases (mask, position bias), each a term of its own Add
        add = view.producer.get(scores)
        if add is None or add.op_type != "Add" or view.only_reader(scores) is not last:
            break
        toward = [i for i in add.input if _reaches_scores(view, i)]
        if len(toward) != 1 or len(add.input) != 2:
            return None
        bias = add.input[1] if add.input[0] == toward[0] else add.input[0]
        if view.rank(bias) != 4:  # attention_bias is (batch|1, heads|1, S, L)
            return None
        biases.append(bias)
        last = add
        scores = toward[0]
    if view.only_reader(scores) is not last:
        return None
    unscaled, scale, scaling = _unscale(view, scores)
    if scaling and view.only_reader(unscaled) is not scaling[0]:
        return None
    product = view.producer.get(unscaled)
    if product is None or product.op_type != "MatMul":
        return None
    query = _heads(view, product.input[0], [[_SPLIT]])
    key = _heads(view, product.input[1], [[_KEY], [_SPLIT, _SWAP], [_SPLIT, _FLAT_SWAP]])
    seq_first = query is None and key is None
    if seq_first:  # nn.MultiheadAttention's heads, split through batch x heads
        query = _seq_first_heads(view, product.input[0], [([], _BATCH_FIRST)])
        key = _seq_first_heads(view, product.input[1], [([_SWAP], _BATCH_FIRST),
                                                        ([_FLAT_SWAP], _BATCH_FIRST),
                                                        ([], [1, 2, 0])])
        seq_first = query is not None and key is not None
        if not seq_first:
            query = key = None
    query_split = query is None  # rotary embeddings, between the split and the scores
    if query_split:
        query = (product.input[0], 1.0)
        if not _split(view, query[0], num_heads):
            return None
    # what follows the Softmax: MatMul with v, heads merged back
    probabilities = softmax.output[0]
    guard = _nan_guard(view, probabilities)
    masked_rows = None
    if guard is not None:  # NaN can come of a bias only where it holds -inf
        rows = _guarded_rows(view, biases, softmax.input[0])
        if rows is None:
            return None
        masked_rows = rows if rows is not False else None
        probabilities = guard
    same_type = view.types.get(softmax.input[0])
    while True:  # Casts to the type the probabilities already have (an exporter's upcast)
        cast = view.only_reader(probabilities)
        if cast is None or cast.op_type != "Cast" or same_type is None or \
                next((a.i for a in cast.attribute if a.name == "to"), None) != same_type:
            break
        probabilities = cast.output[0]
    mix = view.only_reader(probabilities)
    if mix is None or mix.op_type != "MatMul" or mix.input[0] != probabilities:
        return None
    value = _seq_first_heads(view, mix.input[1], [([], _BATCH_FIRST)]) if seq_first else \
        _heads(view, mix.input[1], [[_SPLIT]])
    if seq_first and value is None:
        return None
    shared_kv = False
    if key is None or value is None:  # grouped-query heads repeated, rotary keys: both split
        key, value = _split_key(view, product.input[1]), (mix.input[1], 1.0)
        if key is None:
            return None
        if not (_split(view, key[0], num_heads) and _split(view, value[0], num_heads)):
            # one key and value head that the products broadcast (multi-query attention)
            shared_kv = num_heads > 1 and _split(view, key[0], 1) and _split(
                view, value[0], 1) and view.shapes[key[0]][1] == view.shapes[value[0]][1] == 1
            if not shared_kv:
                return None
    merge = view.only_reader(mix.output[0])
    if value[1] != 1.0 or merge is None or _perm(merge) != ([2, 0, 1, 3] if seq_first
                                                            else _SPLIT):
        return None
    reshape = view.only_reader(merge.output[0])
    if reshape is None or reshape.op_type != "Reshape":
        return None
    if seq_first:  # the fused output, (batch, S, hidden), goes to that Reshape sequence first
        return _Block(query[0], key[0], value[0], biases, scale * query[1] * key[1], False,
                      reshape, False, num_heads, masked_rows, seq_first=True)
    # MultiHeadAttention gives (batch, sequence, hidden): the Reshape goes where its output is
    # that (hidden known and the query's); elsewhere it stays, reading the fused output, which
    # holds the same values in the same order as the heads it merged
    merged, wanted = view.shapes.get(reshape.output[0]), view.shapes.get(query[0])
    if query_split and wanted is not None:  # (batch, heads, S, head_size): as merged
        wanted = (wanted[0], wanted[2],
                  None if None in (wanted[1], wanted[3]) else wanted[1] * wanted[3])
    if merged is None or merged[-1] is None:
        target = view.dims(reshape.input[1])  # -1 last: the rest, heads x head size
        merged = None if target is None else tuple(target)
    same = (merged is not None and wanted is not None and len(merged) == 3 == len(wanted)
            and merged[-1] is not None and merged[-1] in (wanted[-1], -1))
    return _Block(query[0], key[0], value[0], biases, scale * query[1] * key[1],
                  query_split, reshape, same, num_heads, masked_rows, shared_kv=shared_kv)


@dataclasses.dataclass
class _Projection:
    source: str  # x
    weight: np.ndarray
    bias: np.ndarray  # zeros where there is none
    product: onnx.NodeProto  # the MatMul (or flattening Gemm) the packing replaces
    names: tuple[str, str]  # the weight's and the bias's constants ("" for none)


def _constant_name(view: _View, name: str) -> str:
    """The initializer (or Constant) behind ``name``, through the Identity nodes exporters
    alias shared weights with."""
    node = view.producer.get(name)
    while node is not None and node.op_type == "Identity":
        name = node.input[0]
        node = view.producer.get(name)
    return name


def _flat_projection(view: _View, name: str) -> _Projection | None:
    """``name = Reshape(Gemm(Reshape(x, [-1, in]), W, b), [B, S, out])``: a projection of the
    rank-3 ``x`` through two dimensions (the dynamo exporter's ``addmm``, GPT-2's Conv1D);
    the caller's check confirms the outer Reshape restores x's leading sizes."""
    outer = view.producer.get(name)
    gemm = view.producer.get(outer.input[0]) if outer is not None and \
        outer.op_type == "Reshape" else None
    if gemm is None or gemm.op_type != "Gemm" or view.only_reader(gemm.output[0]) is not outer:
        return None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in gemm.attribute}
    if attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
        return None
    inner = view.producer.get(gemm.input[0])
    if inner is None or inner.op_type != "Reshape" or view.only_reader(inner.output[0]) is not gemm:
        return None
    weight = view.constant(gemm.input[1])
    if weight is None or weight.ndim != 2 or weight.dtype.kind != "f":
        return None
    weight = np.ascontiguousarray(weight.T) if attrs.get("transB", 0) else weight
    flat, restored = view.dims(inner.input[1]), view.dims(outer.input[1])
    if view.rank(inner.input[0]) != 3 or flat is None or flat[-1] != weight.shape[0] or \
            len(flat) != 2 or restored is None or len(restored) != 3 or \
            restored[-1] != weight.shape[1]:
        return None
    has_bias = len(gemm.input) > 2 and gemm.input[2]
    bias = view.constant(gemm.input[2]) if has_bias else np.zeros(weight.shape[1], weight.dtype)
    if bias is None or bias.dtype != weight.dtype or bias.size != weight.shape[1]:
        return None
    return _Projection(inner.input[0], weight, bias.reshape(-1), gemm,
                       (_constant_name(view, gemm.input[1]),
                        _constant_name(view, gemm.input[2]) if has_bias else ""))


def _projection(view: _View, name: str) -> _Projection | None:
    """``name = MatMul(x, W) [+ b]`` with W a constant matrix, b a constant vector of its
    width, each step read once on the way (or the same through a flattening Gemm:
    :func:`_flat_projection`)."""
    flat = _flat_projection(view, name)
    if flat is not None:
        return flat
    node, bias, bias_name = view.producer.get(name), None, ""
    if node is not None and node.op_type == "Add" and len(node.input) == 2:
        for product, other in (list(node.input), list(node.input)[::-1]):
            inner = view.producer.get(product)
            if inner is not None and inner.op_type == "MatMul" and \
                    view.only_reader(product) is node:
                node, bias, bias_name = inner, view.constant(other), other
                break
        if bias is None:
            return None
    if node is None or node.op_type != "MatMul":
        return None
    weight = view.constant(node.input[1])
    if weight is None or weight.ndim != 2 or weight.dtype.kind != "f":
        return None
    bias = np.zeros(weight.shape[1], weight.dtype) if bias is None else np.asarray(bias)
    if bias.dtype != weight.dtype or bias.size != weight.shape[1] or \
            any(d != 1 for d in bias.shape[:-1]):
        return None
    return _Projection(node.input[0], weight, bias.reshape(-1), node,
                       (_constant_name(view, node.input[1]),
                        _constant_name(view, bias_name) if bias_name else ""))


def _read_only_by(view: _View, name: str, readers: set[int]) -> bool:
    """Whether every node reading ``name`` (through Identity aliases) is one of ``readers``
    (by id), and no graph output is ``name``."""
    if name in view.outputs:
        return False
    for node in view.readers.get(name, []):
        if node.op_type == "Identity":
            if not _read_only_by(view, node.output[0], readers):
                return False
        elif id(node) not in readers:
            return False
    return True


@dataclasses.dataclass
class _Packing:
    source: str  # the input q, k and v are projected from
    weights: list[np.ndarray]  # Wq, Wk, Wv (or one joint weight), packed side by side
    biases: list[np.ndarray]
    factor: float  # scalings of q and k after their projections, for Attention's scale
    key: tuple[str, ...]  # the weights, then the biases packed: blocks of one key share them
    products: list[onnx.NodeProto]  # the projections' products, which the packing replaces
    shapes: list[onnx.NodeProto]  # Shape nodes reading q, k or v: they read the input instead


def _packed(view: _View, block: _Block, float16: bool) -> _Packing | None:
    """The packing of a self-attention block whose q, k and v are projections of one input
    (q and k maybe scaled after it, as Whisper's and BART's q), each read by the block alone
    (and by Shape nodes, where q, k and v have the input's shape: a legacy export reads k's
    sizes so); None for any other block."""
    names = (block.query, block.key, block.value)
    if block.query_split or len(set(names)) != 3:
        return None
    shapes: list[onnx.NodeProto] = []
    factor, projected = 1.0, []
    for name in names:
        readers = view.readers.get(name, [])
        if sum(r.op_type != "Shape" for r in readers) != 1 or name in view.outputs:
            return None
        shapes += [r for r in readers if r.op_type == "Shape"]
        inner, more, scaling = _unscale(view, name)
        if scaling and (name == block.value or view.only_reader(inner) is not scaling[0]):
            return None  # a factor on v scales the output, not the scores
        factor *= more
        projected.append(inner)
    allowed = (np.float32, np.float16) if float16 else (np.float32,)
    if block.seq_first:  # Attention reads its input batch first: one that is transposed
        joint = None if shapes else _gathered_projection(view, projected)
        if joint is None or joint.weight.dtype not in allowed or \
                joint.weight.shape[1] % (3 * block.heads):
            return None
        return _Packing(joint.source, [joint.weight], [joint.bias], factor,
                        (joint.names[0], "", "", joint.names[1], "", ""), [joint.product], [])
    joint = _split_projection(view, projected)
    if joint is not None:  # GPT-2's c_attn: one projection, split into q, k and v
        width = joint.weight.shape[1]
        if joint.weight.dtype not in allowed or width % (3 * block.heads) or \
                view.rank(projected[0]) != 3 or \
                shapes and joint.weight.shape[0] * 3 != width:
            return None
        return _Packing(joint.source, [joint.weight], [joint.bias], factor,
                        (joint.names[0], "", "", joint.names[1], "", ""), [joint.product],
                        shapes)
    parts = [_projection(view, n) for n in projected]
    if any(p is None for p in parts):
        return None
    weights = [p.weight for p in parts]
    rank = view.rank(parts[0].source)  # unknown past ORT's fusions: then the projections'
    if rank is None:
        rank = view.rank(projected[0])
    if len({p.source for p in parts}) != 1 or rank != 3 or \
            len({(w.shape, w.dtype) for w in weights}) != 1 or \
            weights[0].dtype not in allowed or weights[0].shape[1] % block.heads or \
            shapes and weights[0].shape[0] != weights[0].shape[1]:
        return None
    return _Packing(parts[0].source, weights, [p.bias for p in parts], factor,
                    tuple(p.names[0] for p in parts) + tuple(p.names[1] for p in parts),
                    [p.product for p in parts], shapes)


def _split_projection(view: _View, names: list[str]) -> _Projection | None:
    """The projection that ``names`` (q, k, v) are the three equal parts of, in that order,
    split along the last axis, the split read by nothing else; None for anything else."""
    split = view.producer.get(names[0])
    if split is None or split.op_type != "Split" or list(split.output) != list(names):
        return None
    axis = next((a.i for a in split.attribute if a.name == "axis"), 0)
    if axis not in (-1, 2) or view.only_reader(split.input[0]) is not split:
        return None
    sizes = view.constant(split.input[1]) if len(split.input) > 1 and split.input[1] else \
        next((np.array(a.ints) for a in split.attribute if a.name == "split"), None)
    if sizes is not None and len(set(np.asarray(sizes).reshape(-1).tolist())) != 1:
        return None
    return _projection(view, split.input[0])


def _gathered_projection(view: _View, names: list[str]) -> _Projection | None:
    """The projection that ``names`` (q, k, v; each (S, batch, hidden)) are the three parts
    of, as nn.MultiheadAttention takes them from its packed input projection: ``Gather(i)`` of
    ``Squeeze<3>(Transpose<3,1,2,0,4>(Unsqueeze<0>(Reshape(P, [S, batch, 3, hidden]))))``,
    with ``P = MatMul(Transpose<1,0,2>(x), W) + b`` of a batch-first ``x``: that projection,
    with ``x`` as its source (a product computed row by row, it is the same of x, batch
    first). None for anything else; the caller's check confirms the targets."""
    gathers = [view.producer.get(n) for n in names]
    if any(g is None or g.op_type != "Gather" for g in gathers) or \
            len({g.input[0] for g in gathers}) != 1 or \
            [view.scalar_int(g.input[1]) for g in gathers] != [0, 1, 2] or \
            any(next((a.i for a in g.attribute if a.name == "axis"), 0) != 0 for g in gathers):
        return None
    packed = gathers[0].input[0]
    chain = []
    current = packed
    for op in ("Squeeze", "Transpose", "Unsqueeze", "Reshape"):
        node = view.producer.get(current)
        if node is None or node.op_type != op or \
                sum(1 for r in view.readers.get(current, []) if r.op_type != "Shape") != \
                (3 if op == "Squeeze" else 1):
            return None
        chain.append(node)
        current = node.input[0]
    if _perm(chain[1]) != [3, 1, 2, 0, 4]:
        return None
    found = _projection(view, current)
    if found is None:
        return None
    transpose = view.producer.get(found.source)
    if transpose is None or _perm(transpose) != [1, 0, 2]:
        return None
    return dataclasses.replace(found, source=transpose.input[0])


def _packings(view: _View, blocks: list[_Block], float16: bool) -> list[_Packing | None]:
    """Each block's packing, where the weights it packs are read by the projections packed
    alone (one packing per set of weights, shared by the blocks that read them, as an
    ALBERT's layers do): a weight read elsewhere too would be kept twice, packed and not."""
    found = [None if block.shared_kv else _packed(view, block, float16) for block in blocks]
    by_key: dict[tuple[str, ...], set[int]] = {}
    for packing in found:
        if packing is not None:
            by_key.setdefault(packing.key, set()).update(id(m) for m in packing.products)
    sole = {key: all(_read_only_by(view, name, products) for name in key[:3] if name)
            for key, products in by_key.items()}
    return [p if p is not None and sole[p.key] else None for p in found]


def fuse_attention(model: onnx.ModelProto, num_heads: int | Mapping[str, int],
                   shapes: dict[str, tuple[int | None, ...]] | None = None,
                   types: dict[str, int] | None = None, float16_packed: bool = False,
                   pack: bool = True) -> int:
    """Replace each attention block of ``model`` (in place) by ``Attention`` (q, k and v
    projections of one input, packed) or ``MultiHeadAttention`` with ``num_heads`` heads (or,
    a mapping, each block's own by its Softmax's output name: a Swin's stages differ);
    returns how many were fused. Nodes left unread (the block's own, the heads' Reshapes and
    Transposes only the blocks read, the projections packed) are removed, and the weights
    packed with them. ``shapes`` and ``types``: what shape inference on the model before other
    fusions says (:func:`tensor_info`), beside the model's own value_info.
    ``float16_packed``: pack float16 projections too (the model runs on CUDA); ``pack=False``:
    every block becomes ``MultiHeadAttention``."""
    view = _View(model, shapes, types)
    def heads_of(softmax: onnx.NodeProto) -> int | None:
        return num_heads if isinstance(num_heads, int) else num_heads.get(softmax.output[0])

    blocks = [b for b in (_block(view, n, heads_of(n) or 0) for n in model.graph.node
                          if n.op_type == "Softmax" and heads_of(n)) if b is not None]
    if not blocks:
        return 0
    replacement: dict[int, list[onnx.NodeProto]] = {}
    expanded: dict[str, str] = {}  # a bias with one query row, by name: its expansion
    merge_heads = "graphfix_attention_merge_heads"
    if any(b.query_split for b in blocks):
        model.graph.initializer.append(
            onnx.numpy_helper.from_array(np.array([0, 0, -1], np.int64), merge_heads))
    packed_names: dict[tuple[str, ...], tuple[str, str]] = {}  # key: packed weight, bias
    packings = _packings(view, blocks, float16_packed) if pack else \
        [None] * len(blocks)
    for index, (block, packed) in enumerate(zip(blocks, packings)):
        prefix = f"graphfix_attention_{index}"
        added, bias = [], block.biases[0] if block.biases else ""
        if block.seq_first and not packed:  # MultiHeadAttention takes them batch first
            for role in ("query", "key", "value"):
                source = getattr(block, role)
                added.append(helper.make_node("Transpose", [source], [f"{prefix}_{role}_bsh"],
                                              name=f"{prefix}_{role}_bsh", perm=[1, 0, 2]))
                setattr(block, role, added[-1].output[0])
        if block.shared_kv:  # one key and value head, repeated for each query head
            repeat = f"{prefix}_kv_heads"
            model.graph.initializer.append(onnx.numpy_helper.from_array(
                np.array([1, block.heads, 1, 1], np.int64), repeat))
            for role in ("key", "value"):
                added.append(helper.make_node("Expand", [getattr(block, role), repeat],
                                              [f"{prefix}_{role}_heads"],
                                              name=f"{prefix}_{role}_heads"))
                setattr(block, role, added[-1].output[0])
        rows_of = packed.source if packed else block.query  # (batch, S, ...): S, for a bias
        if block.query_split:  # MultiHeadAttention takes the query as (batch, S, hidden)
            added += [
                helper.make_node("Transpose", [block.query], [f"{prefix}_query_bsnh"],
                                 name=f"{prefix}_query_bsnh", perm=_SPLIT),
                helper.make_node("Reshape", [f"{prefix}_query_bsnh", merge_heads],
                                 [f"{prefix}_query"], name=f"{prefix}_query"),
            ]
            block.query = f"{prefix}_query"
        for more in block.biases[1:]:  # one attention_bias: the terms summed
            added.append(helper.make_node("Add", [bias, more], [f"{prefix}_bias{len(added)}"],
                                          name=f"{prefix}_bias{len(added)}"))
            bias = added[-1].output[0]
        summed = bias  # before a row expansion: what the guard of masked rows reads
        if block.biases and all((view.shapes.get(b) or (0, 0, 0))[2] == 1 for b in block.biases):
            # (batch, 1, 1, L), the mask as an encoder broadcasts it: MultiHeadAttention
            # takes one row per query, so the bias is expanded to the query's length
            if bias not in expanded:
                nodes, expanded[bias] = _expand_rows(model, bias, rows_of, prefix)
                added += nodes
            bias = expanded[bias]
        scale = block.scale
        if packed:
            if packed.key not in packed_names:  # packed once for the blocks sharing them
                packed_names[packed.key] = (f"{prefix}_qkv_weight", f"{prefix}_qkv_bias")
                for name, value in zip(packed_names[packed.key],
                                       (np.concatenate(packed.weights, axis=1),
                                        np.concatenate(packed.biases))):
                    model.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
            scale *= packed.factor
            for shape in packed.shapes:  # q, k and v have the input's shape
                shape.input[0] = packed.source
            op, inputs = "Attention", [packed.source, *packed_names[packed.key], "", "",
                                       bias]
        else:
            op, inputs = "MultiHeadAttention", [block.query, block.key, block.value, "", "",
                                                bias]
        while inputs and not inputs[-1]:
            inputs.pop()
        output = block.merge.output[0] if block.merged else f"{prefix}_output"
        batch_first = f"{prefix}_batch_first" if block.seq_first else output
        fused = batch_first if block.masked_rows is None else f"{prefix}_unguarded"
        added.append(helper.make_node(op, inputs, [fused], name=prefix, domain=_CONTRIB,
                                      num_heads=block.heads, scale=float(scale)))
        if block.masked_rows is not None:
            added += _zero_masked_rows(model, view.opset, summed, fused, batch_first,
                                       block.masked_rows, block.heads, prefix)
        if block.seq_first:  # the heads were merged sequence first: (S, batch, hidden)
            added.append(helper.make_node("Transpose", [batch_first], [output],
                                          name=f"{prefix}_sequence_first", perm=[1, 0, 2]))
        last = block.merge  # all the block reads is computed before it; it stays where it
        if not block.merged:  # gives another shape than MultiHeadAttention's
            last.input[0] = output
            added.append(last)
        replacement[id(last)] = added
    # The block's nodes are read only inside it (checked as it was matched): with the merging
    # Reshape replaced they are dead, as are the split's nodes that nothing else reads.
    kept = []
    for node in model.graph.node:
        kept.extend(replacement.get(id(node), [node]))
    del model.graph.node[:]
    model.graph.node.extend(live_nodes(kept, [o.name for o in model.graph.output]))
    drop_unread_initializers(model.graph)  # the weights packed, the heads' shapes
    if not any(o.domain == _CONTRIB for o in model.opset_import):
        model.opset_import.add(domain=_CONTRIB, version=1)
    return len(blocks)


def _zero_masked_rows(model: onnx.ModelProto, opset: int, bias: str, fused: str, output: str,
                      dtype: int, heads: int, prefix: str) -> list[onnx.NodeProto]:
    """Nodes that give ``output``: ``fused`` (batch, S, heads x head_size) with zeros in each
    head's rows where ``bias`` (batch|1, heads|1, S|1, L) is -inf for every key, as torch's
    NaN guard gives them (MultiHeadAttention's softmax of such a row is NaN)."""
    def constant(suffix: str, value: np.ndarray) -> str:
        name = f"{prefix}_{suffix}"
        model.graph.initializer.append(onnx.numpy_helper.from_array(value, name))
        return name

    def node(op: str, inputs: list[str], suffix: str, out: str | None = None,
             **attributes: object) -> onnx.NodeProto:
        return helper.make_node(op, inputs, [out or f"{prefix}_{suffix}"],
                                name=f"{prefix}_{suffix}", **attributes)

    row_max = (node("ReduceMax", [bias, constant("keys", np.array([-1], np.int64))],
                    "row_max", keepdims=1) if opset >= 18  # axes an input from opset 18
               else node("ReduceMax", [bias], "row_max", axes=[-1], keepdims=1))
    return [
        row_max,
        node("IsInf", [row_max.output[0]], "masked", detect_positive=0),  # (B, N, S, 1)
        node("Transpose", [f"{prefix}_masked"], "masked_bsnh", perm=_SPLIT),
        node("Reshape",
             [fused, constant("split_heads", np.array([0, 0, heads, -1], np.int64))], "heads"),
        node("Where", [f"{prefix}_masked_bsnh",
                       constant("zero", np.zeros((), _FLOAT_TYPES[dtype])), f"{prefix}_heads"],
             "zeroed"),
        node("Reshape", [f"{prefix}_zeroed", constant("merge", np.array([0, 0, -1], np.int64))],
             "merged", out=output),
    ]


def _expand_rows(model: onnx.ModelProto, bias: str, query: str, prefix: str
                 ) -> tuple[list[onnx.NodeProto], str]:
    """Nodes that expand ``bias`` (batch, 1, 1, L) to (batch, 1, S, L), S the length of
    ``query`` (batch, S, hidden), and the expanded tensor's name."""
    for name, values in ((f"{prefix}_one", [1]), (f"{prefix}_ones", [1, 1])):
        model.graph.initializer.append(
            onnx.numpy_helper.from_array(np.array(values, np.int64), name))
    nodes = [
        helper.make_node("Shape", [query], [f"{prefix}_query_shape"], name=f"{prefix}_shape"),
        helper.make_node("Gather", [f"{prefix}_query_shape", f"{prefix}_one"],
                         [f"{prefix}_rows"], name=f"{prefix}_rows", axis=0),
        helper.make_node("Concat", [f"{prefix}_ones", f"{prefix}_rows", f"{prefix}_one"],
                         [f"{prefix}_bias_shape"], name=f"{prefix}_bias_shape", axis=0),
        helper.make_node("Expand", [bias, f"{prefix}_bias_shape"], [f"{prefix}_bias_rows"],
                         name=f"{prefix}_bias_rows"),
    ]
    return nodes, nodes[-1].output[0]


def tensor_info(model: onnx.ModelProto
                ) -> tuple[dict[str, tuple[int | None, ...]], dict[str, int]]:
    """Each tensor's shape and element type as ONNX shape inference gives them (a dimension it
    cannot tell is None; both empty where inference fails)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 - a model shape inference cannot read: nothing known
        return {}, {}
    values = list(inferred.graph.value_info) + list(inferred.graph.output)
    return _shapes(values), _types(values)


def tensor_shapes(model: onnx.ModelProto) -> dict[str, tuple[int | None, ...]]:
    """Each tensor's shape as ONNX shape inference gives it (see :func:`tensor_info`)."""
    return tensor_info(model)[0]


def _shapes(values: list[onnx.ValueInfoProto]) -> dict[str, tuple[int | None, ...]]:
    return {v.name: tuple(d.dim_value if d.HasField("dim_value") else None
                          for d in v.type.tensor_type.shape.dim)
            for v in values if v.type.tensor_type.HasField("shape")}


def _types(values: list[onnx.ValueInfoProto]) -> dict[str, int]:
    return {v.name: v.type.tensor_type.elem_type for v in values
            if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type}
