"""Transformer encoders in pure onnx + numpy, and a multi-gigabyte one written with external data.

:func:`transformer_encoder` mimics what exporters emit for a BERT-style encoder before any
optimization: an embedding ``Gather``, per-layer ``MatMul`` + ``Add`` projections, ``Reshape`` /
``Transpose`` into heads, scaled dot-product attention (``MatMul``, ``Div`` by sqrt(head size),
``Add`` of the additive mask, ``Softmax``, ``MatMul``), the transpose and reshape back,
``LayerNormalization`` and an Erf-based GELU feed-forward block with residual ``Add``s. With
``stray_transposes`` it carries two transpose pairs that compute nothing (the leftovers that
layout passes should cancel): an adjacent ``Transpose(0,2,1)`` pair after the embeddings and a
pair around the first layer's GELU.

:func:`write_large_transformer` writes a model of several gigabytes without holding its weights in
memory: each weight is generated in chunks and appended to one data file beside the ``.onnx``, and
the graph refers to it through ``external_data`` entries. It exists to test how tools cope with
models over protobuf's 2 GB limit, old IR versions and initializer inputs at that size.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from ._graph import GraphBuilder, float_input

__all__ = ["transformer_encoder", "write_large_transformer"]


def _gelu(g: GraphBuilder, x: str, opset: int) -> str:
    if opset >= 20:
        return g.op1("Gelu", [x])
    # x * 0.5 * (1 + erf(x / sqrt(2))), the form torch.onnx exports before opset 20.
    e = g.op1("Erf", [g.op1("Div", [x, g.const("sqrt2", np.array(math.sqrt(2), np.float32))])])
    e = g.op1("Add", [e, g.const("one", np.array(1.0, np.float32))])
    return g.op1("Mul", [g.op1("Mul", [x, e]), g.const("half", np.array(0.5, np.float32))])


def _layer_norm(g: GraphBuilder, x: str, hidden: int) -> str:
    gamma = g.const("ln_gamma", np.ones(hidden, np.float32))
    beta = g.const("ln_beta", np.zeros(hidden, np.float32))
    return g.op1("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-12)


def _linear(g: GraphBuilder, x: str, cin: int, cout: int) -> str:
    w = g.weight("W", [cin, cout], fan_in=cin)
    b = g.const("B", g.rng.uniform(-0.02, 0.02, cout).astype(np.float32))
    return g.op1("Add", [g.op1("MatMul", [x, w]), b])


def transformer_encoder(
    *,
    layers: int = 2,
    hidden: int = 64,
    heads: int | Sequence[int] = 4,
    ffn: int = 256,
    vocab: int = 1000,
    seq: int | None = None,
    batch: int | None = None,
    attention_mask: bool = True,
    max_positions: int = 512,
    stray_transposes: bool = True,
    seed: int = 0,
    opset: int = 17,
) -> onnx.ModelProto:
    """A BERT-style encoder: ``input_ids`` (and ``attention_mask``) int64 -> ``last_hidden_state``.
    ``heads``: one count for every layer, or one per layer (a Swin's or a SegFormer's stages
    differ).

    ``seq``/``batch`` of None leave those dimensions symbolic ("seq", "batch"). Needs opset >= 17
    (LayerNormalization); at opset >= 20 the feed-forward block uses the ``Gelu`` op.
    """
    if opset < 17:
        raise ValueError(f"opset {opset} has no LayerNormalization; use 17 or later")
    per_layer = [heads] * layers if isinstance(heads, int) else list(heads)
    if len(per_layer) != layers:
        raise ValueError(f"{len(per_layer)} head counts for {layers} layers")
    for count in per_layer:
        if hidden % count:
            raise ValueError(f"hidden {hidden} is not divisible by heads {count}")
    g = GraphBuilder(seed)
    table = g.rng.standard_normal((vocab, hidden), dtype=np.float32) * np.float32(0.02)
    x = g.op1("Gather", [g.const("word_embeddings", table), "input_ids"], axis=0)
    # Position ids: Range(0, seq) from the runtime shape, so the sequence axis stays dynamic.
    length = g.op1("Gather", [g.op1("Shape", ["input_ids"]),
                              g.const("seq_axis", np.array(1, np.int64))], axis=0)
    positions = g.op1("Range", [g.const("zero", np.array(0, np.int64)), length,
                                g.const("step", np.array(1, np.int64))])
    pos_table = g.rng.standard_normal((max_positions, hidden), dtype=np.float32) * np.float32(0.02)
    x = g.op1("Add", [x, g.op1("Gather", [g.const("position_embeddings", pos_table), positions])])
    x = _layer_norm(g, x, hidden)
    if stray_transposes:
        x = g.op1("Transpose", [g.op1("Transpose", [x], perm=[0, 2, 1])], perm=[0, 2, 1])
    mask = None
    if attention_mask:
        m = g.op1("Cast", ["attention_mask"], to=TensorProto.FLOAT)
        m = g.op1("Sub", [g.const("one", np.array(1.0, np.float32)), m])
        m = g.op1("Mul", [m, g.const("neg", np.array(-10000.0, np.float32))])
        mask = g.op1("Unsqueeze", [m, g.const("axes", np.array([1, 2], np.int64))])
    geometry: dict[int, tuple[str, str]] = {}
    if len(set(per_layer)) == 1:
        head = hidden // per_layer[0]
        to_heads = g.const("heads_shape", np.array([0, 0, per_layer[0], head], np.int64))
        from_heads = g.const("hidden_shape", np.array([0, 0, hidden], np.int64))
        geometry[per_layer[0]] = to_heads, g.const(
            "scale", np.array(math.sqrt(head), np.float32))
    else:
        from_heads = g.const("hidden_shape", np.array([0, 0, hidden], np.int64))
        for count in dict.fromkeys(per_layer):
            geometry[count] = (
                g.const(f"heads_shape_{count}",
                        np.array([0, 0, count, hidden // count], np.int64)),
                g.const(f"scale_{count}", np.array(math.sqrt(hidden // count), np.float32)))
    for layer in range(layers):
        to_heads, scale = geometry[per_layer[layer]]
        q = g.op1("Transpose", [g.op1("Reshape", [_linear(g, x, hidden, hidden), to_heads])],
                  perm=[0, 2, 1, 3])
        k = g.op1("Transpose", [g.op1("Reshape", [_linear(g, x, hidden, hidden), to_heads])],
                  perm=[0, 2, 3, 1])
        v = g.op1("Transpose", [g.op1("Reshape", [_linear(g, x, hidden, hidden), to_heads])],
                  perm=[0, 2, 1, 3])
        scores = g.op1("Div", [g.op1("MatMul", [q, k]), scale])
        if mask is not None:
            scores = g.op1("Add", [scores, mask])
        probs = g.op1("Softmax", [scores], axis=-1)
        ctx = g.op1("Transpose", [g.op1("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = g.op1("Reshape", [ctx, from_heads])
        x = _layer_norm(g, g.op1("Add", [_linear(g, ctx, hidden, hidden), x]), hidden)
        h = _linear(g, x, hidden, ffn)
        if stray_transposes and layer == 0:
            h = g.op1("Transpose", [h], perm=[0, 2, 1])
            h = g.op1("Transpose", [_gelu(g, h, opset)], perm=[0, 2, 1])
        else:
            h = _gelu(g, h, opset)
        x = _layer_norm(g, g.op1("Add", [_linear(g, h, ffn, hidden), x]), hidden)
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    b: int | str = "batch" if batch is None else batch
    s: int | str = "seq" if seq is None else seq
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [b, s])]
    if attention_mask:
        inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [b, s]))
    return g.model(
        "transformer_encoder",
        inputs,
        [float_input("last_hidden_state", [b, s, hidden])],
        opset=opset,
        ir_version=8,
    )


_CHUNK_BYTES = 16 * 2**20


class _ExternalWriter:
    """Appends seeded float32 weights to one data file, chunk by chunk, and describes them."""

    def __init__(self, data_path: Path, location: str, seed: int) -> None:
        self.file = open(data_path, "wb")  # noqa: SIM115 - closed by close()
        self.location = location
        self.rng = np.random.default_rng(seed)
        self.offset = 0
        self.tensors: list[onnx.TensorProto] = []
        self._count = 0

    def add(self, prefix: str, shape: Sequence[int], scale: float) -> str:
        name = f"{prefix}_{self._count}"
        self._count += 1
        rows, cols = (1, shape[0]) if len(shape) == 1 else (shape[0], math.prod(shape[1:]))
        rows_per_chunk = max(1, _CHUNK_BYTES // (4 * cols))
        start = self.offset
        for r in range(0, rows, rows_per_chunk):
            n = min(rows_per_chunk, rows - r)
            chunk = self.rng.standard_normal((n, cols), dtype=np.float32)
            chunk *= np.float32(scale)
            self.file.write(chunk.tobytes())
            self.offset += chunk.nbytes
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(shape))
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", str(start)),
                           ("length", str(self.offset - start))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        self.tensors.append(tensor)
        return name

    def close(self) -> None:
        self.file.close()


def write_large_transformer(
    path: str | os.PathLike[str],
    *,
    target_bytes: int = 3 * 2**30,
    layers: int = 24,
    ir_version: int = 7,
    initializers_as_inputs: bool = True,
    seed: int = 0,
) -> int:
    """Write a transformer-like float32 model of about ``target_bytes`` of weights; return them.

    Input ``x`` float [batch, seq, hidden]; per layer single-head attention (MatMul/Add
    projections, Softmax), Add + LayerNormalization, a Relu feed-forward block, and every sixth
    layer a stray ``Transpose(0,2,1)`` pair and a query weight stored transposed behind a
    ``Transpose`` (a constant a layout pass folds, reading that one weight). Weights go to
    ``<name>.data`` beside ``path`` (relative location), written as generated, so peak memory
    stays near one 16 MB chunk plus the protobuf. ``initializers_as_inputs`` also lists every initializer as a graph input,
    as IR 3 exporters did; the model keeps ``ir_version`` as given (opset 17).
    """
    path = Path(path)
    # About 12 * hidden**2 floats per layer (Q, K, V, O and a 4x feed-forward block).
    hidden = max(64, int(math.sqrt(target_bytes / 4 / 12 / layers)) // 64 * 64)
    ffn = 4 * hidden
    location = f"{path.stem}.data"
    writer = _ExternalWriter(path.parent / location, location, seed)
    g = GraphBuilder(seed)
    try:
        def linear(x: str, cin: int, cout: int, transposed: bool = False) -> str:
            if transposed:  # stored [cout, cin] behind a Transpose, as nn.Linear exports do
                w = g.op1("Transpose", [writer.add("W", [cout, cin], 1 / math.sqrt(cin))],
                          perm=[1, 0])
            else:
                w = writer.add("W", [cin, cout], 1 / math.sqrt(cin))
            b = g.const("B", np.zeros(cout, np.float32))
            return g.op1("Add", [g.op1("MatMul", [x, w]), b])

        scale = g.const("scale", np.array(math.sqrt(hidden), np.float32))
        x = "x"
        for layer in range(layers):
            if layer % 6 == 0:
                x = g.op1("Transpose", [g.op1("Transpose", [x], perm=[0, 2, 1])], perm=[0, 2, 1])
            q = linear(x, hidden, hidden, transposed=layer % 6 == 0)
            k, v = (linear(x, hidden, hidden) for _ in range(2))
            kt = g.op1("Transpose", [k], perm=[0, 2, 1])
            probs = g.op1("Softmax", [g.op1("Div", [g.op1("MatMul", [q, kt]), scale])], axis=-1)
            attn = linear(g.op1("MatMul", [probs, v]), hidden, hidden)
            x = _layer_norm(g, g.op1("Add", [attn, x]), hidden)
            h = linear(g.op1("Relu", [linear(x, hidden, ffn)]), ffn, hidden)
            x = _layer_norm(g, g.op1("Add", [h, x]), hidden)
    finally:
        writer.close()
    g.nodes.append(helper.make_node("Identity", [x], ["y"], name="output"))
    g.initializers.extend(writer.tensors)
    inputs = [float_input("x", ["batch", "seq", hidden])]
    if initializers_as_inputs:
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                   for t in g.initializers]
    model = g.model("large_transformer", inputs, [float_input("y", ["batch", "seq", hidden])],
                    opset=17, ir_version=ir_version)
    # The proto holds no weight bytes, so it serializes well under 2 GB.
    path.write_bytes(model.SerializeToString())
    return writer.offset
