"""Reading a transformer's attention geometry and kind from its graph.

Heads. Every attention block computes ``Softmax(q @ k^T * scale + mask) @ v``, and its exporter
splits the projected q into heads with a ``Reshape`` to ``[batch, sequence, heads, head_size]``
(then ``Transpose(0, 2, 1, 3)``). :func:`read_heads` finds each Softmax whose input comes from
a MatMul of two tensors and whose output feeds a MatMul, follows q back through scaling and
Transposes to that Reshape, and reads its target: an initializer, a Constant, or a Concat of
pieces some of which are constant (the batch and sequence sizes come from Shape at run time;
heads and head size are constants). A target with -1 for the heads is solved with the hidden
size of q's projection weight. Every block must agree; a graph where none can be read, or where
they disagree, gives the reason instead.

Kind. ONNX Runtime's optimizer needs the model type: :func:`model_type` reads it from the op
pattern: an image input into a Conv (patch embedding) is ``vit``; rotary embeddings (Sin/Cos)
or a tanh GELU with a causal mask make a decoder, ``gpt2`` (ORT's optimizer has no Llama type:
its GPT-2 fusions are those that apply to one); anything else is ``bert``.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import onnx
from onnx import numpy_helper

from graphfix.model_io import tensor_value

__all__ = ["Heads", "blocks_disagree", "heads_per_block", "read_heads", "model_type",
           "target_computed"]

_SCALING = ("Mul", "Div")
_PASS_THROUGH = ("Cast", "Dropout", "Identity")


@dataclasses.dataclass(frozen=True)
class Heads:
    """The attention geometry read from the graph: ``blocks`` attention blocks of
    ``num_heads`` heads of ``head_size``."""

    num_heads: int
    head_size: int
    blocks: int

    @property
    def hidden_size(self) -> int:
        return self.num_heads * self.head_size

    def describe(self) -> str:
        return (f"{self.blocks} attention block(s) of {self.num_heads} heads of "
                f"{self.head_size} (hidden size {self.hidden_size})")


class GraphView:
    """A graph's producers, readers and constants, for reading attention blocks (here and in
    :mod:`.attention`)."""

    def __init__(self, model: onnx.ModelProto) -> None:
        self.graph = model.graph
        self.producer = {o: n for n in model.graph.node for o in n.output if o}
        self.readers: dict[str, list[onnx.NodeProto]] = {}
        for node in model.graph.node:
            for name in node.input:
                self.readers.setdefault(name, []).append(node)
        self.initializers = {t.name: t for t in model.graph.initializer}

    def constant(self, name: str) -> np.ndarray | None:
        if name in self.initializers:
            return tensor_value(self.initializers[name])
        node = self.producer.get(name)
        if node is not None and node.op_type == "Identity":  # exporters alias shared weights
            return self.constant(node.input[0])
        if node is not None and node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    return numpy_helper.to_array(attr.t)
                if attr.name == "value_ints":
                    return np.array(list(attr.ints), dtype=np.int64)
                if attr.name == "value_int":
                    return np.array(attr.i, dtype=np.int64)
        return None

    def dims(self, name: str) -> list[int | None] | None:
        """The entries of a shape tensor, None where computed at run time."""
        value = self.constant(name)
        if value is not None:
            return [int(v) for v in np.asarray(value).reshape(-1)]
        node = self.producer.get(name)
        if node is None or node.op_type != "Concat":
            return None
        dims: list[int | None] = []
        for piece in node.input:
            value = self.constant(piece)
            if value is not None:
                dims += [int(v) for v in np.asarray(value).reshape(-1)]
            else:
                dims.append(None)  # one entry per run-time piece (Unsqueeze of a Gather)
        return dims

    def back(self, name: str, ops: tuple[str, ...]) -> onnx.NodeProto | None:
        """The producer of ``name``, looking through nodes of ``ops`` (their first input)."""
        node = self.producer.get(name)
        while node is not None and node.op_type in ops:
            node = self.producer.get(node.input[0])
        return node


def read_heads(model: onnx.ModelProto) -> Heads | str:
    """The heads of ``model``'s attention blocks, or why they cannot be read."""
    found, unread = _geometries(model)
    if not found:
        if unread:
            return f"the heads of no attention block can be read ({unread[0]})"
        return "no attention block (Softmax(q @ k^T) @ v) in the graph"
    counts = Counter(found.values())
    if len(counts) > 1:
        listed = ", ".join(f"{h} heads of {d} x{n}" for (h, d), n in counts.items())
        return f"{_DISAGREE} ({listed})"
    (num_heads, head_size), blocks = counts.most_common(1)[0]
    return Heads(num_heads, head_size, blocks)


