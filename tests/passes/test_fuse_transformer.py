"""fuse-transformer: ONNX Runtime's transformer fusions with the heads read from the graph."""

from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import graphfix
from graphfix.passes._measuring import run_outputs
from graphfix.passes.fuse_transformer import FuseTransformer
from graphfix.passes.fuse_transformer.heads import Heads, model_type, read_heads
from graphfix.models.transformer import transformer_encoder

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def attention(target: str, *, perm: str = "[0, 2, 1, 3]", width: int = 16) -> onnx.ModelProto:
    """One attention block whose q, k, v are split into heads by ``Reshape(.., target)``."""
    model = onnx.parser.parse_model(HEADER + f"""
    g (float[1,8,16] x) => (float[1,8,16] y) {{
        shape = Constant<value = int64[4] {target}>()
        back = Constant<value = int64[3] {{1, 8, 16}}>()
        q = MatMul(x, Wq)
        qb = Add(q, bq)
        qh = Reshape(qb, shape)
        qt = Transpose<perm = {perm}>(qh)
        k = MatMul(x, Wk)
        kh = Reshape(k, shape)
        kt = Transpose<perm = [0, 2, 3, 1]>(kh)
        v = MatMul(x, Wv)
        vh = Reshape(v, shape)
        vt = Transpose<perm = [0, 2, 1, 3]>(vh)
        s = MatMul(qt, kt)
        sc = Div(s, scale)
        p = Softmax<axis = -1>(sc)
        c = MatMul(p, vt)
        ct = Transpose<perm = [0, 2, 1, 3]>(c)
        y = Reshape(ct, back)
    }}""")
    rng = np.random.default_rng(0)
    for name in ("Wq", "Wk", "Wv"):
        model.graph.initializer.append(numpy_helper.from_array(
            rng.standard_normal((16, width)).astype(np.float32), name))
    model.graph.initializer.append(numpy_helper.from_array(np.zeros(width, np.float32), "bq"))
    model.graph.initializer.append(numpy_helper.from_array(np.array(2.0, np.float32), "scale"))
    return model


def test_heads_come_from_the_reshape_that_splits_q():
    assert read_heads(attention("{0, 0, 4, 4}")) == Heads(4, 4, 1)


def test_minus_one_heads_are_solved_with_the_projection_width():
    assert read_heads(attention("{1, 8, -1, 4}")) == Heads(4, 4, 1)


def test_minus_one_heads_are_solved_through_a_slice_of_one_qkv_projection():
    # Phi-3 (dynamo exporter): q = qkv[..., :hidden] of one projection [q | k | v], then
    # Reshape(q, [batch, seq, -1, size])
    model = onnx.parser.parse_model(HEADER + """
    g (float[1,8,16] x) => (float[1,4,8,8] y) {
        shape = Constant<value = int64[4] {1, 8, -1, 4}>()
        zero = Constant<value = int64[1] {0}>()
        width = Constant<value = int64[1] {16}>()
        axis = Constant<value = int64[1] {2}>()
        qkv = MatMul(x, W)
        q = Slice(qkv, zero, width, axis)
        qh = Reshape(q, shape)
        qt = Transpose<perm = [0, 2, 1, 3]>(qh)
        kt = Transpose<perm = [0, 2, 3, 1]>(qh)
        s = MatMul(qt, kt)
        y = Softmax<axis = -1>(s)
        z = MatMul(y, qt)
    }""")
    model.graph.initializer.append(numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((16, 48)).astype(np.float32), "W"))
    assert read_heads(model) == Heads(4, 4, 1)
    # a Slice of the sequence (a CLS token dropped) says nothing of the width
    for node in model.graph.node:
        if node.output[0] == "axis":
            node.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array([1], np.int64)))
    assert isinstance(read_heads(model), str)


def test_a_target_the_projection_contradicts_is_not_read():
    found = read_heads(attention("{1, 8, 4, 4}", width=32))
    assert isinstance(found, str) and "projection" in found


def test_heads_before_sequence_without_a_transpose():
    # torchvision's MultiheadAttention views q as [batch, heads, seq, size] directly.
    found = read_heads(attention("{1, 4, 8, 4}", perm="[0, 1, 2, 3]"))
    assert found == Heads(4, 4, 1)


def test_no_attention_block_is_said():
    model = onnx.parser.parse_model(HEADER + """
    g (float[2,4] x) => (float[2,4] y) { y = Softmax<axis = -1>(x) }""")
    assert "no attention block" in read_heads(model)


