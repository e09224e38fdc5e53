"""graphfix's own attention fusion: the dynamo exporter's blocks, into Attention (q, k and v
projections of one input, packed) or MultiHeadAttention."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from graphfix.passes._measuring import run_outputs
from graphfix.passes.fuse_transformer import FuseTransformer
from graphfix.passes.fuse_transformer.attention import fuse_attention, tensor_info, tensor_shapes

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def block(*, scale_on: str = "scores", biases: int = 1, merge: str = "{2, 8, 16}",
          key: str = "kt = Transpose<perm = [0, 2, 3, 1]>(kh)", extra_output: bool = False,
          rows: int = 8, fill: str | None = None, cross: bool = False,
          scaled_query: bool = False, joint: bool = False,
          flat: bool = False) -> onnx.ModelProto:
    """One attention block as torch.onnx's dynamo exporter writes it: q, k, v projected,
    split into 4 heads of 4, ``Softmax(q @ k * scale + bias) @ v``, heads merged by ``merge``.
    ``rows``: the first bias's rows (1: one for every query); ``fill``: that bias made of a
    boolean mask input as ``Where(m, 0, fill)``, and the probabilities guarded as torch's
    scaled_dot_product_attention does (``Where(IsNaN(p), 0, p)``); ``cross``: k and v
    projected from another input (cross-attention) than q; ``scaled_query``: q scaled after
    its projection, before the split (Whisper's, BART's ``q_proj(x) * scaling``); ``joint``:
    q, k and v the three parts of one projection (GPT-2's c_attn), split; ``flat``: that
    projection through two dimensions, ``Reshape(Gemm(Reshape(x, [-1, 16]), W, b), [2, 8,
    48])`` (the dynamo exporter's addmm)."""
    scaled = {"scores": "raw = MatMul(qt, kt)\n        s = Mul(raw, c)",
              "qk": "s = MatMul(qs, ks)"}[scale_on]
    bias_inputs = ", ".join(f"float[2,{1 if i == 0 else 4},{rows if i == 0 else 8},8] b{i}"
                            for i in range(biases))
    mask = ""
    if fill is not None:
        bias_inputs = f"bool[2,1,{rows},8] m"
        mask = f"""zero = Constant<value = float {{0.0}}>()
        low = Constant<value = float {{{fill}}}>()
        b0 = Where(m, zero, low)"""
    adds, last = [mask], "s"
    for i in range(biases):
        adds.append(f"a{i} = Add({last}, b{i})")
        last = f"a{i}"
    rank = merge.count(",") + 1
    out_shape = "[2,8,16]" if rank == 3 else "[16,16]"
    outputs = f"float{out_shape} y" + (", float[2,4,8,8] p" if extra_output else "")
    inputs = ", ".join(["float[2,8,16] x", *(["float[2,8,16] xk"] if cross else []),
                        *([bias_inputs] if biases else [])])
    model = onnx.parser.parse_model(HEADER + f"""
    g ({inputs}) => ({outputs}) {{
        split = Constant<value = int64[4] {{2, 8, 4, 4}}>()
        back = Constant<value = int64[{rank}] {merge}>()
        c = Constant<value = float {{0.5}}>()
        h = Constant<value = float {{0.70710677}}>()
        qm = MatMul(x, Wq)
        {"qa = Add(qm, bq)" + chr(10) + "q = Mul(qa, h)" if scaled_query else "q = Add(qm, bq)"}
        km = MatMul({"xk" if cross else "x"}, Wk)
        k = Add(km, bk)
        vm = MatMul({"xk" if cross else "x"}, Wv)
        v = Add(vm, bv)
        qh = Reshape(q, split)
        qt = Transpose<perm = [0, 2, 1, 3]>(qh)
        kh = Reshape(k, split)
        {key}
        vh = Reshape(v, split)
        vt = Transpose<perm = [0, 2, 1, 3]>(vh)
        qs = Mul(qt, h)
        ks = Mul(kt, h)
        {scaled}
        {chr(10).join(adds)}
        {"p = Softmax<axis = -1>(" + last + ")" if fill is None else
         "sm = Softmax<axis = -1>(" + last + ")" + chr(10) + "nan = IsNaN(sm)" + chr(10)
         + "p = Where(nan, zero, sm)"}
        o = MatMul(p, vt)
        ot = Transpose<perm = [0, 2, 1, 3]>(o)
        y = Reshape(ot, back)
    }}""")
    if joint:  # q, k, v = Split(x @ [Wq|Wk|Wv] + [bq|bk|bv])
        kept = [n for n in model.graph.node if n.output[0] not in ("qm", "q", "km", "k",
                                                                   "vm", "v")]
        project = """qkvm = MatMul(x, Wqkv)
            qkv = Add(qkvm, bqkv)""" if not flat else """
            rows = Constant<value = int64[2] {-1, 16}>()
            restore = Constant<value = int64[3] {2, 8, 48}>()
            xf = Reshape(x, rows)
            qkvf = Gemm(xf, Wqkv, bqkv)
            qkv = Reshape(qkvf, restore)"""
        fused = onnx.parser.parse_graph(f"""
        g (float[2,8,16] x) => (float[2,8,16] q, float[2,8,16] k, float[2,8,16] v) {{
            sizes = Constant<value = int64[3] {{16, 16, 16}}>()
            {project}
            q, k, v = Split<axis = -1>(qkv, sizes)
        }}""")
        del model.graph.node[:]
        model.graph.node.extend([*fused.node, *kept])
    rng = np.random.default_rng(0)
    for name in ("Wq", "Wk", "Wv"):
        model.graph.initializer.append(numpy_helper.from_array(
            rng.standard_normal((16, 16)).astype(np.float32), name))
    for name in ("bq", "bk", "bv"):
        model.graph.initializer.append(numpy_helper.from_array(
            rng.standard_normal(16).astype(np.float32), name))
    if joint:
        values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        del model.graph.initializer[:]
        model.graph.initializer.extend([
            numpy_helper.from_array(np.concatenate([values[w] for w in ("Wq", "Wk", "Wv")],
                                                   axis=1), "Wqkv"),
            numpy_helper.from_array(np.concatenate([values[b] for b in ("bq", "bk", "bv")]),
                                    "bqkv")])
    return model


def _feeds(model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    feed = {}
    for value in model.graph.input:
        dims = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.name == "m":  # a boolean mask: True where a key is seen
            feed["m"] = rng.random(dims) > 0.3
            feed["m"][..., 0] = True
        elif value.name.startswith("b"):  # a mask: 0 or the lowest float per key
            feed[value.name] = np.where(rng.random(dims) < 0.3, np.float32(-3.4e38),
                                        np.float32(0)).astype(np.float32)
            feed[value.name][..., 0] = 0  # every query sees at least one key
        else:
            feed[value.name] = rng.standard_normal(dims).astype(np.float32)
    return [feed]


def _fused_and_exact(model: onnx.ModelProto, feeds: list | None = None) -> onnx.ModelProto:
    fused = onnx.ModelProto()
    fused.CopyFrom(model)
    assert fuse_attention(fused, 4, *tensor_info(model)) == 1
    names = [o.name for o in model.graph.output]
    expected = run_outputs(model, feeds or _feeds(model), names)
    got = run_outputs(fused, feeds or _feeds(model), names)
    for name in names:
        np.testing.assert_allclose(got[0][name], expected[0][name], rtol=1e-5, atol=1e-5)
    return fused


def _attention(model: onnx.ModelProto) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.op_type in ("Attention", "MultiHeadAttention"))


def test_a_dynamo_self_attention_block_becomes_one_attention_with_its_projections_packed():
    model = block()
    fused = _fused_and_exact(model)
    assert [n.op_type for n in fused.graph.node] == ["Attention"]  # projections included
    node = fused.graph.node[0]
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attributes["num_heads"] == 4 and attributes["scale"] == pytest.approx(0.5)
    assert node.domain == "com.microsoft" and node.input[0] == "x" and node.input[5] == "b0"
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    packed = {t.name: numpy_helper.to_array(t) for t in fused.graph.initializer}
    np.testing.assert_array_equal(
        packed[node.input[1]], np.concatenate([weights[w] for w in ("Wq", "Wk", "Wv")], axis=1))
    np.testing.assert_array_equal(
        packed[node.input[2]], np.concatenate([weights[b] for b in ("bq", "bk", "bv")]))
    assert not {"Wq", "Wk", "Wv", "bq", "bk", "bv"} & set(packed)  # no weight kept twice


def test_a_query_scaled_after_its_projection_is_packed_with_the_factor_in_the_scale():
    fused = _fused_and_exact(block(scaled_query=True))
    assert [n.op_type for n in fused.graph.node] == ["Attention"]
    scale = next(a.f for a in fused.graph.node[0].attribute if a.name == "scale")
    assert scale == pytest.approx(0.5 * 0.70710677)


@pytest.mark.parametrize("flat", [False, True])
def test_q_k_and_v_split_from_one_projection_are_packed_as_they_are(flat):
    model = block(joint=True, flat=flat)  # GPT-2's c_attn (flat: as the dynamo export has it)
    fused = _fused_and_exact(model)
    assert [n.op_type for n in fused.graph.node] == ["Attention"]
    weight = next(t for t in fused.graph.initializer if list(t.dims) == [16, 48])
    np.testing.assert_array_equal(
        numpy_helper.to_array(weight),
        numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == "Wqkv")))
    assert len(fused.graph.initializer) == 2  # the joint weight and bias, once