_DISAGREE = "the attention blocks disagree"
# What _from_target says of a Reshape target computed at run time.
_COMPUTED = ("not a constant", "computed at run time")


def blocks_disagree(reason: str) -> bool:
    """Whether :func:`read_heads`'s ``reason`` is that blocks read different heads."""
    return reason.startswith(_DISAGREE)


def target_computed(reason: str) -> bool:
    """Whether :func:`read_heads`'s ``reason`` is a q split whose Reshape target is computed
    at run time (folding the shape arithmetic may reveal it)."""
    return any(text in reason for text in _COMPUTED)


def heads_per_block(model: onnx.ModelProto) -> dict[str, int]:
    """Each attention block's heads, by its Softmax's output name, where they can be read:
    for a model whose blocks disagree (a Swin's or a SegFormer's stages), each block is fused
    with its own."""
    return {name: heads for name, (heads, _) in _geometries(model)[0].items()}


def _geometries(model: onnx.ModelProto) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """(heads, head size) of each attention block whose q split can be read, by its Softmax's
    output name; and why the others cannot."""
    g = GraphView(model)
    found: dict[str, tuple[int, int]] = {}
    unread: list[str] = []
    for node in g.graph.node:
        if node.op_type != "Softmax":
            continue
        scores = g.back(node.input[0], ("Add", *_SCALING, *_PASS_THROUGH))
        if scores is None or scores.op_type != "MatMul":
            continue
        if not any(r.op_type == "MatMul" for r in _readers_through(g, node.output[0])):
            continue
        geometry = _from_query(g, scores.input[0])
        if isinstance(geometry, str):
            unread.append(f"{node.name or 'Softmax'}: {geometry}")
        else:
            found[node.output[0]] = geometry
    return found, unread


def _readers_through(g: GraphView, name: str) -> list[onnx.NodeProto]:
    """The readers of ``name`` past pass-through ops and a NaN guard (``Where(IsNaN(p), 0,
    p)``, torch's scaled_dot_product_attention decomposed)."""
    out = []
    for reader in g.readers.get(name, []):
        if reader.op_type in _PASS_THROUGH or (
                reader.op_type == "Where" and len(reader.input) == 3 and reader.input[2] == name):
            out += _readers_through(g, reader.output[0])
        elif reader.op_type != "IsNaN":
            out.append(reader)
    return out


def _from_query(g: GraphView, name: str) -> tuple[int, int] | str:
    """(heads, head size) from the Reshape that splits q into heads: the nearest Reshape
    upstream of q (through scaling, Transposes, rotary embeddings, a Gather from packed qkv).
    Its target is ``[batch, seq, heads, size]`` when a Transpose on the way moves the heads
    before the sequence (``[batch, seq, 3, heads, size]`` packed), else ``[batch, heads, seq,
    size]``; the projection's width, where it can be read, must be heads x size."""
    seen: set[str] = set()
    # (tensor, a Transpose moved the heads before the sequence, q is a slice of the last axis)
    queue: list[tuple[str, bool, bool]] = [(name, False, False)]
    for _ in range(_SEARCH_NODES):
        if not queue:
            break
        tensor, moved, sliced = queue.pop(0)
        node = g.producer.get(tensor)
        if node is None or tensor in seen:
            continue
        seen.add(tensor)
        if node.op_type == "Reshape":
            return _from_target(g, node, moved, sliced)
        if node.op_type in ("MatMul", "Gemm", "Softmax") or (
                node.op_type == "Concat" and not _last_axis(g, node)):
            continue  # past the projection: q's own split was not found on this path
        if node.op_type == "Transpose":
            perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), [])
            moved = moved or (len(perm) == 4 and perm[1] == 2) or (len(perm) == 5 and
                                                                  perm[2] == 3)
        # a partial rotary embedding cuts q's heads in two along their last axis and joins
        # them back (GPT-NeoX, Phi): q itself is a slice of that axis of the heads of q, k
        # and v together, [batch, seq, heads, 3 x size] (:func:`_from_target`)
        sliced = sliced or (node.op_type == "Slice" and _last_axis(g, node))
        queue += [(i, moved, sliced) for i in node.input if i and g.constant(i) is None]
    return "no Reshape splits q into heads"