def gpt_neox_heads(*, separate: bool = False) -> onnx.ModelProto:
    """GPT-NeoX's attention heads: one projection of q, k and v, split into 4 heads of
    [q | k | v] each ([1, 8, 4, 12]), q, k and v cut from each head's last axis, q's first
    half rotated (a partial rotary embedding: cut and joined back along the last axis).
    ``separate``: q, k and v each the whole projection, 4 heads of 12, and only q's rotary
    halves cut."""
    width, heads = 48, "{1, 8, 4, 12}"
    cuts = """q = Identity(qkvt)
        k = Identity(qkvt)
        v = Identity(qkvt)""" if separate else """q = Slice(qkvt, zero, four, last)
        k = Slice(qkvt, four, eight, last)
        v = Slice(qkvt, eight, twelve, last)"""
    model = onnx.parser.parse_model(HEADER + f"""
    g (float[1,8,16] x) => (float[1,4,8,4] y) {{
        shape = Constant<value = int64[4] {heads}>()
        zero = Constant<value = int64[1] {{0}}>()
        two = Constant<value = int64[1] {{2}}>()
        four = Constant<value = int64[1] {{4}}>()
        eight = Constant<value = int64[1] {{8}}>()
        twelve = Constant<value = int64[1] {{12}}>()
        last = Constant<value = int64[1] {{-1}}>()
        qkv = MatMul(x, W)
        qkvh = Reshape(qkv, shape)
        qkvt = Transpose<perm = [0, 2, 1, 3]>(qkvh)
        {cuts}
        rot = Slice(q, zero, two, last)
        rest = Slice(q, two, four, last)
        turned = Neg(rot)
        qr = Concat<axis = -1>(turned, rest)
        kt = Transpose<perm = [0, 1, 3, 2]>(k)
        s = MatMul(qr, kt)
        p = Softmax<axis = -1>(s)
        y = MatMul(p, v)
    }}""")
    model.graph.initializer.append(numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((16, width)).astype(np.float32), "W"))
    return model


def test_heads_are_read_past_a_partial_rotary_embedding_and_a_qkv_split_per_head():
    # GPT-NeoX: the search went no further than the rotary's Concat, and the split's last
    # axis holds q, k and v side by side: 4 heads of 4, not of 12
    assert read_heads(gpt_neox_heads()) == Heads(4, 4, 1)
    # heads cut only by q's rotary: their size is the target's, 12, divisible by 3 or not
    assert read_heads(gpt_neox_heads(separate=True)) == Heads(4, 12, 1)


def test_model_type_from_the_op_pattern():
    assert model_type(transformer_encoder())[0] == "bert"
    image = onnx.parser.parse_model(HEADER + """
    g (float[1,3,8,8] pixels) => (float[1,4,4,4] y) { y = Conv<strides = [2, 2]>(pixels, W) }""")
    assert model_type(image)[0] == "vit"


def test_encoder_fusions_are_checked_and_labelled(tmp_path):
    model = transformer_encoder(stray_transposes=False)
    result = FuseTransformer()(model)
    assert result.modified
    assert result.details["fused"]["SkipLayerNormalization"] == 4
    assert "4 heads of 16" in " ".join(result.details["notes"])
    labels = {p.key: p.value for p in result.model.metadata_props}
    assert labels["graphfix.ort_provider"] == "CPUExecutionProvider"
    assert labels["graphfix.ort_fusion"].startswith("transformer (bert")
    assert any("tied to ONNX Runtime" in w for w in result.warnings)
    assert graphfix.check_parity(transformer_encoder(stray_transposes=False),
                                 result.model).passed
    assert not FuseTransformer()(result.model).modified  # rule 5


def test_an_input_nothing_reads_stays_in_the_signature():
    """ORT's optimizer prunes graph inputs nothing reads (a dynamo decoder with cache keeps
    ``encoder_hidden_states`` unread); callers still feed them, so they stay, in order."""
    model = transformer_encoder(stray_transposes=False)
    unused = onnx.helper.make_tensor_value_info("encoder_hidden_states",
                                                onnx.TensorProto.FLOAT, ["batch", 5, 16])
    model.graph.input.insert(0, unused)
    names = [i.name for i in model.graph.input]
    result = FuseTransformer()(model)
    assert result.modified and result.details["fused"]["SkipLayerNormalization"] == 4
    assert [i.name for i in result.model.graph.input] == names
    reference = transformer_encoder(stray_transposes=False)
    reference.graph.input.insert(0, unused)
    assert graphfix.check_parity(reference, result.model).passed