@pytest.mark.parametrize("joint", [False, True])
def test_shape_readers_of_k_read_the_input_instead(joint):
    # GPT-2's legacy export reads k's sizes with Shape; k has the input's shape, so those
    # Shape nodes read the input and the projections still go
    model = block(joint=joint)
    model.graph.node.append(onnx.helper.make_node("Shape", ["k"], ["k_sizes"]))
    model.graph.output.append(onnx.helper.make_tensor_value_info(
        "k_sizes", onnx.TensorProto.INT64, [3]))
    fused = _fused_and_exact(model)
    assert sorted(n.op_type for n in fused.graph.node) == ["Attention", "Shape"]
    assert next(n for n in fused.graph.node if n.op_type == "Shape").input[0] == "x"


def test_a_dynamo_cross_attention_block_becomes_one_multi_head_attention():
    fused = _fused_and_exact(block(cross=True))
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("MultiHeadAttention") == 1
    for gone in ("Softmax", "Transpose", "Reshape"):
        assert gone not in ops
    node = next(n for n in fused.graph.node if n.op_type == "MultiHeadAttention")
    attributes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attributes["num_heads"] == 4 and attributes["scale"] == pytest.approx(0.5)
    assert list(node.input) == ["q", "k", "v", "", "", "b0"]
    assert node.domain == "com.microsoft"