def _in_thirds(g: GraphView, reshape: onnx.NodeProto) -> bool:
    """Whether the heads ``reshape`` splits (maybe transposed once) are cut along their last
    axis by three Slices: q, k and v of each head side by side (GPT-NeoX's fused projection),
    not one q's partial rotary embedding (two)."""
    def readers(name: str) -> list[onnx.NodeProto]:  # a Shape reads no value
        return [r for r in g.readers.get(name, []) if r.op_type != "Shape"]

    cut = readers(reshape.output[0])
    if len(cut) == 1 and cut[0].op_type == "Transpose":
        cut = readers(cut[0].output[0])
    return len(cut) == 3 and all(r.op_type == "Slice" and _last_axis(g, r) for r in cut)


def _last_axis(g: GraphView, node: onnx.NodeProto) -> bool:
    """Whether a Concat joins, or a Slice cuts, only the last axis of a 4-D tensor (axis -1
    or 3): along the head size, not along the sequence (a cache)."""
    if node.op_type == "Concat":
        axis = next((a.i for a in node.attribute if a.name == "axis"), None)
        return axis in (-1, 3)
    axes = g.constant(node.input[3]) if len(node.input) > 3 and node.input[3] else None
    return axes is not None and [int(a) for a in np.asarray(axes).reshape(-1)] in ([-1], [3])


_SEARCH_NODES = 24


def _from_target(g: GraphView, reshape: onnx.NodeProto, moved: bool, sliced: bool = False
                 ) -> tuple[int, int] | str:
    dims = g.dims(reshape.input[1])
    if dims is None:
        return "the target of q's Reshape is computed at run time"
    if len(dims) == 5 and dims[2] == 3:  # packed q, k, v
        dims = [dims[0], dims[1], dims[3], dims[4]]
    if len(dims) != 4:
        return f"q's Reshape target {dims} is not [batch, seq, heads, size]"
    heads, size = (dims[2], dims[3]) if moved else (dims[1], dims[3])
    width = _projection_width(g, reshape.input[0])
    if size is None or size <= 0:
        return f"the head size in q's Reshape target {dims} is not a constant"
    if heads is None or heads <= 0:
        if width is None or width % size:
            return f"the heads in q's Reshape target {dims} are not a constant"
        heads = width // size
    if sliced and moved and size % 3 == 0 and width == heads * size and _in_thirds(g, reshape):
        size //= 3  # [batch, seq, heads, 3 x size]: q, k and v of each head side by side
    # A q sliced from one projection of q, k and v (a Swin's qkv) reads three times as wide.
    if width is not None and width not in (heads * size, 3 * heads * size):
        return (f"q's Reshape target {dims} says {heads} heads of {size}, its projection "
                f"is {width} wide")
    return heads, size