def test_option_checks():
    with pytest.raises(graphfix.errors.PassError, match="model_type"):
        FuseTransformer(model_type="resnet")
    with pytest.raises(graphfix.errors.PassError, match="num_heads"):
        FuseTransformer(num_heads=0)


def _export_encoder(encoder, path, *, dynamo: bool = False) -> onnx.ModelProto:  # noqa: ANN001
    """A transformers text encoder taking ids and a mask, exported as torch.onnx writes it
    (the legacy exporter at opset 17, or the dynamo one), its last hidden state as ``y``."""
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids, attention_mask):  # noqa: ANN001, ANN201
            return self.encoder(input_ids=input_ids,
                                attention_mask=attention_mask).last_hidden_state

    ids = torch.randint(0, 100, (2, 8))
    with torch.no_grad():
        torch.onnx.export(Wrapped(), (ids, torch.ones(2, 8, dtype=torch.int64)), str(path),
                          input_names=["input_ids", "attention_mask"], output_names=["y"],
                          dynamic_axes={"input_ids": {0: "b", 1: "s"},
                                        "attention_mask": {0: "b", 1: "s"}},
                          opset_version=None if dynamo else 17, dynamo=dynamo)
    return onnx.load(path)  # the dynamo exporter's weights too (external data beside it)


def _eager_bert(path, *, dynamo: bool = False) -> onnx.ModelProto:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    # Weights large enough that attention is peaked: near-uniform attention (the default
    # initialisation) computes almost the same whatever the heads, and would hide a wrong count.
    config = BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=4, intermediate_size=64,
                        attn_implementation="eager", initializer_range=0.5)
    return _export_encoder(BertModel(config).eval(), path, dynamo=dynamo)


def _padding_feeds() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    mask = np.ones((2, 8), np.int64)
    mask[1, -3:] = 0  # padding at the end, as tokenizers make it
    return [{"input_ids": rng.integers(0, 100, (2, 8)), "attention_mask": mask}]


@pytest.mark.tools
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
def test_bert_attention_fused_with_the_heads_read(tmp_path):
    model = _eager_bert(tmp_path / "bert.onnx")
    assert read_heads(model) == Heads(4, 8, 1)
    result = FuseTransformer(feeds=_padding_feeds())(model)
    assert result.stats["attention_fused"] == 1 and result.stats["num_heads"] == 4
    heads = [a.i for n in result.model.graph.node if n.op_type == "Attention"
             for a in n.attribute if a.name == "num_heads"]
    assert heads == [4]


@pytest.mark.tools
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
def test_a_planted_wrong_head_count_is_caught(tmp_path):
    model = _eager_bert(tmp_path / "bert.onnx")
    result = FuseTransformer(feeds=_padding_feeds(), num_heads=2)(model)
    notes = " ".join(result.details["notes"])
    assert "num_heads=2 given by hand contradicts the graph's 4" in notes
    assert "all fusions refused" in notes and "tolerance" in notes
    assert result.stats["attention_fused"] == 0  # fell back: the other fusions only
    assert not any(n.op_type == "Attention" for n in result.model.graph.node)


@pytest.mark.tools
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
def test_the_fused_attention_reads_the_mask_itself_and_is_exact_on_masks_with_holes(tmp_path):
    # ORT's optimizer reduces a BERT mask to key lengths by default, which is exact only on
    # masks of ones then zeros; the pass keeps the 0/1 mask, exact on any mask.
    model = _eager_bert(tmp_path / "bert.onnx")
    feeds = _padding_feeds()
    feeds[0]["attention_mask"][0, 2] = 0  # a hole: a masked token inside the sequence
    feeds[0]["attention_mask"][1, 0] = 0  # and padding at the start
    result = FuseTransformer(feeds=feeds)(model)
    assert result.stats["attention_fused"] == 1
    fused = [n for n in result.model.graph.node if n.op_type == "Attention"]
    mask = fused[0].input[3]
    assert mask and "ReduceSum" not in {n.op_type for n in result.model.graph.node}
    names = [o.name for o in model.graph.output]
    expected = run_outputs(model, feeds, names)
    got = run_outputs(result.model, feeds, names)
    for ref, out in zip(expected, got):
        for name in names:
            np.testing.assert_allclose(out[name], ref[name], rtol=1e-4, atol=1e-4)