ATTENTION_OPS = [(False, "Attention"), (True, "MultiHeadAttention")]


@pytest.mark.parametrize("cross,op", ATTENTION_OPS)
def test_scale_on_q_and_k_the_other_key_transpose_and_no_bias(cross, op):
    node = _attention(_fused_and_exact(
        block(scale_on="qk", biases=0, cross=cross,
              key="kq = Transpose<perm = [0, 2, 1, 3]>(kh)\n"
              "kt = Transpose<perm = [0, 1, 3, 2]>(kq)")))
    scale = next(a.f for a in node.attribute if a.name == "scale")
    assert node.op_type == op and scale == pytest.approx(0.5)
    assert list(node.input) == (["q", "k", "v"] if cross else
                                ["x", "graphfix_attention_0_qkv_weight",
                                 "graphfix_attention_0_qkv_bias"])


@pytest.mark.parametrize("cross,op", ATTENTION_OPS)
def test_two_biases_are_summed_into_one_attention_bias(cross, op):
    fused = _fused_and_exact(block(biases=2, cross=cross))  # T5: position bias, then the mask
    node = _attention(fused)
    adder = next(n for n in fused.graph.node if n.output[0] == node.input[5])
    assert node.op_type == op and adder.op_type == "Add" and set(adder.input) == {"b0", "b1"}


@pytest.mark.parametrize("cross,op", ATTENTION_OPS)
def test_heads_merged_into_another_shape_keep_their_reshape(cross, op):
    # GPT-2: straight to two dimensions
    fused = _fused_and_exact(block(merge="{16, 16}", cross=cross))
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("Reshape") == 1 and ops.index(op) < ops.index("Reshape")