def _projection_width(g: GraphView, name: str) -> int | None:
    """The output width of the MatMul (plus a bias, a scaling) that projects q, a packed
    projection's divided by the parts a Split makes of it: what -1 heads stand for."""
    node = g.producer.get(name)
    parts = 1
    cut: tuple[int, int] | None = None  # a Slice of the projection: [start, end) of its width
    for _ in range(6):
        if node is None:
            return None
        if node.op_type == "Split":
            parts = len(node.output)
            node = g.producer.get(node.input[0])
        elif node.op_type == "Slice" and cut is None and parts == 1:
            cut = _slice_range(g, node)  # Phi-3's q: the first part of one qkv projection
            if cut is None:
                return None
            node = g.producer.get(node.input[0])
        elif node.op_type == "Reshape":  # GPT-2's Conv1D: a Gemm on a flattened input
            node = g.producer.get(node.input[0])
        elif node.op_type in ("Add", *_SCALING):
            computed = [g.producer[i] for i in node.input if i in g.producer
                        and g.constant(i) is None]
            node = next((n for n in computed if n.op_type == "MatMul"),
                        computed[0] if computed else None)
        else:
            break
    if node is None or node.op_type not in ("MatMul", "Gemm"):
        return None
    dims = _weight_dims(g, node.input[1])
    if dims is None or len(dims) < 2:
        return None
    transposed = node.op_type == "Gemm" and any(a.name == "transB" and a.i for a in node.attribute)
    width = int(dims[0] if transposed else dims[-1])
    if cut is not None:
        start, end = cut
        return min(end, width) - start if start < min(end, width) else None
    return width // parts if width % parts == 0 else None


def _slice_range(g: GraphView, node: onnx.NodeProto) -> tuple[int, int] | None:
    """[start, end) of a Slice of the last axis of a projection (batch, sequence, width) with
    step 1 and constant bounds at or above zero (an end past the width: up to it); None for
    any other Slice."""
    bounds = [g.constant(node.input[i]) if len(node.input) > i and node.input[i] else None
              for i in (1, 2, 3, 4)]
    starts, ends, axes, steps = (None if b is None else [int(v) for v in np.asarray(b).ravel()]
                                 for b in bounds)
    if starts is None or ends is None or len(starts) != 1 or len(ends) != 1:
        return None
    # the projection's last axis: -1, or 2 of its (batch, sequence, width); not the sequence
    # (a CLS token dropped), nor axis 0, which a Slice without axes cuts
    if axes not in ([-1], [2]) or (steps is not None and steps != [1]):
        return None
    if starts[0] < 0 or ends[0] < 0:
        return None
    return starts[0], ends[0]


def _weight_dims(g: GraphView, name: str) -> list[int] | None:
    """The dimensions of the weight ``name``: an initializer, or one dequantized on the way
    (``Mul(Cast(int8 weight), scale)``, ``DequantizeLinear``) or transposed."""
    swapped = False
    for _ in range(4):
        weight = g.initializers.get(name)
        if weight is not None:
            dims = [int(d) for d in weight.dims]
            return dims[:-2] + dims[:-3:-1] if swapped and len(dims) >= 2 else dims
        node = g.producer.get(name)
        if node is None:
            return None
        if node.op_type == "Transpose":
            swapped = not swapped
        elif node.op_type not in ("Cast", "Mul", "DequantizeLinear", "Identity"):
            return None
        if node.op_type == "Mul":  # the weight, not its scale: the larger operand
            name = max(node.input, key=lambda i: _size(g, i))
        else:
            name = node.input[0]
    return None


def _size(g: GraphView, name: str) -> int:
    """Elements of the initializer ``name``; a computed tensor counts as the largest."""
    if name in g.producer:
        return 1 << 62
    weight = g.initializers.get(name)
    return int(np.prod(weight.dims)) if weight is not None else 0


def model_type(model: onnx.ModelProto) -> tuple[str, str]:
    """ONNX Runtime's optimizer model type for ``model``, and the evidence."""
    ops = Counter(n.op_type for n in model.graph.node)
    images = [i.name for i in model.graph.input if i.type.tensor_type.elem_type in (
        onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) and len(
        i.type.tensor_type.shape.dim) == 4]
    if images and ops.get("Conv"):
        return "vit", f"image input {images[0]!r} into a Conv (patch embedding)"
    if ops.get("Sin") and ops.get("Cos"):
        return "gpt2", "rotary position embedding (Sin, Cos): ORT's decoder patterns"
    if ops.get("Trilu"):
        return "gpt2", "a triangular (causal) mask: ORT's decoder patterns"
    if ops.get("Tanh") and ops.get("Pow"):
        return "gpt2", "GELU written with tanh, as GPT-2 writes it: ORT's GPT-2 patterns"
    return "bert", ("no image input, rotary embedding, triangular mask or tanh GELU: ORT's "
                    "BERT patterns (which also match encoder-decoder halves)")