@pytest.mark.tools
@pytest.mark.skipif(importlib.util.find_spec("onnxscript") is None, reason="needs onnxscript")
def test_the_dynamo_exporters_attention_is_fused_by_graphfix_and_exact(tmp_path):
    # ONNX Runtime's attention patterns match none of the dynamo exporter's blocks: graphfix
    # fuses them itself (self-attention: Attention with q, k and v packed into one weight),
    # and the check holds on masks with holes.
    model = _eager_bert(tmp_path / "bert.onnx", dynamo=True)
    feeds = _padding_feeds()
    feeds[0]["attention_mask"][0, 2] = 0
    result = FuseTransformer(feeds=feeds)(model)
    assert result.details["fused"].get("Attention") == 1, result.details
    node = next(n for n in result.model.graph.node if n.op_type == "Attention")
    assert node.name.startswith("graphfix_attention_")  # graphfix's, not ORT's
    names = [o.name for o in model.graph.output]
    expected = run_outputs(model, feeds, names)
    got = run_outputs(result.model, feeds, names)
    for name in names:
        np.testing.assert_allclose(got[0][name], expected[0][name], rtol=1e-4, atol=1e-4)


def _dynamically_quantized(model: onnx.ModelProto, tmp_path) -> onnx.ModelProto:
    from onnxruntime.quantization import quantize_dynamic
    source, out = tmp_path / "float.onnx", tmp_path / "dyn.onnx"
    onnx.save(model, source)
    quantize_dynamic(str(source), str(out))
    return onnx.load(out)


def test_no_fusion_feeds_a_quantizer_of_computed_values(tmp_path):
    """Rule 8: the fused layer norms' other order of sums would reach DynamicQuantizeLinear,
    where a last bit moves a whole quantization level on some inputs only."""
    quantized = _dynamically_quantized(transformer_encoder(stray_transposes=False), tmp_path)
    assert any(n.op_type == "DynamicQuantizeLinear" for n in quantized.graph.node)
    result = FuseTransformer()(quantized)
    assert not result.modified
    assert "feed a quantizer of computed values (DynamicQuantizeLinear)" in result.skipped
    assert "SkipLayerNormalization" in result.skipped
    # the same encoder in float is fused (the rule is about the quantizer, not the graph)
    assert FuseTransformer()(transformer_encoder(stray_transposes=False)).modified


def test_blocks_whose_heads_differ_are_each_fused_with_their_own():
    """A Swin's or a SegFormer's stages: no one count fits every block, so each block's own
    q split gives its heads (Rule 9), and a planted wrong count is still caught."""
    from graphfix.passes.fuse_transformer.heads import heads_per_block

    model = transformer_encoder(heads=[2, 8], stray_transposes=False)
    assert read_heads(model).startswith("the attention blocks disagree")
    assert sorted(heads_per_block(model).values()) == [2, 8]
    result = FuseTransformer()(model)
    assert result.modified, result.skipped
    fused = [n for n in result.model.graph.node if n.op_type in ("Attention",
                                                                 "MultiHeadAttention")]
    assert sorted(a.i for n in fused for a in n.attribute if a.name == "num_heads") == [2, 8]
    assert graphfix.check_parity(transformer_encoder(heads=[2, 8], stray_transposes=False),
                                 result.model).passed
    for node in fused:  # the same counts swapped: another model
        for attr in node.attribute:
            if attr.name == "num_heads":
                attr.i = 10 - attr.i
    assert not graphfix.check_parity(transformer_encoder(heads=[2, 8], stray_transposes=False),
                                     result.model).passed


def test_heads_a_computed_reshape_target_hides_are_read_once_it_is_folded():
    """Rule 10: nn.MultiheadAttention in TorchScript's export computes q's Reshape target from
    Shape at run time; fold-shapes folds it, and the heads are read there."""
    from onnx import helper

    model = attention("{1, 8, 4, 4}")
    position = next(i for i, n in enumerate(model.graph.node) if n.output[0] == "shape")
    del model.graph.node[position]
    # [batch, seq, 4, width / 4], each entry read from x's shape but the heads
    for node in reversed([
            helper.make_node("Shape", ["x"], ["xs"]),
            helper.make_node("Slice", ["xs", "zero", "one"], ["batch"]),
            helper.make_node("Slice", ["xs", "one", "two"], ["seq"]),
            helper.make_node("Slice", ["xs", "two", "three"], ["width"]),
            helper.make_node("Div", ["width", "heads"], ["size"]),
            helper.make_node("Concat", ["batch", "seq", "heads", "size"], ["shape"], axis=0)]):
        model.graph.node.insert(position, node)
    model.graph.initializer.extend([
        numpy_helper.from_array(np.array([value], np.int64), name)
        for name, value in (("zero", 0), ("one", 1), ("two", 2), ("three", 3), ("heads", 4))])
    assert "is not a constant" in read_heads(model)
    result = FuseTransformer()(model)
    assert result.modified and result.stats["attention_fused"] == 1, result.details
    assert any("fold-shapes" in note for note in result.details["notes"])
    assert result.stats["num_heads"] == 4