def _half(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` with its float tensors (weights, Constants, inputs, outputs) float16."""
    half = onnx.ModelProto()
    half.CopyFrom(model)
    for tensor in half.graph.initializer:
        tensor.CopyFrom(numpy_helper.from_array(
            numpy_helper.to_array(tensor).astype(np.float16), tensor.name))
    for node in half.graph.node:
        for attr in node.attribute:
            if attr.name == "value" and attr.t.data_type == onnx.TensorProto.FLOAT:
                attr.t.CopyFrom(numpy_helper.from_array(
                    numpy_helper.to_array(attr.t).astype(np.float16), attr.t.name))
    for value in [*half.graph.input, *half.graph.output]:
        if value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    return half


@pytest.mark.parametrize("on_cuda,op", [(False, "MultiHeadAttention"), (True, "Attention")])
def test_float16_projections_are_packed_only_for_cuda(on_cuda, op):
    # ONNX Runtime's CPU provider has no float16 Attention kernel (it runs one in float32
    # between casts it inserts): packed only where the model runs on CUDA
    model = _half(block())
    fused = onnx.ModelProto()
    fused.CopyFrom(model)
    assert fuse_attention(fused, 4, *tensor_info(model), float16_packed=on_cuda) == 1
    assert _attention(fused).op_type == op
    weights = [t for t in fused.graph.initializer if list(t.dims) == [16, 48]]
    assert len(weights) == (1 if on_cuda else 0)
    assert all(w.data_type == onnx.TensorProto.FLOAT16 for w in weights)


def test_a_projection_read_elsewhere_is_not_packed():
    model = block()
    model.graph.output.append(onnx.helper.make_tensor_value_info(
        "k", onnx.TensorProto.FLOAT, [2, 8, 16]))  # the key projection, an output too
    fused = _fused_and_exact(model)
    assert _attention(fused).op_type == "MultiHeadAttention"


def test_a_block_whose_probabilities_are_read_elsewhere_is_left_alone():
    model = block(extra_output=True)
    assert fuse_attention(model, 4, tensor_shapes(model)) == 0
    assert any(n.op_type == "Softmax" for n in model.graph.node)


@pytest.mark.parametrize("cross,op", ATTENTION_OPS)
def test_fuse_transformer_fuses_what_ort_does_not_match_and_checks_it(cross, op):
    model = block(cross=cross)
    result = FuseTransformer(feeds=_feeds(model))(model)
    assert result.details["fused"].get(op) == 1
    assert result.stats["attention_fused"] == 1 and result.stats["num_heads"] == 4


@pytest.mark.parametrize("cross,op", ATTENTION_OPS)
def test_a_bias_of_one_row_for_every_query_is_expanded_to_the_querys_length(cross, op):
    # an encoder's mask broadcast as (batch, 1, 1, L): (Multi-Head)Attention takes one row per
    # query, and refuses it otherwise
    fused = _fused_and_exact(block(rows=1, cross=cross))
    node = _attention(fused)
    assert node.op_type == op
    expand = next(n for n in fused.graph.node if n.output[0] == node.input[5])
    assert expand.op_type == "Expand" and expand.input[0] == "b0"


def test_the_nan_guard_of_decomposed_sdpa_over_a_finite_mask_is_dropped():
    # Where(IsNaN(p), 0, p): with the lowest float as the fill no row is NaN, and the guard
    # computes p itself
    finite = block(fill="-3.4028234663852886e38")
    fused = _fused_and_exact(finite)
    assert not any(n.op_type in ("IsNaN", "Softmax", "IsInf") for n in fused.graph.node)


def _fully_masked(model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    """_feeds, with every key masked for a whole batch item and for one query of the other."""
    feeds = _feeds(model)
    feeds[0]["m"][0] = False
    if feeds[0]["m"].shape[2] > 1:
        feeds[0]["m"][1, :, 3] = False
    return feeds


@pytest.mark.parametrize("rows", [8, 1])
@pytest.mark.parametrize("cross", [False, True])
def test_the_nan_guard_over_a_mask_of_minus_inf_zeroes_the_rows_it_masks_whole(rows, cross):
    # torch's sdpa over a boolean mask: Where(m, 0, -inf), and a row whose every key is
    # masked gives zeros (the guard) where MultiHeadAttention's softmax gives NaN; the fused
    # block sets those rows to zero itself, for whole batch items and single queries alike
    model = block(fill="-inf", rows=rows, cross=cross)
    feeds = _fully_masked(model)
    expected = run_outputs(model, feeds, ["y"])[0]["y"]
    assert not np.isnan(expected).any() and (expected[0] == 0).all()
    fused = _fused_and_exact(model, feeds)
    assert not any(n.op_type in ("IsNaN", "Softmax") for n in fused.graph.node)
    assert [n.op_type for n in fused.graph.node].count("IsInf") == 1


def test_the_nan_guard_stays_over_a_mask_that_may_be_nan():
    # +inf - inf is NaN in the softmax, and -inf + inf in a sum of biases
    for fill in ("inf", "nan"):
        model = block(fill=fill)
        assert fuse_attention(model, 4, tensor_shapes(model)) == 0


def test_the_nan_guard_over_a_mask_per_head_zeroes_each_heads_masked_rows():
    # a query masked whole for one head only: that head's part of the merged row is zero
    model = block(fill="-inf")
    mask = next(v for v in model.graph.input if v.name == "m")
    mask.type.tensor_type.shape.dim[1].dim_value = 4
    feeds = _feeds(model)
    feeds[0]["m"][1, 2, 5] = False
    expected = run_outputs(model, feeds, ["y"])[0]["y"]
    assert (expected[1, 5, 8:12] == 0).all() and (expected[1, 5, :8] != 0).all()
    _fused_and_exact(model, feeds)


def test_heads_are_read_past_a_dequantized_weight():
    # weight-only int8: the projection is MatMul(x, Mul(Cast(int8 weight), scale))
    from graphfix.passes.fuse_transformer.heads import Heads, read_heads

    model = block(merge="{2, 8, 16}")
    target = next(n for n in model.graph.node if n.op_type == "Constant"
                  and n.output[0] == "split")
    target.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array([2, 8, -1, 4], np.int64)))
    weights = {t.name: t for t in model.graph.initializer}
    quantized = numpy_helper.to_array(weights["Wq"]).round().clip(-127, 127).astype(np.int8)
    model.graph.initializer.remove(weights["Wq"])
    model.graph.initializer.extend([numpy_helper.from_array(quantized, "Wq_int8"),
                                    numpy_helper.from_array(np.ones((1, 16), np.float32),
                                                            "Wq_scale")])
    model.graph.node.insert(0, onnx.helper.make_node("Mul", ["Wq_float", "Wq_scale"], ["Wq"]))
    model.graph.node.insert(0, onnx.helper.make_node("Cast", ["Wq_int8"], ["Wq_float"], to=1))
    assert read_heads(model) == Heads(4, 4, 1)


def test_a_softmax_over_another_axis_is_not_attention():
    # before opset 13, Softmax without an axis works on axis 1, not on the keys
    model = block()
    softmax = next(n for n in model.graph.node if n.op_type == "Softmax")
    del softmax.attribute[:]
    model.opset_import[0].version = 12
    assert fuse_attention(model, 4, tensor_shapes(model)) == 0
    softmax.attribute.append(onnx.helper.make_attribute("axis", 2))
    model.opset_import[0].version = 17
    assert fuse_attention(model, 4, tensor_shapes(model)) == 0


def llama_block(*, kv_heads: int = 2, present: bool = False) -> onnx.ModelProto:
    """One Llama-style decoder block as torch.onnx writes it: q, k, v projected without bias,
    split into heads (4 query heads of 4, ``kv_heads`` key/value heads), rotary embeddings on
    q and k (rotate-half with cos/sin tables), the key/value heads repeated to 4 (grouped-query
    attention), ``Cast(Softmax(q @ k^T * scale + mask)) @ v`` with the exporter's upcast to the
    type it already has, heads merged. ``present``: the rotated key is a graph output too."""
    kv = 4 * kv_heads
    rep = 4 // kv_heads
    outputs = "float[2,8,16] y" + (f", float[2,{kv_heads},8,4] kr" if present else "")
    model = onnx.parser.parse_model(HEADER + f"""
    g (float[2,8,16] x, float[2,1,8,8] b0) => ({outputs}) {{
        qsplit = Constant<value = int64[4] {{2, 8, 4, 4}}>()
        kvsplit = Constant<value = int64[4] {{2, 8, {kv_heads}, 4}}>()
        grouped = Constant<value = int64[5] {{2, {kv_heads}, {rep}, 8, 4}}>()
        repeated = Constant<value = int64[4] {{2, 4, 8, 4}}>()
        back = Constant<value = int64[3] {{2, 8, 16}}>()
        c = Constant<value = float {{0.5}}>()
        axis2 = Constant<value = int64[1] {{2}}>()
        q = MatMul(x, Wq)
        k = MatMul(x, Wk)
        v = MatMul(x, Wv)
        qh = Reshape(q, qsplit)
        qt = Transpose<perm = [0, 2, 1, 3]>(qh)
        kh = Reshape(k, kvsplit)
        kt = Transpose<perm = [0, 2, 1, 3]>(kh)
        vh = Reshape(v, kvsplit)
        vt = Transpose<perm = [0, 2, 1, 3]>(vh)
        q1, q2 = Split<axis = -1>(qt)
        qn = Neg(q2)
        qrot = Concat<axis = -1>(qn, q1)
        qc = Mul(qt, cos)
        qs = Mul(qrot, sin)
        qr = Add(qc, qs)
        k1, k2 = Split<axis = -1>(kt)
        kn = Neg(k2)
        krot = Concat<axis = -1>(kn, k1)
        kc = Mul(kt, cos)
        ks = Mul(krot, sin)
        kr = Add(kc, ks)
        ku = Unsqueeze(kr, axis2)
        ke = Expand(ku, grouped)
        kx = Reshape(ke, repeated)
        vu = Unsqueeze(vt, axis2)
        ve = Expand(vu, grouped)
        vx = Reshape(ve, repeated)
        kT = Transpose<perm = [0, 1, 3, 2]>(kx)
        raw = MatMul(qr, kT)
        s = Mul(raw, c)
        a = Add(s, b0)
        sm = Softmax<axis = -1>(a)
        p = Cast<to = 1>(sm)
        o = MatMul(p, vx)
        ot = Transpose<perm = [0, 2, 1, 3]>(o)
        y = Reshape(ot, back)
    }}""")
    rng = np.random.default_rng(0)
    for name, cols in (("Wq", 16), ("Wk", kv), ("Wv", kv)):
        model.graph.initializer.append(numpy_helper.from_array(
            rng.standard_normal((16, cols)).astype(np.float32), name))
    angles = np.arange(8)[:, None] * np.array([1.0, 0.1, 1.0, 0.1])[None]
    for name, table in (("cos", np.cos(angles)), ("sin", np.sin(angles))):
        model.graph.initializer.append(numpy_helper.from_array(table.astype(np.float32), name))
    return model


def _causal_feeds() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    mask = np.where(np.tril(np.ones((8, 8))) > 0, 0, np.finfo(np.float32).min)
    mask = np.broadcast_to(mask, (2, 1, 8, 8)).astype(np.float32).copy()
    mask[1, 0, 5:, 2] = np.finfo(np.float32).min  # a hole: padding seen by no query
    return [{"x": rng.standard_normal((2, 8, 16)).astype(np.float32), "b0": mask}]


@pytest.mark.parametrize("kv_heads", [2, 4])
def test_a_llama_block_with_rotary_and_grouped_query_heads_is_fused(kv_heads):
    fused = _fused_and_exact(llama_block(kv_heads=kv_heads), _causal_feeds())
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("MultiHeadAttention") == 1
    for gone in ("Softmax", "Cast"):
        assert gone not in ops
    # q, k, v split, k and v repeated, the rotated query merged; the block's merge is gone
    assert ops.count("Reshape") == 6
    node = next(n for n in fused.graph.node if n.op_type == "MultiHeadAttention")
    assert list(node.output) == ["y"]
    producer = {o: n for n in fused.graph.node for o in n.output}
    assert producer[node.input[0]].op_type == "Reshape"  # the rotated query, merged
    assert node.input[1] == "kx" and node.input[2] == "vx"  # split into heads, repeated


def test_a_multi_query_block_whose_one_key_head_the_products_broadcast_is_fused():
    """Falcon's multi-query attention: one key and value head, not repeated but broadcast by
    the two MatMuls over the query's four; MultiHeadAttention takes them expanded."""
    model = llama_block(kv_heads=1)
    graph = model.graph
    for node in graph.node:  # the products read the one head as it is
        node.input[:] = ["kr" if name == "kx" else "vt" if name == "vx" else name
                         for name in node.input]
    live = [n for n in graph.node if not {"ku", "ke", "kx", "vu", "ve", "vx"} & set(n.output)]
    del graph.node[:]
    graph.node.extend(live)
    fused = _fused_and_exact(model, _causal_feeds())
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("MultiHeadAttention") == 1 and ops.count("Expand") == 2
    assert "Softmax" not in ops


def test_a_rotated_key_read_elsewhere_stays_computed():
    model = llama_block(present=True)
    fused = _fused_and_exact(model, _causal_feeds())
    assert any(n.op_type == "MultiHeadAttention" for n in fused.graph.node)
    onnx.checker.check_model(fused)


def test_a_query_of_other_heads_than_given_is_not_fused():
    model = llama_block()
    assert fuse_attention(model, 2, tensor_shapes(model)) == 0


def _two_blocks_sharing_weights() -> onnx.ModelProto:
    """Two self-attention blocks in a row reading one set of weights, as an ALBERT's layers
    do: the second reads the first's output ``y`` and gives ``b2_y``."""
    model = block()
    second = onnx.compose.add_prefix(block(), "b2_")
    shared = {f"b2_{w}": w for w in ("Wq", "Wk", "Wv", "bq", "bk", "bv")}
    shared["b2_x"] = "y"
    for node in second.graph.node:
        for position, name in enumerate(node.input):
            node.input[position] = shared.get(name, name)
    model.graph.node.extend(second.graph.node)
    model.graph.input.extend(i for i in second.graph.input if i.name != "b2_x")
    model.graph.output.extend(second.graph.output)
    return model


def test_blocks_sharing_their_weights_share_one_packed_weight():
    model = _two_blocks_sharing_weights()
    fused = onnx.ModelProto()
    fused.CopyFrom(model)
    assert fuse_attention(fused, 4, *tensor_info(model)) == 2
    nodes = [n for n in fused.graph.node if n.op_type == "Attention"]
    assert len(nodes) == 2 and nodes[0].input[1:3] == nodes[1].input[1:3]
    assert [list(t.dims) for t in fused.graph.initializer] == [[16, 48], [48]]
    names = [o.name for o in model.graph.output]
    expected = run_outputs(model, _feeds(model), names)
    got = run_outputs(fused, _feeds(model), names)
    np.testing.assert_allclose(got[0]["b2_y"], expected[0]["b2_y"], rtol=1e-5, atol=1e-5)


def test_a_weight_read_elsewhere_is_not_packed_into_a_second_copy():
    # packing Wq while another node reads it would keep its bytes twice
    model = block()
    model.graph.node.append(onnx.helper.make_node("MatMul", ["x", "Wq"], ["side"]))
    model.graph.output.append(onnx.helper.make_tensor_value_info(
        "side", onnx.TensorProto.FLOAT, [2, 8, 16]))
    fused = _fused_and_exact(model)
    assert _attention(fused).op_type == "MultiHeadAttention"
    assert not any(list(t.dims) == [16, 48] for t in fused.graph.initializer)


def test_a_weight_aliased_by_identity_is_packed_and_dropped():
    model = block()
    for node in model.graph.node:
        if node.op_type == "MatMul" and "Wk" in node.input:
            node.input[1] = "Wk_alias"
    model.graph.node.insert(0, onnx.helper.make_node("Identity", ["Wk"], ["Wk_alias"]))
    fused = _fused_and_exact(model)
    assert [n.op_type for n in fused.graph.node] == ["Attention"]
    assert "Wk" not in {t.name for t in fused.graph.initializer}


def test_packing_can_be_turned_off():
    model = block()
    result = FuseTransformer(feeds=_feeds(model), packed_attention=False)(model)
    assert result.details["fused"].get("MultiHeadAttention") == 1
    assert "Attention" not in result.details["fused"]


def torch_mha_block(*, batch_first: bool = True, bias: bool = False,
                    computed_scale: bool = False, key_direct: bool = False) -> onnx.ModelProto:
    """nn.MultiheadAttention as torch's exporters write it (2 x 5 tokens of 16, 4 heads of 4):
    the packed input projection of the sequence-first input, split into q, k and v by
    ``Gather`` of ``Squeeze(Transpose<3,1,2,0,4>(Unsqueeze(Reshape(P, [S, B, 3, E]))))``,
    the heads split through batch x heads (``Reshape(Transpose<1,0,2>(Reshape(q, [S, B*N,
    H])), [B, N, S, H])``), q and k each scaled by the root of the scale, the heads merged
    sequence first (``Transpose<2,0,1,3>``) into the output projection. ``batch_first``: the
    input is (B, S, E) and transposed first (torchvision's ViT), else it is (S, B, E) and so is
    the output; ``bias``: an additive mask (B, 1, 1, S) on the scores; ``computed_scale``:
    that root computed from q's shape, ``Sqrt(1 / Sqrt(Cast(Slice(Shape(q)))))``, as the
    legacy exporter writes it; ``key_direct``: k transposed for the scores straight from
    (batch x heads, S, head_size), ``Reshape(Transpose<0,2,1>(kt), [B, N, H, S])``, as the
    dynamo exporter writes it."""
    x_in = "float[2,5,16] x" if batch_first else "float[5,2,16] x"
    y_out = "float[2,5,16] y" if batch_first else "float[5,2,16] y"
    first = "xt = Transpose<perm = [1, 0, 2]>(x)" if batch_first else "xt = Identity(x)"
    last = "y = Transpose<perm = [1, 0, 2]>(ys)" if batch_first else "y = Identity(ys)"
    heads = []
    for part, index in (("q", 0), ("k", 1), ("v", 2)):
        heads.append(f"""i{part} = Constant<value = int64 {{{index}}}>()
        {part} = Gather<axis = 0>(packed, i{part})
        {part}2 = Reshape({part}, flat)
        {part}t = Transpose<perm = [1, 0, 2]>({part}2)
        {part}4 = Reshape({part}t, split)""")
    scores = "raw = MatMul(qs, ks)\n        sc = Add(raw, b)" if bias else "sc = MatMul(qs, ks)"
    root = """one = Constant<value = float {1.0}>()
        last = Constant<value = int64[1] {-1}>()
        end = Constant<value = int64[1] {9223372036854775807}>()
        shape = Shape(q4)
        size = Slice(shape, last, end)
        sizef = Cast<to = 1>(size)
        rooted = Sqrt(sizef)
        inverse = Div(one, rooted)
        root = Sqrt(inverse)""" if computed_scale else \
        "root = Constant<value = float {0.70710677}>()"
    model = onnx.parser.parse_model(HEADER + f"""
    g ({x_in}{", float[2,1,1,5] b" if bias else ""}) => ({y_out}) {{
        {first}
        pm = MatMul(xt, Win)
        p = Add(pm, bin)
        unflat = Constant<value = int64[4] {{5, 2, 3, 16}}>()
        axis0 = Constant<value = int64[1] {{0}}>()
        axis3 = Constant<value = int64[1] {{3}}>()
        flat = Constant<value = int64[3] {{5, 8, 4}}>()
        split = Constant<value = int64[4] {{2, 4, 5, 4}}>()
        rows = Constant<value = int64[2] {{10, 16}}>()
        back = Constant<value = int64[3] {{5, 2, 16}}>()
        {root}
        r = Reshape(p, unflat)
        u = Unsqueeze(r, axis0)
        t = Transpose<perm = [3, 1, 2, 0, 4]>(u)
        packed = Squeeze(t, axis3)
        {chr(10).join(heads)}
        qs = Mul(q4, root)
        {"kdirect = Transpose<perm = [0, 2, 1]>(kt)" + chr(10) + "kswap = Reshape(kdirect, splitk)"
         if key_direct else "kswap = Transpose<perm = [0, 1, 3, 2]>(k4)"}
        splitk = Constant<value = int64[4] {{2, 4, 4, 5}}>()
        ks = Mul(kswap, root)
        {scores}
        pr = Softmax<axis = -1>(sc)
        o = MatMul(pr, v4)
        ot = Transpose<perm = [2, 0, 1, 3]>(o)
        o2 = Reshape(ot, rows)
        out = Gemm<transB = 1>(o2, Wout, bout)
        ys = Reshape(out, back)
        {last}
    }}""")
    rng = np.random.default_rng(0)
    for name, shape in (("Win", (16, 48)), ("bin", (48,)), ("Wout", (16, 16)), ("bout", (16,))):
        model.graph.initializer.append(numpy_helper.from_array(
            rng.standard_normal(shape).astype(np.float32), name))
    return model


@pytest.mark.parametrize("bias,computed_scale,key_direct", [
    (False, False, False), (True, False, False), (False, True, False), (False, False, True)])
@pytest.mark.parametrize("batch_first,op", [(True, "Attention"), (False, "MultiHeadAttention")])
def test_torch_multihead_attention_with_its_heads_split_through_the_batch_is_fused(
        batch_first, op, bias, computed_scale, key_direct):
    # a batch-first input: its projection is packed and Attention reads the input itself;
    # sequence first: MultiHeadAttention reads q, k and v transposed batch first. Either way
    # the fused output goes to the output projection sequence first, as the heads did.
    model = torch_mha_block(batch_first=batch_first, bias=bias, computed_scale=computed_scale,
                            key_direct=key_direct)
    fused = _fused_and_exact(model)
    assert _attention(fused).op_type == op
    assert not any(n.op_type == "Softmax" for n in fused.graph.node)
    if batch_first:  # packed: the projection's split is gone
        assert _attention(fused).input[0] == "x"
        assert not any(n.op_type in ("Squeeze", "Unsqueeze") for n in fused.graph.node)