def test_a_model_with_nothing_to_fuse_is_left_alone_at_once(monkeypatch):
    """Rule 11: a classifier's Softmax over convolutions holds no attention block and none of
    the ops ORT's other fusions start from: ORT's optimizer (minutes of symbolic shape
    inference on a detector) is not run, and the pass says why."""
    import onnxruntime.transformers.optimizer as ort_optimizer

    calls = []
    real = ort_optimizer.optimize_model
    monkeypatch.setattr(ort_optimizer, "optimize_model",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3, 8, 8] x) => (float[N, 4] y) {
        c = Conv <kernel_shape = [3, 3]> (x, W)
        r = Sigmoid (c)
        p = GlobalAveragePool (r)
        f = Flatten (p)
        y = Softmax <axis = -1> (f)
    }
    """
    model = onnx.parser.parse_model(text)
    model.graph.initializer.append(numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32), "W"))
    result = FuseTransformer()(model)
    assert not result.modified and not calls
    assert "nothing to fuse" in result.skipped and "layer norms" in result.skipped


@pytest.mark.tools
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_torchs_own_transformer_encoder_from_the_legacy_exporter_is_fused_quietly(tmp_path):
    """nn.TransformerEncoder's attention, as the legacy exporter writes it: the key and value
    reshaped by the length it traced (the model runs at that length only, found from its
    Reshapes), and ONNX Runtime's optimizer printing a failure of its shape inference on
    standard output (`-q` must leave it empty)."""
    import subprocess
    import sys

    import torch

    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    module = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
    source, out = tmp_path / "encoder.onnx", tmp_path / "out.onnx"
    torch.onnx.export(module, (torch.randn(2, 7, 32),), source, input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "b", 1: "s"}},
                      opset_version=17, dynamo=False)
    done = subprocess.run([sys.executable, "-m", "graphfix", "optimize", str(source), str(out),
                           "--fuse", "transformer", "--no-speed-gate", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    fused = onnx.load(out)
    assert sum(n.op_type == "Attention" for n in fused.graph.node) == 1


@pytest.mark.tools
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="needs transformers")
def test_a_wrong_match_of_orts_attention_pattern_falls_back_to_graphfixs_fusion(tmp_path):
    """CLIP's text encoder (legacy exporter): ORT's BERT attention pattern matches a block and
    reads only its padding mask, not its causal one (thousands of times the tolerance). The
    pass then fuses every block with graphfix's attention fusion, which adds the whole mask,
    instead of giving attention up."""
    import torch
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    config = CLIPTextConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=16, eos_token_id=2,
                            attn_implementation="eager")
    path = tmp_path / "clip.onnx"
    model = _export_encoder(CLIPTextModel(config).eval(), path)
    feeds = _padding_feeds()
    result = FuseTransformer(feeds=feeds)(model)
    notes = " ".join(result.details["notes"])
    assert "all fusions refused" in notes, notes
    assert result.stats["attention_fused"] == 2, notes
    names = [o.name for o in model.graph.output]
    reference = onnx.load(path)
    for ref, out in zip(run_outputs(reference, feeds, names),
                        run_outputs(result.model, feeds, names)):
        np.testing.assert_allclose(out["y"], ref["y"], rtol=1e-4, atol=1e-4)


def test_contrib_ops_the_input_already_holds_are_no_fusion(tmp_path) -> None:
    # A CNN saved by an ONNX Runtime session holds its FusedConv: the pass counted it as its
    # own fusion, wrote the model "tied to ONNX Runtime" with ORT's labels, and it came out
    # larger than its input by them, nothing fused.
    import onnxruntime as ort
    from onnx import helper

    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"]),
         helper.make_node("ReduceMean", ["r"], ["y"], axes=[2, 3], keepdims=0)], "cnn",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])],
        [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"),
         numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp_path / "saved.onnx")
    ort.InferenceSession(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17)], ir_version=8).SerializeToString(), options,
        providers=["CPUExecutionProvider"])
    saved = onnx.load(tmp_path / "saved.onnx")
    assert [n.op_type for n in saved.graph.node] == ["FusedConv", "ReduceMean"]
    result = FuseTransformer()(saved)
    assert not result.modified
    assert not any("tied to ONNX Runtime" in w for w in result.warnings)
