"""convert-precision: float16/bfloat16 with float32 islands chosen by measured error."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from pathlib import Path
import re
import time

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import graphfix
from graphfix import precision
from graphfix.models.quantized import activation_quantizer, weight_quantizer
from graphfix.passes.convert_precision import ConvertPrecision, convert_precision
from graphfix.passes.convert_precision.analysis import Analysis
from graphfix.passes._measuring import tolerance_used
from graphfix.passes.convert_precision.measure import tensor_types
from graphfix.passes.convert_precision.rewrite import emulate
from graphfix.validate.parity import check_parity
from tests.passes.precision_support import FP16, HEADER, cancelling, copy, parse



def ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def types(model: onnx.ModelProto) -> dict[str, int]:
    return {t.name: t.data_type for t in model.graph.initializer}


def weights(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)


def lowered(model: onnx.ModelProto, **options) -> tuple[onnx.ModelProto, object]:
    original = copy(model)
    result = ConvertPrecision(**options)(model)
    onnx.checker.check_model(result.model, full_check=True)
    # The signature is the original's unless io_types lowers it.
    if options.get("io_types") in (None, "fp32"):
        assert [(v.name, v.type) for v in result.model.graph.input] == \
            [(v.name, v.type) for v in original.graph.input]
        assert [o.name for o in result.model.graph.output] == \
            [o.name for o in original.graph.output]
    return result.model, result


def ort_run(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def mlp(rng: np.random.Generator) -> onnx.ModelProto:
    return parse("""
    g (float[4,16] x) => (float[4,8] y) {
        h = MatMul(x, W1)
        hb = Add(h, b1)
        r = Relu(hb)
        y = MatMul(r, W2)
    }""", W1=weights(rng, 16, 32), b1=weights(rng, 32), W2=weights(rng, 32, 8))


# A layer norm written out (as the legacy exporters write it) on activations scaled by 300:
# the squares reach 1e5, past float16's 65504.
LAYER_NORM_300 = """
g (float[2,16] x) => (float[2,8] y) {
    h = MatMul(x, W1)
    s = Mul(h, big)
    mu = ReduceMean<axes=[-1]>(s)
    d = Sub(s, mu)
    sq = Pow(d, two)
    var = ReduceMean<axes=[-1]>(sq)
    ve = Add(var, eps)
    sd = Sqrt(ve)
    n = Div(d, sd)
    y = MatMul(n, W2)
}"""


def layer_norm_300(rng: np.random.Generator) -> onnx.ModelProto:
    return parse(LAYER_NORM_300, W1=weights(rng, 16, 32), W2=weights(rng, 32, 8),
                 big=np.array(300.0, np.float32), two=np.array(2.0, np.float32),
                 eps=np.array(1e-5, np.float32))


def test_mlp_is_lowered_whole_with_casts_at_the_signature(rng):
    model, result = lowered(mlp(rng))
    assert ops(model) == ["Cast", "MatMul", "Add", "Relu", "MatMul", "Cast"]
    assert set(types(model).values()) == {FP16}  # weights converted offline, no copies
    assert result.stats["casts_added"] == 2 and result.stats["islands"] == 0
    record = precision.read(model)
    assert record is not None and record.dtype == "float16" and dict(record.outputs) == {
        "y": "float16"}


def test_overflowing_layer_norm_becomes_an_island_and_parity_holds(rng):
    original = layer_norm_300(rng)
    model, result = lowered(copy(original))
    kept = {op for island in result.details["islands"] for op in island["ops"]}
    assert {"Pow", "ReduceMean"} <= kept
    why = " ".join(line for island in result.details["islands"] for line in island["why"])
    assert "NaN or Inf appears" in why
    # Parity judges the lowered output at float16's tolerance (the model's record)...
    assert check_parity(original, model).passed
    # ...and without the record, at float32's, which float16 does not meet.
    precision.write(model, None)
    assert not check_parity(original, model).passed


def test_lowering_everything_overflows_where_the_islands_do_not(rng):
    original = layer_norm_300(rng)
    analysis = Analysis.build(original, tensor_types(original), low=FP16)
    everything = analysis.resolve(frozenset(analysis.compute_nodes()))
    x = {"x": rng.uniform(-1, 1, (2, 16)).astype(np.float32)}
    import onnxruntime as ort

    def run(m: onnx.ModelProto) -> np.ndarray:
        return ort.InferenceSession(m.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, x)[0]

    reference = run(original)
    # Every variance is Inf: every normalized value, and so every output, is 0.
    assert tolerance_used(reference, run(emulate(analysis, everything)), 1e-2, 1e-2) > 10
    model, _ = lowered(copy(original))
    assert tolerance_used(reference, run(model), 1e-2, 1e-2) <= 1.0


def test_emulation_rounds_where_values_are_computed_not_where_they_move(rng, monkeypatch):
    """What a lowered Reshape, Relu, Transpose, Concat or Where writes is one of the rounded
    values it read: the emulation rounds it no second time, and computes the same values. A
    Cast to float of integers computes new values (2049 is 2048 in float16): it is rounded."""
    from graphfix.passes.convert_precision import rewrite

    original = parse("""
    g (float[4,16] x, int64[12,8] k) => (float[12,8] y) {
        h = MatMul(x, W)
        r = Reshape(h, shape)
        a = Relu(r)
        t = Transpose<perm=[1,0]>(a)
        c = Concat<axis=0>(t, C)
        kf = Cast<to=1>(k)
        s = Add(c, kf)
        y = Where(mask, s, c)
    }""", W=weights(rng, 16, 16), shape=np.array([8, 8], np.int64),
        C=weights(rng, 4, 8), mask=rng.uniform(size=(12, 8)) > 0.5)
    analysis = Analysis.build(original, tensor_types(original), low=FP16)
    everything = analysis.resolve(frozenset(analysis.compute_nodes()))
    feeds = {"x": rng.uniform(-1, 1, (4, 16)).astype(np.float32),
             "k": np.full((12, 8), 2049, np.int64)}
    import onnxruntime as ort

    def run(m: onnx.ModelProto) -> np.ndarray:
        return ort.InferenceSession(m.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, feeds)[0]

    lean = emulate(analysis, everything)
    monkeypatch.setattr(rewrite, "_selects_rounded", lambda analysis, position: False)
    every = emulate(analysis, everything)
    # x read by MatMul, h, kf, s: rounded, two Casts each; r, a, t, c, y not again
    assert ops(lean).count("Cast") == 1 + 2 * 4
    assert ops(every).count("Cast") == 1 + 2 * 9
    np.testing.assert_array_equal(run(lean), run(every))
    writer = {out: node for node in lean.graph.node for out in node.output}
    rounding = writer[writer["kf"].input[0]]  # kf is the Cast of k, rounded to float16
    assert rounding.op_type == "Cast" and rounding.attribute[0].i == FP16


def test_a_large_weight_is_emulated_as_stored_and_cast_back_the_same_values(rng, monkeypatch):
    """A weight of many values is emulated as the lowered model stores it (float16) and Cast
    back to float32 by ONNX Runtime, a small one as a rounded float32 copy: same values."""
    from graphfix.passes.convert_precision import rewrite

    original = parse("""
    g (float[4,128] x) => (float[4,128] y) {
        h = MatMul(x, W)
        y = Add(h, b)
    }""", W=weights(rng, 128, 128), b=weights(rng, 128))
    analysis = Analysis.build(original, tensor_types(original), low=FP16)
    everything = analysis.resolve(frozenset(analysis.compute_nodes()))
    cast_back = emulate(analysis, everything)
    stored = {t.name: t.data_type for t in cast_back.graph.initializer}
    assert stored == {"W_q": FP16, "b_r": onnx.TensorProto.FLOAT}
    monkeypatch.setattr(rewrite, "_CAST_WEIGHTS_FROM", 1 << 30)
    copies = emulate(analysis, everything)
    assert {t.data_type for t in copies.graph.initializer} == {onnx.TensorProto.FLOAT}
    import onnxruntime as ort

    x = {"x": rng.uniform(-1, 1, (4, 128)).astype(np.float32)}

    def run(m: onnx.ModelProto) -> np.ndarray:
        return ort.InferenceSession(m.SerializeToString(),
                                    providers=["CPUExecutionProvider"]).run(None, x)[0]

    np.testing.assert_array_equal(run(cast_back), run(copies))
    assert not np.array_equal(run(copies), run(original))  # the weights were rounded


def test_a_div_that_only_scales_down_is_not_risky_and_a_small_divisor_is(rng):
    model = parse("""
    g (float[2,8] x) => (float[2,8] a, float[2,8] b, float[2,8] c, float[2,8] d) {
        k = Constant<value = float[1] {1.4142135}>()
        a = Div(x, k)
        b = Div(x, big)
        c = Div(x, tiny)
        d = Div(x, x)
    }""", big=np.array([2.0, -1.0] * 4, np.float32), tiny=np.array([1e-3], np.float32))
    analysis = Analysis.build(model, tensor_types(model), low=FP16)
    risks = {analysis.node(p).output[0]: analysis.risk(p) for p in analysis.compute_nodes()}
    assert risks["a"] is None and risks["b"] is None  # |x / k| <= |x|: one rounding
    assert risks["c"] == risks["d"] == "small denominators overflow"
    # What it changes: x / 1e-3 past 65.504 overflows float16, so that Div stays float32,
    # found by its own error, while the others are lowered.
    x = {"x": rng.uniform(60, 200, (2, 8)).astype(np.float32)}
    _, result = lowered(model, feeds=[x], weigh_casts=False)
    kept = [line for island in result.details["islands"] for line in island["why"]]
    assert len(kept) == 1 and kept[0].startswith("Div#3 (Div): Div small denominators overflow")


def test_a_risky_value_near_the_range_stays_float32_and_so_do_its_readers(rng):
    """A softmax written without its max subtracted: exp(10 x) summed over 16 stays below
    65504 on the measured inputs, but reaches 352k at x = 1, inside the same range. The Exp and
    the ReduceSum stay float32 on their headroom, and so does the Div reading them: a Cast at
    the border would overflow as surely (true float16 arithmetic, onnx's reference evaluator,
    gives zeros where the original gives 1/16)."""
    from onnx.reference import ReferenceEvaluator

    original = parse("""
    g (float[4,16] x) => (float[4,16] y) {
        k = Constant<value = float {10.0}>()
        m = MatMul(x, w)
        a = Mul(m, k)
        e = Exp(a)
        s = ReduceSum<keepdims = 1>(e)
        y = Div(e, s)
    }""", w=np.eye(16, dtype=np.float32))
    model, result = lowered(copy(original))
    [island] = result.details["islands"]
    assert island["ops"] == {"Div": 1, "Exp": 1, "ReduceSum": 1}, island
    assert "within 16x of the lowered type's largest value" in island["why"][0]
    assert "Div#5 (Div): reads '" in " ".join(island["why"])  # the Exp's or the sum's output
    assert result.stats["compute_nodes_lowered"] == 2  # the MatMul and the Mul
    ones = {"x": np.ones((4, 16), np.float32)}
    reference = ReferenceEvaluator(original).run(None, ones)[0]
    true_fp16 = np.asarray(ReferenceEvaluator(model).run(None, ones)[0])
    assert tolerance_used(reference, true_fp16, 1e-2, 1e-2) <= 1.0


def test_values_near_the_range_are_never_cast_down_whatever_keeps_their_producer(rng):
    """An Exp past the range (its own error infinite) keeps its readers float32 too, through
    a Concat; a sum near the range keeps the Add reading it, and the Mul after that Add,
    whose output is as large: no Cast to float16 ever reads those values."""
    original = parse("""
    g (float[4,16] x) => (float[4,32] y, float[4,1] z) {
        k = Constant<value = float {12.0}>()
        big = Constant<value = float {2000.0}>()
        one = Constant<value = float {1.0}>()
        half = Constant<value = float {0.5}>()
        m = MatMul(x, w)
        a = Mul(m, k)
        e = Exp(a)
        h = MatMul(x, w2)
        c = Concat<axis = 1>(e, h)
        y = Mul(c, half)
        ax = Constant<value = int64[1] {1}>()
        b = Mul(x, big)
        t = ReduceSum<keepdims = 1>(b, ax)
        t2 = Add(t, one)
        z = Mul(t2, half)
    }""", w=np.eye(16, dtype=np.float32), w2=weights(rng, 16, 16))
    model, result = lowered(copy(original))
    cast_down = {n.input[0] for n in model.graph.node if n.op_type == "Cast"
                 and n.attribute[0].i == FP16}
    assert not cast_down & {"e", "c", "t", "t2"}, cast_down
    assert result.stats["compute_nodes_lowered"] >= 2  # the MatMul and Mul feeding the Exp


def test_any_compute_node_or_input_near_the_range_stays_float32_with_its_readers(rng):
    """The headroom holds for every op, not only the risky ones: a MatMul whose output
    reaches 4e4 on inputs in [-1, 1] overflows float16 on inputs 1.6x larger, so it stays
    float32 and so does the Mul that reads it. A graph input whose given values come near
    the range (audio at int16 scale) is read in float32 too: the Cast at the border would
    overflow. The compute away from both is lowered."""
    big = np.where(rng.standard_normal((64, 16)) > 0, 3000.0, -3000.0).astype(np.float32)
    original = parse("""
    g (float[4,64] x, float[4,16] a) => (float[4,16] y, float[4,16] z) {
        h = MatMul(x, W)
        y = Mul(h, s)
        b = Mul(a, t)
        z = MatMul(b, V)
    }""", W=big, s=np.array(1e-4, np.float32), t=np.array(0.25, np.float32),
        V=weights(rng, 16, 16) * np.float32(0.01))
    feeds = [{"x": rng.uniform(-1, 1, (4, 64)).astype(np.float32),
              "a": rng.uniform(-1e4, 1e4, (4, 16)).astype(np.float32)}]
    model, result = lowered(copy(original), feeds=feeds)
    why = {reason for island in result.details["islands"] for reason in island["why"]}
    assert any(r.startswith("MatMul#0 (MatMul): MatMul: its output reaches") for r in why), why
    assert any(r.startswith("Mul#1 (Mul): reads 'h'") for r in why), why
    assert any(r.startswith("Mul#2 (Mul): reads 'a'") for r in why), why
    cast_down = {n.input[0] for n in model.graph.node if n.op_type == "Cast"
                 and n.attribute[0].i == FP16}
    assert not cast_down & {"a", "h"}, cast_down
    assert "b" in cast_down and result.stats["compute_nodes_lowered"] == 1  # z's MatMul


def test_a_masks_fill_near_the_range_is_no_reason_to_keep_float32(rng):
    """A mask's fill (-10000 from an integer mask, float32's lowest from a Where) reaches the
    range by a constant's magnitude, which no input grows: the scores plus that fill, and
    the Softmax after, are lowered as the measurement decides, not kept for the range."""
    original = parse("""
    g (float[2,8,16] x, int64[2,16] mask) => (float[2,8,16] y, float[2,8,16] z) {
        s = MatMul(x, W)
        mf = Cast<to=1>(mask)
        inv = Sub(one, mf)
        fill = Mul(inv, neg)
        fill3 = Unsqueeze(fill, ax)
        biased = Add(s, fill3)
        y = Softmax<axis=-1>(biased)
        keep = Cast<to=9>(mask)
        keep3 = Unsqueeze(keep, ax)
        picked = Where(keep3, s, lowest)
        z = Softmax<axis=-1>(picked)
    }""", W=weights(rng, 16, 16), one=np.array(1.0, np.float32),
        neg=np.array(-10000.0, np.float32), ax=np.array([1], np.int64),
        lowest=np.array(np.finfo(np.float32).min, np.float32))
    model, result = lowered(copy(original))
    why = " ".join(reason for island in result.details["islands"] for reason in island["why"])
    assert "reaches" not in why, why
    lowered_ops = {n.op_type for n in model.graph.node if n.op_type != "Cast"}
    assert result.stats["compute_nodes_lowered"] >= 4, (result.stats, lowered_ops)


def test_error_traced_from_an_output_puts_its_origin_back(rng):
    # No risky op: the Sub cancels two large, nearly equal values; rounding them to float16
    # (spacing 4 near 3000) leaves an error the size of the result. The search traces the
    # output's error back to where it starts.
    model, result = lowered(cancelling())
    why = " ".join(line for island in result.details["islands"] for line in island["why"])
    assert "output 'y'" in why
    assert result.stats["rounds"] >= 2


def test_a_node_kept_on_its_own_error_alone_is_lowered_again_when_the_outputs_allow():
    # The cancelling Sub stalls the search, which keeps the ancestors with the largest own
    # error, the Mul among them; lowered again, the Mul leaves y within the bar, so it is.
    original = cancelling()
    model, result = lowered(copy(original), weigh_casts=False)
    assert result.skipped is None and result.stats["compute_nodes_lowered"] == 1
    typed = {v.name: v.type.tensor_type.elem_type for v in onnx.shape_inference.infer_shapes(
        model).graph.value_info}
    mul = next(n for n in model.graph.node if n.op_type == "Mul")
    assert typed[mul.output[0]] == FP16 and typed["d"] == onnx.TensorProto.FLOAT
    assert check_parity(original, model).passed


def test_nothing_lowered_is_said_and_no_record_is_written():
    # Every node computes on the cancelling values: nothing can be lowered, and the pass says
    # so, with each node's reason, rather than write a model that only gained a record.
    model, result = lowered(parse("""
    g (float[2,16] x) => (float[2,16] y) {
        a = Add(x, big)
        b = Add(x, small)
        y = Sub(a, b)
    }""", big=np.array(3000.0, np.float32), small=np.array(2999.0, np.float32)),
        weigh_casts=False)
    assert result.skipped and "every node that computes needs float32" in result.skipped
    assert precision.read(model) is None and ops(model) == ["Add", "Add", "Sub"]
    why = " ".join(line for island in result.details["islands"] for line in island["why"])
    assert "output 'y'" in why


def test_a_border_cast_is_shared_by_its_readers(rng):
    model, result = lowered(parse("""
    g (float[4,16] x) => (float[4,16] y, float[4,16] z) {
        h = MatMul(x, W)
        y = Softmax<axis=-1>(h)
        z = LogSoftmax<axis=-1>(h)
    }""", W=weights(rng, 16, 16)), keep_float32=["Softmax", "LogSoftmax"])
    assert ops(model).count("Cast") == 2  # x to float16, h back to float32 once for both
    assert result.stats["islands"] == 2


def test_a_wrong_declared_output_shape_of_the_input_does_not_stop_the_lowering(rng):
    # The model declares y of rank 2 where its Reshape writes rank 3 (onnx's checker says so
    # at the Reshape; ONNX Runtime runs it). Lowered, a Cast writes y: the checker says the
    # same at the Cast, which is the input's own problem, not the rewrite's.
    original = onnx.parser.parse_model(HEADER + """
    g (float[4,16] x) => (float[4,16] y) {
        h = MatMul(x, W)
        y = Reshape(h, shape)
    }""")
    original.graph.initializer.extend([numpy_helper.from_array(weights(rng, 16, 16), "W"),
                                       numpy_helper.from_array(np.array([2, 2, 16]), "shape")])
    with pytest.raises(onnx.shape_inference.InferenceError, match="differ in rank"):
        onnx.checker.check_model(original, full_check=True)
    result = ConvertPrecision()(copy(original))
    assert result.skipped is None and result.stats["compute_nodes_lowered"] == 1
    assert ops(result.model)[-1] == "Cast" and result.model.graph.node[-1].output[0] == "y"


def test_a_node_onnx_runtime_cannot_run_lowered_goes_back_to_float32(rng):
    # ONNX Runtime's CPU provider has no float16 ScatterElements that adds: the lowered model
    # does not run, ORT names the node, and the node stays float32 while the rest is lowered.
    # Adding is computing: the scatter is not treated as a node that only moves values.
    original = parse("""
    g (float[4,16] x, int64[2,16] k) => (float[4,16] y) {
        h = MatMul(x, W)
        u = MatMul(x, V)
        v = Slice(u, zero, two, zero)
        s = ScatterElements<axis=0, reduction="add">(h, k, v)
        y = MatMul(s, W)
    }""", W=weights(rng, 16, 16), V=weights(rng, 16, 16), zero=np.array([0]),
        two=np.array([2]))
    feeds = [{"x": rng.uniform(-1, 1, (4, 16)).astype(np.float32),
              "k": rng.integers(0, 4, (2, 16))}]
    analysis = Analysis.build(original, tensor_types(original), low=FP16)
    assert [p.movement for p in analysis.plans] == [False, False, True, False, False]
    model, result = lowered(copy(original), feeds=feeds)
    scatter = next(n for n in model.graph.node if n.op_type == "ScatterElements")
    assert result.skipped is None and result.stats["compute_nodes_lowered"] == 3
    why = " ".join(line for island in result.details["islands"] for line in island["why"])
    assert "ONNX Runtime cannot run it in the lowered type" in why and "ScatterElements" in why
    typed = {v.name: v.type.tensor_type.elem_type for v in onnx.shape_inference.infer_shapes(
        model).graph.value_info}
    assert typed[scatter.output[0]] == onnx.TensorProto.FLOAT
    assert check_parity(original, model, feeds=feeds).passed


def test_resize_scales_stay_float32(rng):
    model, _ = lowered(parse("""
    g (float[1,2,4,4] x) => (float[1,2,8,8] y) {
        c = Conv(x, W)
        y = Resize<mode="nearest">(c, roi, scales)
    }""", W=weights(rng, 2, 2, 1, 1), roi=np.zeros(0, np.float32),
        scales=np.array([1, 1, 2, 2], np.float32)))
    assert types(model)["scales"] == onnx.TensorProto.FLOAT
    assert types(model)["W"] == FP16


def test_subgraph_holder_stays_float32_and_its_outer_reads_too(rng):
    model, result = lowered(parse("""
    g (float[4,16] x, bool c) => (float[4,16] y) {
        h = MatMul(x, W)
        t = Tanh(h)
        y = If(c) <then_branch = g1 () => (float[4,16] o1) { o1 = Relu(t) },
                   else_branch = g2 () => (float[4,16] o2) { o2 = Neg(t) }>
    }""", W=weights(rng, 16, 16)))
    reasons = " ".join(line for island in result.details["islands"] for line in island["why"])
    assert "holds a subgraph" in reasons and "read inside a subgraph" in reasons
    assert types(model)["W"] == FP16


def test_second_run_changes_nothing(rng):
    model, _ = lowered(mlp(rng))
    again = ConvertPrecision()(model)
    assert not again.modified


def test_a_fused_op_onnx_does_not_know_stays_float32_and_the_rest_is_lowered(rng):
    # ONNX Runtime's transformers optimizer writes SimplifiedLayerNormalization (RMSNorm) in
    # the default domain: onnx's full check fails on the input itself, which is no reason to
    # refuse the lowered model; ONNX Runtime's run (Rule 6) judges it.
    model = onnx.parser.parse_model(HEADER + """
    g (float[2,8,16] x) => (float[2,8,16] y) {
        a = MatMul(x, W1)
        n = SimplifiedLayerNormalization<axis = -1, epsilon = 0.00001>(a, s)
        y = MatMul(n, W2)
    }""")
    model.graph.initializer.extend([
        numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "W1"),
        numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "W2"),
        numpy_helper.from_array(np.ones(16, np.float32), "s")])
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model, full_check=True)
    result = ConvertPrecision()(copy(model))
    assert result.modified, result.skipped
    kinds = {n.op_type: n for n in result.model.graph.node}
    assert "SimplifiedLayerNormalization" in kinds
    island = result.details["islands"][0]
    assert island["ops"] == {"SimplifiedLayerNormalization": 1}
    assert check_parity(model, result.model).passed


def test_io_types_lowers_the_signature_and_parity_feeds_each_its_own(rng):
    original = mlp(rng)
    model, _ = lowered(copy(original), io_types="fp16")
    assert model.graph.input[0].type.tensor_type.elem_type == FP16
    assert model.graph.output[0].type.tensor_type.elem_type == FP16
    assert "Cast" not in ops(model)
    assert check_parity(original, model).passed
    _, result = lowered(copy(original), io_types="fp16")
    assert result.warnings == []
    # an output near float16's range that the signature lowers on request: said
    scaled = parse("""
    g (float[4,16] x) => (float[4,16] y) {
        k = Constant<value = float {20000.0}>()
        m = MatMul(x, w)
        y = Mul(m, k)
    }""", w=np.eye(16, dtype=np.float32))
    _, result = lowered(scaled, io_types="fp16")
    [warning] = result.warnings
    assert warning.startswith("output 'y' reaches") and "--io-types fp16" in warning


def test_a_lowered_signature_is_checked_timed_and_optimized_against_itself(rng):
    """A model written with --io-types fp16 is a reference too: checked against itself, timed
    beside itself, and optimized again (a fixed point), each model fed and compared in its
    own types."""
    original = mlp(rng)
    model, _ = lowered(copy(original), io_types="fp16")
    assert check_parity(model, model).passed
    assert check_parity(model, original).passed  # the lowered one as the reference
    for pair in ((model, model), (original, model), (model, original)):
        assert graphfix.benchmark(pair[0], baseline=pair[1], provider="cpu", warmup=1,
                                  runs=5).speedup is not None
    again = graphfix.optimize(model, speed_gate=False)
    assert again.report.parity["passed"] and not again.report.left_out


def test_a_record_that_does_not_fit_the_model_is_not_believed(rng):
    """The record loosens parity's tolerance to the lowered type's: one naming a type graphfix
    does not know, an output the model lacks, or copied onto a float32 model is ignored, and
    parity judges at float32's tolerance."""
    original = mlp(rng)
    lowered_model, _ = lowered(copy(original))
    assert check_parity(original, lowered_model).passed  # at float16's bar
    record = precision.read(lowered_model)
    assert record is not None and record.outputs == {"y": "float16"}
    float32_model = mlp(rng)
    for bad in (record, dataclasses.replace(record, dtype="float8"),
                dataclasses.replace(record, outputs={"nope": "float16"}),
                dataclasses.replace(record, io_outputs={"y": "float7"})):
        precision.write(float32_model, bad)
        assert precision.read(float32_model) is None
    precision.write(lowered_model, dataclasses.replace(record, dtype="float8"))
    assert precision.read(lowered_model) is None
    assert not check_parity(original, lowered_model).passed  # float32's bar now


def _forge(model: onnx.ModelProto, how: str) -> None:
    """Float16 in ``model`` that its output is not computed from (see the test below)."""
    helper, f16 = onnx.helper, onnx.TensorProto.FLOAT16
    output = model.graph.output[0].name
    if how == "dead-cast":
        model.graph.node.append(helper.make_node("Cast", ["x"], ["unused16"], to=f16))
    elif how == "declared-only":
        model.graph.value_info.append(helper.make_tensor_value_info("x", f16, None))
    elif how == "shape-of-float16":  # y = Reshape(y', Shape(Cast(y', float16)))
        for node in model.graph.node:
            node.output[:] = [n if n != output else "pre" for n in node.output]
        model.graph.node.extend([
            helper.make_node("Cast", ["pre"], ["pre16"], to=f16),
            helper.make_node("Shape", ["pre16"], ["shape"]),
            helper.make_node("Reshape", ["pre", "shape"], [output])])
    elif how == "dead-cast-in-a-branch":  # y = If(true): then y' (a dead Cast beside it)
        for node in model.graph.node:
            node.output[:] = [n if n != output else "pre" for n in node.output]
        branch = helper.make_graph(
            [helper.make_node("Cast", ["x"], ["dead16"], to=f16),
             helper.make_node("Identity", ["pre"], ["taken"])], "b", [],
            [helper.make_tensor_value_info("taken", onnx.TensorProto.FLOAT, None)])
        model.graph.node.extend([
            helper.make_node("Constant", [], ["yes"], value=helper.make_tensor(
                "t", onnx.TensorProto.BOOL, [], [True])),
            helper.make_node("If", ["yes"], [output], then_branch=branch,
                             else_branch=branch)])


@pytest.mark.parametrize("how", ["dead-cast", "declared-only", "shape-of-float16",
                                 "dead-cast-in-a-branch"])
def test_an_output_the_record_calls_lowered_is_judged_so_only_where_it_is(rng, how):
    """A record copied onto a float32 model that also holds float16 its output is not
    computed from (a forged record, or one a hand edit left stale) loosens nothing: a dead
    Cast, a type only declared, a shape read off a float16 value, a dead Cast in a branch.
    The candidate chooses its own tolerance only for outputs computed from float16 values."""
    original = mlp(rng)
    record = precision.read(lowered(copy(original))[0])
    off = copy(original)
    for init in off.graph.initializer:
        init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 1.005, init.name))
    assert not check_parity(original, off).passed
    _forge(off, how)
    precision.write(off, record)
    believed = precision.read(off)
    assert believed is None or believed.outputs == {}
    assert not check_parity(original, off).passed


@pytest.mark.parametrize("given", ["input_shapes", "inputs"])
def test_shapes_and_inputs_given_channels_last_reach_a_model_made_channels_first(
        rng, tmp_path, given):
    """--input-shape and --inputs are in the source's layout; with --inputs-as-nchw the pass
    measures a model that takes the input channels-first, and moves them as the signature
    moved (before: ORT's "invalid dimensions", the pass left out, or --strict refusing)."""
    model = parse("""
    g (float[N,H,W,3] x) => (float[N,4] y) {
        t = Transpose<perm=[0,3,1,2]>(x)
        c = Conv<pads=[1,1,1,1]>(t, w)
        r = Relu(c)
        y = ReduceMean<axes=[2,3], keepdims=0>(r)
    }""", w=weights(rng, 4, 3, 3, 3))
    source = tmp_path / "nhwc.onnx"
    onnx.save(model, source)
    options: dict = {"input_shapes": {"x": [1, 8, 6, 3]}}
    expected = [1, 3, 8, 6]  # the shapes given are fixed in the model
    if given == "inputs":
        np.savez(tmp_path / "x.npz", x=rng.uniform(-1, 1, (2, 8, 6, 3)).astype(np.float32))
        options = {"parity": graphfix.ParityOptions(inputs=tmp_path / "x.npz")}
        expected = ["N", 3, "H", "W"]
    result = graphfix.optimize_file(source, tmp_path / "out.onnx", precision="fp16",
                                    inputs_as_nchw=["x"], speed_gate=False, strict=True,
                                    **options)
    entry = next(p for p in result.report.passes if p.name == "convert-precision")
    assert entry.modified and not result.report.left_out
    written = onnx.load(tmp_path / "out.onnx")
    assert [d.dim_param or d.dim_value for d in
            written.graph.input[0].type.tensor_type.shape.dim] == expected


@pytest.mark.parametrize("io_types", ["fp32", "fp16"])
def test_an_output_listed_twice_or_an_input_listed_as_output_is_lowered(rng, io_types):
    """One tensor listed twice as an output has one carrier and one Cast; an input that is
    also an output takes the input's type (before: an unsorted graph or an inconsistent type,
    and the pass left out)."""
    original = parse("""
    g (float[4,16] x) => (float[4,8] y, float[4,8] y2, float[4,16] x2) {
        h = MatMul(x, W)
        y = Relu(h)
        y2 = Identity(y)
        x2 = Identity(x)
    }""", W=weights(rng, 16, 8))
    original.graph.output[1].name = "y"   # y twice
    original.graph.output[2].name = "x"   # the input as an output
    del original.graph.node[2:]
    model, result = lowered(copy(original), io_types=io_types)
    assert result.modified and result.stats["compute_nodes_lowered"] == 1  # the MatMul
    feeds = [{"x": rng.uniform(-1, 1, (4, 16)).astype(np.float32)}]
    assert check_parity(original, model, feeds=feeds).passed


def test_bfloat16_keeps_nodes_its_schema_lacks(rng):
    # Conv has no bfloat16 before opset 22; MatMul has since opset 13.
    model, result = lowered(parse("""
    g (float[1,2,4,4] x) => (float[1,8] y) {
        c = Conv(x, W)
        f = Flatten(c)
        y = MatMul(f, M)
    }""", W=weights(rng, 2, 2, 1, 1), M=weights(rng, 32, 8)), precision="bf16")
    assert types(model)["W"] == onnx.TensorProto.FLOAT
    assert types(model)["M"] == onnx.TensorProto.BFLOAT16
    why = " ".join(line for island in result.details["islands"] for line in island["why"])
    assert "allows no bfloat16" in why


def test_optimize_writes_bfloat16_where_its_check_cannot_run_only_when_told(rng, tmp_path):
    """ONNX Runtime's CPU provider has no bfloat16 kernels: the load check after each pass
    loads a float16 stand-in of the lowered model instead (same structure), so that
    --no-verify writes the bfloat16 model; with the check on, the pass is left out saying
    where it can be checked."""
    from graphfix.model_io import runtime_problem

    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(rng), path)
    graphfix.optimize_file(path, tmp_path / "bf16.onnx", precision="bf16", verify=False,
                           speed_gate=False)
    written = onnx.load(tmp_path / "bf16.onnx")
    assert precision.read(written).dtype == "bfloat16"
    assert onnx.TensorProto.BFLOAT16 in types(written).values()
    onnx.checker.check_model(written, full_check=True)
    assert "Could not find an implementation" in runtime_problem(written)  # no CPU kernels
    stand_in = precision.float16_stand_in(written)
    assert runtime_problem(stand_in) is None
    assert onnx.TensorProto.BFLOAT16 not in types(stand_in).values()

    result = graphfix.optimize_file(path, tmp_path / "checked.onnx", precision="bf16",
                                    speed_gate=False)
    assert precision.read(onnx.load(tmp_path / "checked.onnx")) is None
    [left_out] = result.report.left_out
    assert left_out["pass"] == "convert-precision"
    assert "no kernels for: check it on CUDA (--provider cuda)" in left_out["reason"]


def test_bfloat16_saturates_float32s_lowest_instead_of_making_it_infinite(rng):
    """An attention mask's fill, float32's lowest, is past bfloat16's largest: rounded, it
    would be -inf, and a fully masked row NaN. It saturates, and the report counts it."""
    lowest = np.float32(np.finfo(np.float32).min)
    model, result = lowered(parse("""
    g (float[4,8] x) => (float[4,8] y) {
        m = MatMul(x, W)
        y = Add(m, fill)
    }""", W=weights(rng, 8, 8), fill=np.array([lowest, 0, 0, 0, 0, 0, 0, 0], np.float32)),
        precision="bf16")
    fill = next(t for t in model.graph.initializer if t.name == "fill")
    assert fill.data_type == onnx.TensorProto.BFLOAT16
    values = numpy_helper.to_array(fill).astype(np.float32)
    assert np.isfinite(values).all() and values[0] < -3e38
    assert result.stats["values_saturated"] == 1
    assert "bfloat16's range saturated" in result.warnings[0]


def test_an_epsilon_too_small_for_float16_stays_non_zero_so_a_constant_row_is_not_nan(rng):
    """BERT's LayerNorm epsilon, 1e-12, is 0 in float16: a constant row (padding, a blank
    frame) would be 0 / sqrt(0 + 0) = NaN where the original gives 0. It is kept at float16's
    smallest positive value, in ORT's run and in true float16 arithmetic."""
    from onnx.reference import ReferenceEvaluator

    original = parse("""
    g (float[3,16] x) => (float[3,16] y) {
        h = MatMul(x, W)
        mu = ReduceMean<axes=[-1]>(h)
        d = Sub(h, mu)
        sq = Mul(d, d)
        var = ReduceMean<axes=[-1]>(sq)
        ve = Add(var, eps)
        sd = Sqrt(ve)
        y = Div(d, sd)
    }""", W=weights(rng, 16, 16), eps=np.array(1e-12, np.float32))
    model, result = lowered(copy(original))
    eps = next(t for t in model.graph.initializer if t.name == "eps")
    assert eps.data_type == FP16 and float(numpy_helper.to_array(eps)) > 0
    assert result.stats["values_kept_nonzero"] == 1
    x = {"x": rng.uniform(-1, 1, (3, 16)).astype(np.float32)}
    x["x"][0] = 0.0
    for run in (lambda m: ort_run(m, x), lambda m: ReferenceEvaluator(m).run(None, x)[0]):
        expected, got = run(original), np.asarray(run(model), np.float32)
        assert np.isfinite(got).all() and not got[0].any()
        assert tolerance_used(expected, got, 1e-2, 1e-2) <= 1.0


def test_float_arithmetic_on_sizes_read_from_shapes_stays_float32(rng):
    """Half a length (Shape -> Cast -> Mul -> Cast back) and rotary angles (positions from a
    Range to the sequence length, times frequencies, Sin and Cos) are exact at parity's sizes
    in float16, which holds integers only up to 2048; past that the slice is one too long and
    the angles off by radians. Those nodes stay float32; the model's own compute is lowered,
    and true float16 arithmetic matches the original at a length of 4099."""
    from onnx.reference import ReferenceEvaluator

    original = parse("""
    g (float[1,N] x) => (float[1,M] y, float[N,8] r) {
        s = Shape(x)
        n = Gather<axis=0>(s, one)
        nf = Cast<to=1>(n)
        hf = Mul(nf, half)
        hi = Cast<to=7>(hf)
        hi1 = Unsqueeze(hi, zero)
        xs = Slice(x, zero, hi1, one1)
        y = Mul(xs, w)
        pos = Range(zero_s, n, one)
        pf = Cast<to=1>(pos)
        p2 = Unsqueeze(pf, one1)
        angle = Mul(p2, freq)
        c = Cos(angle)
        xt = Transpose<perm=[1,0]>(x)
        r = Mul(xt, c)
    }""", one=np.array(1, np.int64), zero=np.array([0], np.int64),
        one1=np.array([1], np.int64), zero_s=np.array(0, np.int64),
        half=np.array(0.5, np.float32), w=np.array(3.0, np.float32),
        freq=(1.0 / 10000 ** (np.arange(8) / 8)).astype(np.float32))
    model, result = lowered(copy(original), weigh_casts=False)
    kept = {node for island in result.details["islands"] for node in island["nodes"]}
    assert {"Cast#2", "Mul#3", "Cast#9", "Unsqueeze#10", "Mul#11", "Cos#12"} <= kept
    lowered_ops = [n.op_type for n in model.graph.node]
    assert lowered_ops.count("Cast") > 4  # y's and r's Muls run lowered, behind Casts
    x = {"x": rng.uniform(-1, 1, (1, 4099)).astype(np.float32)}
    expected = ReferenceEvaluator(original).run(None, x)
    got = ReferenceEvaluator(model).run(None, x)
    for e, g in zip(expected, got):
        assert e.shape == g.shape
        assert tolerance_used(e, np.asarray(g, np.float32), 1e-2, 1e-2) <= 1.0


ROTARY_TAIL = """
        p2 = Unsqueeze(pf, ax1)
        angle = Mul(p2, freq)
        c = Cos(angle)
        y = Mul(x, c)
    }"""
POSITIONS = {
    # an input's position ids, as decoders export them
    "position-ids-input": ("(float[S,8] x, int64[S] pos) => (float[S,8] y)",
                           "pf = Cast<to=1>(pos)"),
    # positions as a running sum of ones in the sequence's shape
    "cumsum-of-ones": ("(float[S,8] x) => (float[S,8] y)", """
        s = Shape(x)
        n = Slice(s, zero, one1)
        ones = ConstantOfShape<value=float[1] {1.0}>(n)
        cs = CumSum(ones, zero_s)
        pf = Sub(cs, unit)"""),
    # an attention mask's running sum, minus one
    "cumsum-of-a-mask": ("(float[S,8] x, int64[S] mask) => (float[S,8] y)", """
        cs = CumSum(mask, zero_s)
        pi = Sub(cs, one_s)
        pf = Cast<to=1>(pi)"""),
}


@pytest.mark.parametrize("case", list(POSITIONS))
def test_positions_however_made_stay_float32_up_to_the_angle(rng, case):
    """Integers carried in float to a Sin or Cos stay float32 the whole way, wherever they
    come from: float16 holds integers only to 2048, and a rotary angle at position 3000 is
    radians off in true float16 arithmetic; the x * cos product after it is lowered."""
    from onnx.reference import ReferenceEvaluator

    signature, head = POSITIONS[case]
    original = parse(f"g {signature} {{{head}{ROTARY_TAIL}",
                     freq=(1.0 / 10000 ** (np.arange(8) / 8)).astype(np.float32),
                     ax1=np.array([1], np.int64), zero=np.array([0], np.int64),
                     one1=np.array([1], np.int64), zero_s=np.array(0, np.int64),
                     one_s=np.array(1, np.int64), unit=np.array(1.0, np.float32))
    model, result = lowered(copy(original))
    kept = {op for island in result.details["islands"] for op in island["ops"]}
    assert {"Mul", "Cos"} <= kept, result.details["islands"]
    n = 3000
    feeds = {"x": rng.uniform(-1, 1, (n, 8)).astype(np.float32)}
    if "pos" in signature:
        feeds["pos"] = np.arange(n, dtype=np.int64)
    if "mask" in signature:
        feeds["mask"] = np.ones(n, np.int64)
    expected = ReferenceEvaluator(original).run(None, feeds)[0]
    got = np.asarray(ReferenceEvaluator(model).run(None, feeds)[0], np.float32)
    assert tolerance_used(expected, got, 1e-2, 1e-2) <= 1.0


def test_a_sum_of_embedding_rows_near_the_range_stays_float32(rng):
    """Rows picked by integer ids keep the table's magnitude, but a sum over the sequence
    grows with it: near float16's range on the measured inputs, the sum stays float32 (in
    true float16 arithmetic it overflows at a sequence 20x longer)."""
    table = rng.uniform(200, 300, (50, 4)).astype(np.float32)
    model, result = lowered(parse("""
    g (int64[1,N] ids) => (float[1,4] y) {
        e = Gather(E, ids)
        t = ReduceSum<keepdims=0>(e, ax)
        y = Mul(t, k)
    }""", E=table, ax=np.array([1], np.int64), k=np.array(1e-3, np.float32)),
        feeds=[{"ids": rng.integers(0, 50, (1, 20)).astype(np.int64)}])
    why = " ".join(r for island in result.details["islands"] for r in island["why"])
    assert "ReduceSum" in why and "reaches" in why, why


def test_an_integer_inputs_own_large_values_are_not_taken_for_a_masks_fill(rng):
    """Counts given as int32 and cast to float reach 2e5 on the real inputs given: past
    float16's range. A mask's fill is exempt from the headroom because a constant bounds it;
    nothing bounds an input's own values, so the Cast and what reads it stay float32."""
    model, result = lowered(parse("""
    g (int32[1,16] counts, float[1,16] x) => (float[1,16] y) {
        c = Cast<to=1>(counts)
        p = Add(c, one)
        l = Log(p)
        y = Mul(l, x)
    }""", one=np.array(1.0, np.float32)), feeds=[{
        "counts": rng.integers(0, 200_000, (1, 16)).astype(np.int32),
        "x": rng.uniform(-1, 1, (1, 16)).astype(np.float32)}])
    cast_down = {n.input[0] for n in model.graph.node if n.op_type == "Cast"
                 and n.attribute[0].i == FP16}
    assert not cast_down & {"c", "p"}, cast_down


def test_a_size_the_model_fixes_is_a_constant_read_the_long_way_and_is_lowered(rng):
    """1/sqrt(head size) from Shape(q)[-1], where the model fixes that dimension (64) and the
    batch changes: the same on every call, so nothing keeps it float32."""
    model, result = lowered(parse("""
    g (float[N,64] x) => (float[N,64] y) {
        s = Shape(x)
        d = Gather<axis=0>(s, one)
        df = Cast<to=1>(d)
        r = Sqrt(df)
        scale = Div(unit, r)
        h = MatMul(x, W)
        y = Mul(h, scale)
    }""", one=np.array(1, np.int64), unit=np.array(1.0, np.float32), W=weights(rng, 64, 64)))
    assert not result.details["islands"], result.details["islands"]
    assert result.stats["compute_nodes_float32"] == 0


def test_estimate_holds_against_a_true_float16_run(rng):
    """ORT's CPU provider computes most float16 ops in float32 between Casts; onnx's reference
    evaluator computes each op in numpy float16. The estimate must hold for the latter too."""
    from onnx.reference import ReferenceEvaluator

    original = layer_norm_300(rng)
    model, result = lowered(copy(original))
    estimate = result.details["estimated_error"]["y"]
    x = {"x": rng.uniform(-1, 1, (2, 16)).astype(np.float32)}
    reference = ReferenceEvaluator(original).run(None, x)[0]
    true_fp16 = np.asarray(ReferenceEvaluator(model).run(None, x)[0])
    used = tolerance_used(reference, true_fp16, 1e-2, 1e-2)
    assert used <= 1.0
    assert used <= 3 * estimate + 0.1


def test_function_twin_and_option_checks(rng):
    model = convert_precision(mlp(rng), keep_float32=["Relu"])
    assert [n.op_type for n in model.graph.node].count("Cast") == 4
    with pytest.raises(graphfix.errors.PassError, match="precision"):
        ConvertPrecision(precision="int8")
    with pytest.raises(graphfix.errors.PassError, match="io_types"):
        ConvertPrecision(precision="fp16", io_types="bf16")
    for feeds in ([], {"x": np.ones((4, 16), np.float32)}, ["x"]):
        with pytest.raises(graphfix.errors.PassError, match="feeds"):
            ConvertPrecision(feeds=feeds)


def test_feeds_that_do_not_fit_the_model_are_the_callers_error_not_a_left_out_pass(rng):
    """Given feeds are checked against the model: optimize raises, as it does for --inputs,
    instead of leaving the pass out as if it had failed on the model."""
    wrong = [{"x": np.ones((3, 16), np.float32)}]
    with pytest.raises(graphfix.errors.ValidationInputError, match=r"feeds\[0\].*\[3, 16\]"):
        ConvertPrecision(feeds=wrong)(mlp(rng))
    with pytest.raises(graphfix.errors.ValidationInputError, match="feeds"):
        graphfix.optimize(mlp(rng), precision="fp16", speed_gate=False,
                          pass_options={"convert-precision": {"feeds": wrong}})
    right = [{"x": rng.standard_normal((4, 16)).astype(np.float32)}]
    result = graphfix.optimize(mlp(rng), precision="fp16", speed_gate=False,
                               pass_options={"convert-precision": {"feeds": right}})
    assert not result.report.left_out and precision.read(result.model) is not None


def test_optimize_writes_lowered_model_when_the_gate_is_off(rng, tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(rng), path)
    result = graphfix.optimize_file(path, tmp_path / "out.onnx", precision="fp16",
                                    speed_gate=False)
    written = onnx.load(tmp_path / "out.onnx")
    assert precision.read(written) is not None
    assert result.report.parity["passed"]
    verdict, = result.report.speed_gate["verdicts"]
    assert verdict["kept"] and "speed gate off" in verdict["note"]
    entry = next(p for p in result.report.passes if p.name == "convert-precision")
    assert entry.details["lowered_outputs"] == ["y"]


def test_the_lowered_types_tolerance_lets_no_float32_passs_error_through(
        rng, tmp_path, monkeypatch):
    """A float32 pass whose error parity refuses at float32's tolerance (0.5% on the output)
    but that float16's would take: the lowered model is judged at float16's, so the model
    before the lowering is checked at float32's, and the pass that broke it is left out."""
    from graphfix import registry
    from graphfix.registry import Pass, PassResult

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    @registry.register("nudges-output")
    class _Nudges(Pass):
        """Scales the output by 1.005, as a fusion that moves a value slightly would."""

        may_grow = True

        def call(self, model: onnx.ModelProto) -> PassResult:
            graph = model.graph
            producer = next(n for n in graph.node if "y" in n.output)
            producer.output[list(producer.output).index("y")] = "y_raw"
            graph.initializer.append(numpy_helper.from_array(np.float32(1.005), "nudge"))
            graph.node.append(onnx.helper.make_node("Mul", ["y_raw", "nudge"], ["y"]))
            return PassResult(model, modified=True)

    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(rng), path)
    result = graphfix.optimize_file(path, tmp_path / "out.onnx", precision="fp16",
                                    speed_gate=False, passes=["nudges-output"])
    assert [item["pass"] for item in result.report.left_out] == ["nudges-output"]
    assert "before fuse-transformer, convert-precision" in " ".join(result.report.parity["notes"])
    written = onnx.load(tmp_path / "out.onnx")
    assert precision.read(written) is not None  # still lowered
    assert "nudge" not in {t.name for t in written.graph.initializer}
    assert result.report.parity["passed"]
    from graphfix.errors import ParityError

    with pytest.raises(ParityError, match="nudges-output"):
        graphfix.optimize(mlp(rng), precision="fp16", speed_gate=False,
                          passes=["nudges-output"], strict=True)


def test_optimize_with_the_gate_writes_what_its_verdict_says(rng, tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(rng), path)
    steps: list[str] = []
    result = graphfix.optimize_file(path, tmp_path / "out.onnx", precision="fp16",
                                    provider="cpu", progress=lambda step, *_: steps.append(step))
    gate, = result.report.speed_gate["verdicts"]
    assert gate["provider"] == "cpu" and gate["verdict"] is not None
    # the gate's seconds are said as they pass, not counted in the writing that follows
    assert "speed gate, convert-precision: timing" in steps
    written = onnx.load(tmp_path / "out.onnx")
    assert (precision.read(written) is not None) == gate["kept"]
    row, = (p for p in result.report.passes if p.name == "convert-precision")
    if not gate["kept"]:
        assert any("written without it" in w for w in result.report.warnings)
        # the report tells of the model written: the pass left out, nothing it said stands
        assert row.skipped.startswith("left out") and not row.modified
        assert row.nodes_before == row.nodes_after == result.report.output.nodes
        assert not any(w.startswith("convert-precision:") for w in result.report.warnings)
    else:
        assert row.modified and row.stats["nodes_lowered"] > 0


def test_the_gate_times_at_the_bench_shapes_and_leaves_them_dynamic(tmp_path):
    # float16 that loses at batch 1 can win at the batch a deployment runs: the gate and the
    # benchmark time at BenchOptions.input_shapes, which the written model does not take on.
    from graphfix.models.transformer import transformer_encoder
    from graphfix.options import BenchOptions

    path = tmp_path / "encoder.onnx"
    onnx.save(transformer_encoder(layers=1, stray_transposes=False), path)
    shapes = {"input_ids": [3, 16], "attention_mask": [3, 16]}
    result = graphfix.optimize_file(
        path, tmp_path / "out.onnx", precision="fp16", provider="cpu",
        bench=BenchOptions(input_shapes=shapes, runs=5, warmup=1))
    gate, = result.report.speed_gate["verdicts"]
    assert gate["input_shapes"] == shapes
    assert result.report.bench["input_shapes"] == shapes
    written = onnx.load(tmp_path / "out.onnx")
    assert [d.dim_param for d in written.graph.input[0].type.tensor_type.shape.dim] == [
        "batch", "seq"]

@pytest.mark.parametrize("shapes, says", [
    ({"nosuch": [1, 8]}, "'nosuch', which the model does not take"),
    ({"input_ids": [1, 8, 3]}, "has 3 dimensions; the input has 2"),
])
def test_bench_shapes_the_model_cannot_take_are_refused_before_any_pass_runs(
        tmp_path, shapes, says):
    from graphfix.models.transformer import transformer_encoder
    from graphfix.options import BenchOptions

    path = tmp_path / "encoder.onnx"
    onnx.save(transformer_encoder(layers=1, stray_transposes=False), path)
    with pytest.raises(graphfix.GraphfixError, match="bench shapes") as caught:
        graphfix.optimize_file(path, tmp_path / "out.onnx", precision="fp16", provider="cpu",
                               bench=BenchOptions(input_shapes=shapes))
    assert says in str(caught.value)
    assert not (tmp_path / "out.onnx").exists()
    with pytest.raises(graphfix.GraphfixError, match="fixes at"):
        graphfix.optimize_file(path, tmp_path / "out.onnx", input_shapes={"input_ids": [1, 8]},
                               bench=BenchOptions(input_shapes={"input_ids": [4, 8]}))

def test_speed_gate_writes_without_a_rewrite_that_is_slower():
    from graphfix import speed_gate
    from graphfix.options import BenchOptions, RunOptions

    def chain(length: int) -> onnx.ModelProto:
        body = "\n".join(f"h{i + 1} = MatMul(h{i}, W)" for i in range(length))
        model = parse(f"""
        g (float[64,256] h0) => (float[64,256] h{length}) {{
            {body}
        }}""", W=np.eye(256, dtype=np.float32))
        return model

    slow, fast = chain(40), chain(1)
    fast.graph.output[0].name = slow.graph.output[0].name
    fast.graph.node[-1].output[0] = slow.graph.output[0].name
    verdicts, replacement = speed_gate.judge(
        slow, lambda left_out: fast, ["convert-precision"], RunOptions(provider="cpu"),
        BenchOptions(runs=15, warmup=2))
    assert [v.kept for v in verdicts] == [False] and verdicts[0].verdict == "slower"
    assert replacement is fast
    assert "written without it" in verdicts[0].note and "--provider cuda" in verdicts[0].note



def test_speed_gate_writes_without_a_rewrite_whose_model_does_not_run_on_the_provider():
    # A fused op whose kernel on the target provider refuses the model: the run writes the
    # model without that pass and says why, where it used to stop with the benchmark's error.
    from graphfix import speed_gate
    from graphfix.options import BenchOptions, RunOptions

    plain = parse("""
    g (float[4,8] x) => (float[4,8] y) { y = Relu(x) }""")
    refused = parse("""
    g (float[4,8] x) => (float[4,8] y) { y = Relu(x) }""")
    refused.graph.node[0].op_type, refused.graph.node[0].domain = "NoSuchKernel", "com.microsoft"
    refused.opset_import.add(domain="com.microsoft", version=1)
    verdicts, replacement = speed_gate.judge(
        refused, lambda left_out: plain, ["fuse-transformer"], RunOptions(provider="cpu"),
        BenchOptions(runs=5, warmup=1))
    assert [v.kept for v in verdicts] == [False] and verdicts[0].verdict == "does not run"
    assert replacement is plain
    assert "does not run on cpu" in verdicts[0].note and "written without it" in verdicts[0].note
    # one that opens but fails when it runs (a kernel refusing the shapes it is given)
    failing = parse("""
    g (float[4,8] x) => (float[4,7] y) {
        t = Constant<value = int64[2] {4, 7}>()
        r = Reshape(x, t)
        y = Relu(r)
    }""")
    verdicts, replacement = speed_gate.judge(
        failing, lambda left_out: plain, ["fuse-transformer"], RunOptions(provider="cpu"),
        BenchOptions(runs=5, warmup=1))
    assert [v.verdict for v in verdicts] == ["does not run"] and replacement is plain

def _used_in_float64(reference, candidate, atol, rtol):
    r, c = np.asarray(reference, np.float64), np.asarray(candidate, np.float64)
    scale = float(np.sqrt(np.mean(r * r))) or 1.0
    floor = 4 * float(np.finfo(np.float32).eps)
    return float(np.max(np.abs(c - r) / (max(atol * scale, floor) + rtol * np.abs(r))))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_the_error_measure_holds_whatever_the_magnitude(dtype):
    """The pass's error measure (parity's formula) is computed in float32 for float32 values;
    it must give float64's answer, also where float32 overflows on the way (an attention
    mask's -1.7e38, values whose difference passes float32's range)."""
    rng = np.random.default_rng(0)
    ordinary = rng.standard_normal((4, 64)).astype(dtype)
    cases = [(ordinary, ordinary + dtype(1e-3)), (ordinary, ordinary * dtype(1.5))]
    if dtype != np.float16:
        peak = float(np.finfo(np.float32).max) / 2
        mask = np.array([-peak, 1.0, 2.0, 3.0], dtype=dtype)
        cases += [(mask, mask + np.array([0, 0.5, 0, 0], dtype=dtype)),
                  (np.array([peak, -peak], dtype=dtype), np.array([-peak, peak], dtype=dtype))]
    for reference, candidate in cases:
        used = tolerance_used(reference, candidate, 1e-2, 1e-2)
        assert math.isfinite(used)
        assert used == pytest.approx(_used_in_float64(reference, candidate, 1e-2, 1e-2),
                                     rel=1e-5, abs=1e-30)
    nan = ordinary.copy()
    nan[0, 0] = np.nan
    assert tolerance_used(ordinary, nan, 1e-2, 1e-2) == math.inf
    assert tolerance_used(nan, nan, 1e-2, 1e-2) == 0.0


def test_floats_that_become_indices_stay_exact(rng):
    """T5's relative-position buckets: positions (here given as floats, so that no integer
    marks them) go through Div, Log and Mul in float and are cast to indices. A float16 rounding moves some across an integer and the Gather picks
    another row; the error is traced through the integer indices back to the floats that make
    them, which stay float32, while the MatMul is lowered."""
    n = 256
    body = """
    g (float[1,256] x, float[1,256] p) => (float[1,256] y) {
        f = Identity(p)
        d = Div(f, C)
        l = Log(d)
        m = Mul(l, K)
        i = Cast<to=7>(m)
        b = Gather(T, i)
        h = MatMul(x, W)
        y = Add(h, b)
    }"""
    model = parse(body, C=np.array(7.0, np.float32), K=np.array(3.3, np.float32),
                  T=(rng.standard_normal(64) * 10).astype(np.float32),
                  W=(rng.standard_normal((n, n)) / 16).astype(np.float32))
    feeds = [{"x": rng.standard_normal((1, n)).astype(np.float32),
              "p": np.arange(8, 8 + n, dtype=np.float32)[None]}]
    out, result = lowered(copy(model), feeds=feeds)
    assert result.modified
    assert types(out)["W"] == FP16
    why = " ".join(line for island in result.details["islands"] for line in island["why"])
    assert "discrete values" in why  # positions given as floats: no integer to start from
    float32 = {op for island in result.details["islands"] for op in island["ops"]}
    assert {"Div", "Log", "Mul"} <= float32
    assert check_parity(model, out, feeds=feeds).passed


def test_an_embedding_whose_rounded_rows_matter_stays_float32(rng):
    """Rows near 1000 minus 1000: float16's spacing there (0.5) is larger than what is left.
    The subtraction goes back first, then the Gather that moves the rounded rows, with its
    table; the MatMul beside them stays lowered."""
    body = """
    g (int64[1] i, float[1,64] x) => (float[1,64] y) {
        e = Gather(T, i)
        d = Sub(e, C)
        h = MatMul(x, W)
        y = Add(h, d)
    }"""
    model = parse(body, T=(1000 + rng.uniform(-1, 1, (32, 64)) * 0.1).astype(np.float32),
                  C=np.array(1000.0, np.float32), W=weights(rng, 64, 64))
    feeds = [{"i": np.array([5], dtype=np.int64),
              "x": rng.standard_normal((1, 64)).astype(np.float32)}]
    out, result = lowered(copy(model), feeds=feeds)
    assert result.modified
    assert types(out)["T"] == onnx.TensorProto.FLOAT and types(out)["W"] == FP16
    float32 = {op for island in result.details["islands"] for op in island["ops"]}
    assert {"Gather", "Sub"} <= float32
    assert check_parity(model, out, feeds=feeds).passed


def _residual_stack(layers: int, hidden: int = 64, seed: int = 0) -> onnx.ModelProto:
    """A transformer's residual stream without attention: h = LayerNorm(h + MLP(h))."""
    from onnx import helper

    rng = np.random.default_rng(seed)
    nodes, weights = [], [numpy_helper.from_array(np.ones(hidden, np.float32), "g"),
                          numpy_helper.from_array(np.zeros(hidden, np.float32), "b")]
    current = "x"
    for i in range(layers):
        up = rng.standard_normal((hidden, 4 * hidden)) / np.sqrt(hidden)
        down = rng.standard_normal((4 * hidden, hidden)) / np.sqrt(4 * hidden)
        weights += [numpy_helper.from_array(up.astype(np.float32), f"up{i}"),
                    numpy_helper.from_array(down.astype(np.float32), f"down{i}")]
        nodes += [helper.make_node("MatMul", [current, f"up{i}"], [f"a{i}"], f"up_{i}"),
                  helper.make_node("Tanh", [f"a{i}"], [f"t{i}"], f"tanh_{i}"),
                  helper.make_node("MatMul", [f"t{i}", f"down{i}"], [f"m{i}"], f"down_{i}"),
                  helper.make_node("Add", [current, f"m{i}"], [f"r{i}"], f"add_{i}"),
                  helper.make_node("LayerNormalization", [f"r{i}", "g", "b"], [f"n{i}"],
                                   f"norm_{i}", axis=-1)]
        current = f"n{i}"
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    graph = helper.make_graph(
        nodes, "residual", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                          [1, 32, hidden])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 32, hidden])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_an_error_built_up_along_a_residual_stream_keeps_the_stream_not_the_products() -> None:
    # Rounding a residual stream to float16 at every layer builds an error that no single node
    # starts. The search then puts nodes back by their own error; a product's is as large as an
    # addition's, and BERT-base kept 84 of its 96 MatMuls in float32 that way (float16 then
    # ran 0.59x on an H200). The additions and normalizations that carry the stream go back
    # first: the products, where float16 pays, stay lowered.
    model = _residual_stack(16)
    result = ConvertPrecision(precision="fp16")(model)
    kept = [n for island in result.details["islands"] for n in island["nodes"]]
    assert result.stats["compute_nodes_float32"] > 0  # the error does build up here
    kept_products = [n for n in kept if n.startswith(("up_", "down_"))]
    assert len(kept_products) <= 32 // 4, kept
    assert result.stats["estimated_error_permille"] <= 500


def test_onnx_runtime_s_error_is_held_to_the_search_s_bar_not_the_tolerance() -> None:
    # The search keeps every output within half the tolerance, the other half headroom for
    # inputs parity does not see. ONNX Runtime's run of the lowered model can land above the
    # estimate (here 0.62 where the emulation said 0.44); such a model was written, and one at
    # 0.99 missed the tolerance on fresh inputs of larger sizes. The error is now traced on
    # ORT's own run (where it has no single origin, the largest own errors go back, matrix
    # products last) until that run is within the bar too.
    result = ConvertPrecision(precision="fp16")(_residual_stack(16, 32, seed=5))
    assert result.modified
    assert result.stats["measured_error_permille"] <= 500, result.stats


def test_a_lowered_signature_input_that_a_branch_reads_reaches_the_branch_in_float32() -> None:
    # io_types="fp16" lowers the graph input; an If branch (not rewritten) reads it from the
    # outer scope as float32. Before, the lowered model was invalid and the pass left out.
    rng = np.random.default_rng(0)
    model = _branching_on_x(rng, scale=0.2)
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = ConvertPrecision(precision="fp16", io_types="fp16")(model)
    assert result.modified, result.warnings
    onnx.checker.check_model(result.model, full_check=True)
    assert result.model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT16
    import onnxruntime as ort

    x = rng.normal(0, 1, (3, 8)).astype(np.float32)
    for sign in (1, -1):
        feed = np.abs(x) * sign
        (expected,) = ort.InferenceSession(original.SerializeToString(),
                                           providers=["CPUExecutionProvider"]).run(
            None, {"x": feed})
        (got,) = ort.InferenceSession(result.model.SerializeToString(),
                                      providers=["CPUExecutionProvider"]).run(
            None, {"x": feed.astype(np.float16)})
        assert tolerance_used(expected, got.astype(np.float32), 1e-2, 1e-2) <= 1.0


def test_the_estimate_sees_a_lowered_signature_input_read_by_a_branch_rounded() -> None:
    # A branch reads the lowered input through a Cast from the lowered type, so its rounding
    # reaches the branch; the emulation must round it there too. Here the branch subtracts
    # 1000 from inputs near 1000: bfloat16 (no runtime check on the CPU) was written on an
    # estimate of 0.09x the tolerance while its outputs were off by 1.05 on values of 1.5.
    rng = np.random.default_rng(1)
    model = _branching_on_x(rng, scale=0.3, offset=1000.0)
    feeds = [{"x": (1000 + rng.normal(0, 1, (4, 8))).astype(np.float32)} for _ in range(2)]
    result = ConvertPrecision(precision="bf16", io_types="bf16", feeds=feeds, max_rounds=4)(
        model)
    assert not result.modified, result.stats
    assert "stays at" in result.warnings[0]


def _branching_on_x(rng: np.random.Generator, *, scale: float,
                    offset: float | None = None) -> onnx.ModelProto:
    """y = If(sum(x [@ wa]) > 0, x @ w1, x @ w2) @ w3: the branches read the graph input x
    from the outer scope (with ``offset``: x - offset, the condition on x @ wa)."""
    from onnx import helper

    names = ("wa", "w1", "w2", "w3") if offset is not None else ("w1", "w2", "w3")
    weights = [numpy_helper.from_array(rng.normal(0, scale, (8, 8)).astype(np.float32), name)
               for name in names]
    weights.append(numpy_helper.from_array(np.array(0, np.float32), "zero"))
    if offset is not None:
        weights.append(numpy_helper.from_array(np.array(offset, np.float32), "c"))

    def branch(weight: str, out: str) -> onnx.GraphProto:
        read = "x"
        nodes = []
        if offset is not None:
            nodes.append(helper.make_node("Sub", ["x", "c"], [f"{out}_d"]))
            read = f"{out}_d"
        nodes.append(helper.make_node("MatMul", [read, weight], [out]))
        return helper.make_graph(nodes, out, [], [helper.make_tensor_value_info(
            out, onnx.TensorProto.FLOAT, None)])

    condition = [helper.make_node("MatMul", ["x", "wa"], ["xa"])] if offset is not None else []
    graph = helper.make_graph([
        *condition,
        helper.make_node("ReduceSum", ["xa" if condition else "x"], ["total"], keepdims=0),
        helper.make_node("Greater", ["total", "zero"], ["positive"]),
        helper.make_node("If", ["positive"], ["picked"], then_branch=branch("w1", "a"),
                         else_branch=branch("w2", "b")),
        helper.make_node("MatMul", ["picked", "w3"], ["y"]),
    ], "branching", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 8])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=8)


def test_an_ir3_model_whose_weights_are_inputs_is_lowered() -> None:
    # IR 3 requires every initializer to be a graph input; the lowered weights are new
    # initializers, so the lowered model goes to IR 4 (was: "invalid", the pass left out, on
    # the ONNX backend's zoo exports).
    model = _residual_stack(2)
    model.ir_version = 3
    listed = {value.name for value in model.graph.input}
    for tensor in model.graph.initializer:
        if tensor.name not in listed:
            model.graph.input.append(onnx.helper.make_tensor_value_info(
                tensor.name, tensor.data_type, list(tensor.dims)))
    onnx.checker.check_model(model)
    result = ConvertPrecision(precision="fp16")(model)
    assert result.modified, result.warnings
    assert result.model.ir_version == 4
    onnx.checker.check_model(result.model, full_check=True)


def _many_feeds() -> list[dict[str, np.ndarray]]:
    """Input sets for _residual_stack that keep a worker's job going for a second or so."""
    x = np.random.default_rng(0).uniform(-1, 1, (1, 32, 64)).astype(np.float32)
    return [{"x": x + np.float32(i)} for i in range(4000)]


def test_the_runtime_worker_gives_outputs_or_refusals_and_outlives_a_crash() -> None:
    # The default-session check runs in a worker interpreter: the same outputs as a run in
    # process, ORT's own refusal as an error (the worker kept), a crash as RuntimeCrash (the
    # worker replaced at the next job), and no interpreter left once closed.
    import signal

    from graphfix.passes._measuring import run_outputs
    from graphfix.passes._runtime_worker import RuntimeCrash, RuntimeWorker

    model = _residual_stack(2)
    feeds = [{"x": np.random.default_rng(0).uniform(-1, 1, (1, 32, 64)).astype(np.float32)}]
    (in_process,) = run_outputs(model, feeds, ["y"])
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    broken.graph.node[0].op_type = "NoSuchOp"
    with RuntimeWorker() as worker:
        first = worker.pid
        (kept,) = worker.run(model, feeds, ["y"], optimization="all")
        np.testing.assert_allclose(kept["y"], in_process["y"], rtol=1e-4, atol=1e-4)
        with pytest.raises(RuntimeError, match="NoSuchOp"):
            worker.run(broken, feeds, ["y"], optimization="all")
        assert worker.pid == first  # a refusal is not a death
        many = _many_feeds()
        job = worker.submit(model, many, ["y"], optimization="all")
        time.sleep(0.3)  # the job taken and on (a death before it is not the model's doing)
        os.kill(first, signal.SIGKILL)  # as a segfault in ONNX Runtime would, in the job
        with pytest.raises(RuntimeCrash, match="signal"):
            job.result()
        (again,) = worker.run(model, feeds, ["y"], optimization="disabled")
        assert worker.pid not in (None, first)
        np.testing.assert_allclose(again["y"], in_process["y"], rtol=1e-4, atol=1e-4)
        last = worker.pid
    assert worker.pid is None
    with pytest.raises(ChildProcessError):
        os.waitpid(last, os.WNOHANG)  # reaped by close
    # a closed worker still runs a job, in an interpreter of its own that ends with it
    (alone,) = worker.run(model, feeds, ["y"], optimization="all")
    np.testing.assert_allclose(alone["y"], in_process["y"], rtol=1e-4, atol=1e-4)
    assert worker.pid is None


def test_convert_precision_keeps_the_worker_it_is_given_or_its_own_while_entered() -> None:
    from graphfix.passes._runtime_worker import RuntimeWorker

    model = _residual_stack(2)
    with RuntimeWorker() as worker:
        pid = worker.pid
        for _ in range(2):
            result = ConvertPrecision(precision="fp16", worker=worker)(copy(model))
            assert result.modified, result.warnings
            assert worker.pid == pid
    with ConvertPrecision(precision="fp16") as pass_:
        own = pass_._own
        assert own is not None and own.pid is not None
        pid = own.pid
        assert pass_(copy(model)).modified and pass_(copy(model)).modified
        assert own.pid == pid
    assert own.pid is None and pass_._own is None
    with pytest.raises(graphfix.errors.PassError, match="RuntimeWorker"):
        ConvertPrecision(worker="a worker")


def _wait_dead(pid: int, seconds: float = 10.0) -> None:
    """Until process ``pid`` has ended (gone, or a zombie its parent has not reaped): a
    SIGKILL takes effect when the kernel next schedules it, later on a loaded machine."""
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.01)


def test_every_run_in_a_shared_worker_block_checks_in_that_worker() -> None:
    import signal

    from graphfix.passes.convert_precision import RuntimeWorker, shared_worker

    model = _residual_stack(2)
    with RuntimeWorker() as worker, shared_worker(worker):
        for _ in range(2):
            pid = worker.pid
            # an interpreter that died between jobs (killed here) is replaced at the next job,
            # not taken for a crash on the model: the run's pass used this worker
            os.kill(pid, signal.SIGKILL)
            _wait_dead(pid)  # dead before the job: one killed while it runs is a crash on it
            result = graphfix.optimize(copy(model), passes=["convert-precision"], verify=False)
            (report,) = result.report.passes
            assert report.stats.get("compute_nodes_lowered", 0) > 0, (report.skipped, report)
            assert worker.pid not in (None, pid)
    with pytest.raises(graphfix.errors.PassError, match="RuntimeWorker"):
        with shared_worker("a worker"):
            pass


def test_the_first_assignment_s_default_session_check_runs_while_the_search_measures_it(
        ) -> None:
    # The first assignment is lowered and its default-session run given to the worker before
    # the search measures it: where the search ends there (one round), that run is the check
    # (one job); where it goes on, the check runs on the assignment it ends with (two jobs),
    # and the model written is the one checked.
    from graphfix.passes.convert_precision import RuntimeWorker

    with RuntimeWorker() as worker:
        one = ConvertPrecision(precision="fp16", worker=worker,
                               weigh_casts=False)(_residual_stack(2))
        assert one.modified and one.stats["rounds"] == 1 and worker.jobs == 1
        more = ConvertPrecision(precision="fp16", worker=worker,
                                weigh_casts=False)(_residual_stack(16))
        assert more.modified and more.stats["rounds"] > 1 and worker.jobs == 3
    float32 = {n for island in more.details["islands"] for n in island["nodes"]}
    written = {n.name: n for n in more.model.graph.node}
    assert float32 and all(name in written for name in float32)
    feeds = [{"x": np.random.default_rng(3).uniform(-1, 1, (1, 32, 64)).astype(np.float32)}]
    assert check_parity(_residual_stack(16), more.model, feeds=feeds).passed


def test_an_interrupt_while_waiting_for_the_worker_leaves_it_free_and_the_job_settled(
        sigint_raises) -> None:
    # Ctrl-C (or a notebook's interrupt) while a job runs: the interrupt goes up at once, the
    # job's answer is lost to it (a second wait would wait out the whole timeout), and the
    # worker takes the next job in a new interpreter.
    import signal
    import threading

    from graphfix.passes._runtime_worker import RuntimeWorker

    model = _residual_stack(2)
    many = _many_feeds()
    with RuntimeWorker() as worker:
        first = worker.pid
        job = worker.submit(model, many, ["y"], optimization="all")
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            job.result()
        started = time.perf_counter()
        with pytest.raises(RuntimeError, match="interrupted"):
            job.result(timeout=5)
        assert time.perf_counter() - started < 5
        (out,) = worker.run(model, many[:1], ["y"], optimization="all")
        assert worker.pid not in (None, first) and out["y"].shape == (1, 32, 64)


def test_the_runtime_worker_s_edges_a_death_before_the_job_strings_and_a_closed_job() -> None:
    # An interpreter killed right before a job is replaced and the job given again (not a
    # crash on the model); outputs numpy cannot hold as numbers are left out, the check made
    # on the rest; closing the worker with a job on settles that job as an error.
    import signal

    from graphfix.passes._runtime_worker import RuntimeWorker

    model = _residual_stack(2)
    feeds = [{"x": np.random.default_rng(0).uniform(-1, 1, (1, 32, 64)).astype(np.float32)}]
    labelled = copy(model)
    labelled.graph.node.append(onnx.helper.make_node(
        "Constant", [], ["label"], value=onnx.helper.make_tensor(
            "label", onnx.TensorProto.STRING, [1], [b"y"])))
    labelled.graph.output.append(onnx.helper.make_tensor_value_info(
        "label", onnx.TensorProto.STRING, [1]))
    with RuntimeWorker() as worker:
        for _ in range(5):
            first = worker.pid
            os.kill(first, signal.SIGKILL)
            (out,) = worker.run(model, feeds, ["y"], optimization="all")
            assert out["y"].shape == (1, 32, 64) and worker.pid != first
        (out,) = worker.run(labelled, feeds, ["y", "label"], optimization="all")
        assert set(out) == {"y"}
        job = worker.submit(model, _many_feeds(), ["y"], optimization="all")
        with pytest.raises(ValueError, match="optimization"):
            worker.submit(model, feeds, ["y"], optimization="ALL")
    with pytest.raises(RuntimeError, match="closed"):
        job.result()
    assert worker.pid is None


def test_a_finished_job_is_read_at_once_and_a_stalled_one_within_the_worker_s_timeout() -> None:
    # A job that finished is read with no wait (timeout 0) and its interpreter kept; one whose
    # interpreter stalls (stopped here, as a debugger or a hung kernel would) is given up
    # after the worker's timeout, and the next job runs in a new interpreter.
    import signal

    from graphfix.passes._runtime_worker import RuntimeWorker

    model = _residual_stack(2)
    feeds = [{"x": np.random.default_rng(0).uniform(-1, 1, (1, 32, 64)).astype(np.float32)}]
    with pytest.raises(ValueError, match="timeout"):
        RuntimeWorker(timeout=0)
    with RuntimeWorker(timeout=2) as worker:
        worker.run(model, feeds, ["y"], optimization="all")
        first = worker.pid
        job = worker.submit(model, feeds, ["y"], optimization="all")
        time.sleep(1.0)
        (out,) = job.result(timeout=0)
        assert out["y"].shape == (1, 32, 64) and worker.pid == first
        os.kill(first, signal.SIGSTOP)
        try:
            started = time.perf_counter()
            with pytest.raises(RuntimeError, match="no result in 2 s"):
                worker.run(model, feeds, ["y"], optimization="all")
            assert time.perf_counter() - started < 10
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(first, signal.SIGCONT)
        (out,) = worker.run(model, feeds, ["y"], optimization="all")
        assert worker.pid not in (None, first) and out["y"].shape == (1, 32, 64)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX fork")
def test_a_forked_copy_s_exit_leaves_the_parent_s_job_and_its_files() -> None:
    # A forked copy of the process runs the exit handlers it inherited (sys.exit in a bare
    # fork): they stop and remove only what that copy started, not the parent's job on.
    import atexit

    from graphfix.passes._runtime_worker import RuntimeWorker

    model = _residual_stack(2)
    many = _many_feeds()
    with RuntimeWorker() as worker:
        job = worker.submit(model, many, ["y"], optimization="all")
        pid = os.fork()
        if pid == 0:  # the exit handlers only (ONNX Runtime's own teardown hangs in a fork)
            try:
                atexit._run_exitfuncs()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        outputs = job.result()
    assert len(outputs) == len(many) and outputs[0]["y"].shape == (1, 32, 64)


def test_a_model_that_quantizes_what_it_computes_is_left_alone() -> None:
    """Rule 13: float16 before a quantizer of activations moves whole levels; the weights'
    own quantizers (constant in, constant out) do not count."""
    activations = activation_quantizer()
    result = ConvertPrecision()(activations)
    assert not result.modified
    assert "quantizes values it computes (DynamicQuantizeLinear)" in result.skipped
    weights_only = weight_quantizer()
    assert ConvertPrecision()(weights_only).modified


# A detector's tail: scores filtered by a threshold that generated inputs never pass.
THRESHOLDED = """
g (float[4,16] x) => (float[N] kept) {
    h = MatMul(x, W1)
    r = Relu(h)
    s = MatMul(r, W2)
    flat = Flatten<axis = 0>(s)
    scores = Squeeze(flat)
    above = Greater(scores, threshold)
    kept = Compress(scores, above)
}"""


def test_an_output_empty_on_every_input_set_leaves_the_model_alone(rng):
    """Rule 14: no element, no error measured; lowering everything on that would be a guess."""
    def model(threshold: float) -> onnx.ModelProto:
        return parse(THRESHOLDED, W1=weights(rng, 16, 32), W2=weights(rng, 32, 8),
                     threshold=np.array(threshold, np.float32))
    result = ConvertPrecision()(model(1e6))
    assert not result.modified
    assert "'kept' are empty, only zeros or only NaN on every input set" in result.skipped
    assert "--inputs" in result.skipped
    assert ConvertPrecision()(model(-1e6)).modified  # the same model keeping every score


def test_an_output_of_only_zeros_on_every_input_set_leaves_the_model_alone(rng):
    """Rule 14: a head initialized to zero (torchvision's ViT's) gives zeros whatever the layers
    before it compute, lowered or not: no error shows, none is measured."""
    text = THRESHOLDED.replace("float[N] kept", "float[4,8] kept").replace(
        "flat = Flatten<axis = 0>(s)", "kept = MatMul(s, W3)").split("scores = ")[0] + "}"
    zero = parse(text, W1=weights(rng, 16, 32), W2=weights(rng, 32, 8),
                 W3=np.zeros((8, 8), np.float32))
    result = ConvertPrecision()(zero)
    assert not result.modified and "only zeros" in result.skipped
    trained = parse(text, W1=weights(rng, 16, 32), W2=weights(rng, 32, 8),
                    W3=weights(rng, 8, 8))
    assert ConvertPrecision()(trained).modified


def test_an_output_of_only_nan_on_every_input_set_leaves_the_model_alone(rng):
    """Rule 14: a logarithm of generated values below zero is NaN, lowered or not: a model
    whose float16 sums lose 10% came out lowered everywhere, its error measured as nothing."""
    text = """
    g (float[4,16] x) => (float[4,16] y) {
        h = MatMul(x, W)
        far = Add(h, big)
        back = Sub(far, big)
        low = Sub(x, shift)
        logs = Log(low)
        y = Add(back, logs)
    }"""
    model = parse(text, W=weights(rng, 16, 16), big=np.array(3000.0, np.float32),
                  shift=np.array(5.0, np.float32))
    result = ConvertPrecision()(model)
    assert not result.modified and "only NaN" in result.skipped


@pytest.mark.parametrize("low", [onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16])
def test_weights_round_to_nearest_and_keep_their_tiny_values_and_saturate(low):
    """A weight in the lowered type is its nearest value, except that a finite value past the
    type's range saturates at its largest and a non-zero value the type would make zero keeps
    its sign at the smallest: counted apart, each in its own count."""
    from graphfix.passes.convert_precision.rewrite import (largest_value, round_array,
                                                           smallest_value)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(low)
    smallest, largest = smallest_value(low), largest_value(low)
    rng = np.random.default_rng(0)
    plain = (rng.standard_normal(1000) * 0.1).astype(np.float32)
    tiny = np.array([smallest * 0.4, -smallest * 0.3], np.float32)  # nearest: zero
    near = np.array([smallest * 0.8, -smallest * 0.9], np.float32)  # nearest: the smallest
    big = np.float32([min(largest * 4, 3.4e38), -min(largest * 4, 3.4e38)])
    special = np.array([0.0, -0.0, np.inf, -np.inf], np.float32)
    value = np.concatenate([plain, tiny, near, big, special])
    rounded, saturated, raised = round_array(value, low)
    assert rounded.dtype == dtype
    as_float = rounded.astype(np.float32)
    np.testing.assert_array_equal(as_float[:1000], plain.astype(dtype).astype(np.float32))
    np.testing.assert_array_equal(as_float[1000:1004], np.float32([smallest, -smallest,
                                                                    smallest, -smallest]))
    np.testing.assert_array_equal(as_float[1004:1006], np.float32([largest, -largest]))
    np.testing.assert_array_equal(as_float[1006:], special)
    assert np.signbit(as_float[1007])  # -0.0 stays -0.0: it is not raised
    assert raised == 2
    assert saturated == 2


def _even_batch(rng: np.random.Generator) -> onnx.ModelProto:
    """A dynamic batch the model takes only when it is even (a Reshape into pairs)."""
    return parse("""
        agraph (float[N, 16] x) => (float[2, M, 16] y) {
            h = MatMul(x, w)
            r = Reshape(h, shape)
            t = Tanh(r)
            y = Exp(t)
        }""", w=weights(rng, 16, 16), shape=np.array([2, -1, 16], np.int64))


def test_the_run_that_finds_a_sets_sizes_is_its_first_measurement(rng, monkeypatch):
    """A dynamic dimension's sizes are tried on the search's first run (the original with the
    risky nodes' shadows), so the original is not run once more to find them; the sets are
    parity's, a rejected size included, and where only that measuring run fails the original
    decides."""
    from graphfix.passes import _measuring
    from graphfix.passes.convert_precision import measure

    model = _even_batch(rng)
    parity_sets = _measuring.make_feeds(model, seed=0, runs=None, input_shapes=None)
    assert [f["x"].shape[0] for f in parity_sets] == [2, 2]  # set 0's first size, 1, rejected
    opened: list[onnx.ModelProto] = []
    real = _measuring.session
    monkeypatch.setattr(_measuring, "session", lambda m: opened.append(m) or real(m))

    def search() -> measure.Search:
        analysis = Analysis.build(model, tensor_types(model), low=onnx.TensorProto.FLOAT16)
        return measure.Search(analysis, (), _measuring.tolerance("float16"))

    found = search()
    sets = _measuring.make_feeds(model, seed=0, runs=None, input_shapes=None,
                                 run=found.try_sizes)
    # the measuring run, then the original deciding on the size it failed (batch 1)
    measuring, original = opened
    assert len(measuring.graph.output) > len(model.graph.output) and original == model
    for mine, theirs in zip(sets, parity_sets, strict=True):
        np.testing.assert_array_equal(mine["x"], theirs["x"])
    found.feeds = sets
    found.measure_local(found._risky())
    assert len(opened) == 2 and found.reference and set(found.local)  # no run repeated

    def refused(self, feed):
        raise RuntimeError("the measuring run fails")

    monkeypatch.setattr(measure._Measuring, "run", refused)
    sets = _measuring.make_feeds(model, seed=0, runs=None, input_shapes=None,
                                 run=search().try_sizes)
    for mine, theirs in zip(sets, parity_sets, strict=True):
        np.testing.assert_array_equal(mine["x"], theirs["x"])
    monkeypatch.undo()
    converted = ConvertPrecision(precision="fp16")(_even_batch(rng))
    assert converted.modified and converted.stats["measured_error_permille"] is not None


def test_a_node_that_grows_with_the_inputs_near_the_range_is_named_for_real_inputs(rng):
    """Rule 15: generated inputs are in [-1, 1]; a node at 200 on them overflows float16 on
    inputs some 300x larger (raw pixels, audio samples), where ONNX Runtime's CPU provider
    does not show it. The pass names the node and the factor; real inputs settle it, and a
    model whose float values do not grow with its inputs' has nothing to say."""
    text = """
    g (float[4,16] x) => (float[4,16] y) {
        h = MatMul(x, W)
        y = Relu(h)
    }"""
    model = parse(text, W=np.full((16, 16), 25.0, np.float32))
    result = ConvertPrecision()(onnx.ModelProto.FromString(model.SerializeToString()))
    assert result.modified
    [warning] = [w for w in result.warnings if "generated inputs" in w]
    assert "--inputs" in warning and "x larger" in warning
    given = [{"x": rng.uniform(-1, 1, (4, 16)).astype(np.float32)}]
    assert not any("generated inputs" in w
                   for w in ConvertPrecision(feeds=given)(model).warnings)
    ids = parse("""
    g (int64[4,16] ids) => (float[4,16,8] y) {
        e = Gather(table, ids)
        y = Mul(e, e)
    }""", table=np.full((50, 8), 30.0, np.float32))
    assert not any("generated inputs" in w for w in ConvertPrecision()(ids).warnings)
    # a square grows as the square of the inputs' scale: at about 0.8 on generated inputs,
    # inputs some 280x larger overflow it (a linear reading says 78,000x, and nothing)
    square = parse("""
    g (float[4,16] x) => (float[4,16] y) {
        h = MatMul(x, W)
        s = Mul(h, h)
        y = Relu(s)
    }""", W=np.full((16, 16), 0.25, np.float32))
    [warning] = [w for w in ConvertPrecision()(square).warnings if "generated inputs" in w]
    factor = float(re.search(r"about ([\d.e+]+)x larger", warning).group(1))
    assert 50 < factor < 400, warning
    # an exponential passes the range once its argument passes ln(65504) = 11.1: at about 2.5
    # on generated inputs, inputs some 4.5x larger overflow it (a power law says 30x)
    exponent = parse("""
    g (float[4,16] x) => (float[4] y) {
        h = MatMul(x, W)
        e = Exp(h)
        s = ReduceSum<keepdims = 0>(e, axes)
        y = Log(s)
    }""", W=np.full((16, 16), 0.16, np.float32), axes=np.array([1], np.int64))
    [warning] = [w for w in ConvertPrecision(weigh_casts=False)(exponent).warnings
                 if "generated inputs" in w]
    factor = float(re.search(r"about ([\d.e+]+)x larger", warning).group(1))
    assert "'Exp'" in warning and factor < 100, warning
    # inputs that much larger do take the argument past ln(65504)
    x = np.random.default_rng(0).uniform(-1, 1, (4000, 16)).astype(np.float32)
    assert float(np.abs(x @ np.full((16, 16), 0.16, np.float32)).max()) * factor > np.log(65504)


def test_an_integer_input_cast_to_the_lowered_type_is_named_for_its_range() -> None:
    """Rule 15: a count read as a scale, Cast(int64) to float16: values past 65504 overflow,
    and generated integers are small."""
    model = parse("""
    g (int64[2] ids, int64[2] cnt) => (float[2,64] y) {
        e = Gather(table, ids)
        c = Cast<to = 1>(cnt)
        u = Unsqueeze(c, one)
        y = Mul(e, u)
    }""", table=np.random.default_rng(0).uniform(-1, 1, (50, 64)).astype(np.float32),
                  one=np.array([1], np.int64))
    result = ConvertPrecision(weigh_casts=False)(model)
    assert result.modified
    [warning] = [w for w in result.warnings if "input 'cnt'" in w]
    assert "int64" in warning and "65504" in warning and "--inputs" in warning


def test_an_input_with_a_default_value_stays_an_input_read_through_a_cast() -> None:
    # ``a`` has a default (an initializer listed as an input): a caller may feed another.
    # Lowered as a weight, the model read a float16 copy of the default and ignored the input.
    model = onnx.parser.parse_model("""
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] x, float[3] a) => (float[N,3] y)
  <float[3] a = {1.0, 2.0, 3.0}, float[3] c = {1.0, 2.0, 3.0}> {
    p = Mul (x, a)
    q = Mul (x, c)
    y = Add (p, q)
}""")
    result = ConvertPrecision(weigh_casts=False)(copy(model))
    assert result.modified
    out = result.model
    assert [i.name for i in out.graph.input] == ["x", "a"]
    assert {t.name: t.data_type for t in out.graph.initializer}["a"] == onnx.TensorProto.FLOAT
    import onnxruntime as ort

    x, a = np.ones((2, 3), np.float32), np.full(3, 5.0, np.float32)
    runs = [ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "a": a})[0] for m in (model, out)]
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-3)


def test_a_periodic_function_of_the_inputs_stays_float32_on_generated_inputs(rng):
    """Rule 16: a diffusion UNet's timestep embedding, sin(t * f) and cos(t * f). On t in
    [-1, 1] float16 measures well; on timesteps up to 1000 the rounding of t * f turns every
    sine around. Generated inputs keep the embedding float32 (and what computes its argument);
    on real inputs the measurement decides."""
    freqs = np.exp(-np.log(10000.0) * np.arange(16) / 16).astype(np.float32)
    model = parse("""
    g (float[4] t, float[4,32] x) => (float[4,32] y) {
        axes = Constant<value = int64[1] {1}>()
        tc = Unsqueeze(t, axes)
        arg = Mul(tc, freqs)
        s = Sin(arg)
        c = Cos(arg)
        e = Concat<axis = 1>(s, c)
        h = MatMul(e, W)
        z = Add(h, x)
        y = Relu(z)
    }""", freqs=freqs.reshape(1, 16),
        W=rng.standard_normal((32, 32)).astype(np.float32) * np.float32(0.3))
    result = ConvertPrecision()(copy(model))
    assert result.modified
    reasons = " ".join(str(island) for island in result.details["islands"])
    assert "grows with the inputs" in reasons
    timesteps = [{"t": np.array([999.0, 640.0, 37.0, 501.0], np.float32),
                  "x": rng.uniform(-1, 1, (4, 32)).astype(np.float32)}]
    assert check_parity(model, result.model, feeds=timesteps).passed
    # lowered anyway (the embedding measured on timesteps in [-1, 1] only), it is far off
    given = [{"t": rng.uniform(-1, 1, 4).astype(np.float32), "x": timesteps[0]["x"]}]
    careless = ConvertPrecision(feeds=given)(copy(model))
    assert careless.modified
    assert not check_parity(model, careless.model, feeds=timesteps).passed
    # bfloat16 has no Sin before opset 22: the Sin stays float32 anyway, and so must the
    # product that computes its argument
    bf16 = ConvertPrecision(precision="bf16")(copy(model))
    assert "grows with the inputs" in " ".join(str(i) for i in bf16.details["islands"])


def test_a_weight_read_in_both_types_is_stored_once(rng):
    """A weight read by a float32 island and by lowered nodes (an unrolled recurrence, a tied
    embedding) is stored once, in float32, and cast where lowered: a rounded second copy made
    the float16 model larger than its float32 input. The Cast rounds as the copy did."""
    model = parse("""
    g (float[4,64] x) => (float[4,64] y) {
        a = MatMul(x, W)
        b = Relu(a)
        c = MatMul(b, W)
        y = Tanh(c)
    }""", W=rng.standard_normal((64, 64)).astype(np.float32) * np.float32(0.1))
    for index, node in enumerate(model.graph.node):
        node.name = f"n{index}"
    result = ConvertPrecision(keep_float32=["n0"])(copy(model))
    assert result.modified and result.stats["weights_cast"] == 1, result.stats
    weights = [t for t in result.model.graph.initializer if list(t.dims) == [64, 64]]
    assert len(weights) == 1 and weights[0].data_type == onnx.TensorProto.FLOAT
    # a copy in float16 would add 8 KiB; a Cast and the precision record, a few hundred bytes
    assert result.model.ByteSize() < model.ByteSize() + 1024
    feeds = [{"x": rng.uniform(-1, 1, (4, 64)).astype(np.float32)}]
    assert check_parity(model, result.model, feeds=feeds).passed
    # a value too small for float16 among 4096 (1 in 295,000 of a GRU's recurrent weight) does
    # not make a second copy: the Cast makes it zero, which computes the same
    tiny = numpy_helper.to_array(model.graph.initializer[0]).copy()
    tiny[3, 5] = 1e-9
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(tiny, "W"))
    result = ConvertPrecision(keep_float32=["n0"])(copy(model))
    assert result.stats["weights_cast"] == 1 and result.stats["weights_copied"] == 0
    assert check_parity(model, result.model, feeds=feeds).passed


def test_a_running_sum_stays_float32_where_float16_additions_would_drift():
    """A CumSum of 3000 values near 1: added in float16 (onnx's reference evaluator computes
    each op in numpy float16) the sum drifts 1.3% of its RMS off past 2048, an error inside the
    op that rounding its inputs and output does not show. It stays float32, saying why; the
    true float16 run of what is written is within the tolerance."""
    from onnx.reference import ReferenceEvaluator

    model = parse("""
    g (float[1,3000] x) => (float[1,3000] y) {
        one = Constant <value = float {1.0}> ()
        a = Add (x, one)
        axis = Constant <value = int64 {1}> ()
        y = CumSum (a, axis)
    }""")
    result, _ = lowered(copy(model))
    cumsum = next(n for n in result.graph.node if n.op_type == "CumSum")
    types = tensor_types(result)
    assert types[cumsum.output[0]] == onnx.TensorProto.FLOAT
    x = np.random.default_rng(11).uniform(-1, 1, (1, 3000)).astype(np.float32)
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0].astype(np.float64)
    actual = ReferenceEvaluator(result).run(None, {"x": x})[0].astype(np.float64)
    assert np.all(np.abs(actual - expected) <= 1e-2 + 1e-2 * np.abs(expected))


def test_io_types_says_which_output_near_the_range_stays_float32() -> None:
    """--io-types fp16 lowers the signature; an output past float16's range (an initializer
    read out, at 1e5) stays float32, and the warning says so rather than that it is lowered."""
    model = parse("""
    g (float[N,64] x) => (float[N,128] y, float[4] big) {
        a = MatMul(x, W)
        y = Relu(a)
        big = Identity(C)
    }""", W=(np.random.default_rng(6).standard_normal((64, 128)) * 0.1).astype(np.float32),
        C=np.array([1.2e5, -1.6e5, 3e4, 5.0], np.float32))
    result = graphfix.optimize(model, precision="fp16", io_types="fp16", speed_gate=False)
    types = {o.name: o.type.tensor_type.elem_type for o in result.model.graph.output}
    assert types == {"y": onnx.TensorProto.FLOAT16, "big": onnx.TensorProto.FLOAT}
    [said] = [w for w in result.report.warnings if "'big'" in w]
    assert "stays float32" in said and "past the lowered type's largest value" in said, said


RMS_NORM = """
<ir_version: 10, opset_import: ["" : 23]>
g (float[4,64] x) => (float[4,64] y) {
    h = MatMul (x, w)
    y = RMSNormalization <axis = -1> (h, scale)
}"""


def _rms_norm() -> onnx.ModelProto:
    model = onnx.parser.parse_model(RMS_NORM)
    rng = np.random.default_rng(3)
    model.graph.initializer.extend([
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (64, 64)).astype(np.float32), "w"),
        onnx.numpy_helper.from_array(rng.uniform(0.5, 1.5, 64).astype(np.float32), "scale")])
    return model


def test_rms_normalization_is_lowered_with_its_input_as_onnx_infers_it() -> None:
    """Rule 6 of ops: onnx's inference types RMSNormalization's Y as its X, though the schema
    types it as the scale's; read as a slot of any type, X was fed float16 to a float32 norm
    and the lowered model failed the checker (the whole model kept float32)."""
    result = ConvertPrecision(weigh_casts=False)(_rms_norm())
    assert result.modified, result.skipped
    onnx.checker.check_model(result.model, full_check=True)
    assert result.stats["compute_nodes_lowered"] == 2


def test_a_node_the_checker_refuses_in_the_lowered_type_goes_back_alone(monkeypatch) -> None:
    """Where onnx's checker refuses the lowered model for a node's types, that node stays
    float32 and the rest is lowered, where the whole model was kept float32."""
    from graphfix.passes.convert_precision import ops

    monkeypatch.setattr(ops, "BOUND_BY_INFERENCE", {})  # the plan as it was: X any type
    # Lowered alone, the norm does not pay for its Casts (rule 17): it stays float32, fed the
    # MatMul's float16 output, and the checker refuses that model for the norm's types. The
    # MatMul feeding it goes back, and the search decides on what is left (here: nothing
    # pays), where the whole model was kept for an invalid lowering.
    result = ConvertPrecision()(_rms_norm())
    assert not result.modified and "invalid" not in result.skipped, result.skipped
    assert "lowering pays nowhere" in result.skipped


def _attention23(scale: float) -> onnx.ModelProto:
    """x @ Wq, x @ Wk, x @ Wv into an opset-23 Attention of 4 heads: its scores Q K^T, inside
    the node, grow as the square of ``scale`` while its output stays a mean of V's rows."""
    model = onnx.parser.parse_model("""
    <ir_version: 10, opset_import: ["" : 23]>
    g (float[2,8,64] x) => (float[2,8,64] y) {
        q = MatMul (x, wq)
        k = MatMul (x, wk)
        v = MatMul (x, wv)
        y = Attention <q_num_heads = 4, kv_num_heads = 4> (q, k, v)
    }""")
    rng = np.random.default_rng(5)
    for name, size in (("wq", scale), ("wk", scale), ("wv", 0.1)):
        model.graph.initializer.append(onnx.numpy_helper.from_array(
            (rng.standard_normal((64, 64)) * size).astype(np.float32), name))
    return model


def test_the_scores_inside_an_attention_op_are_measured_as_its_magnitude() -> None:
    """An opset-23 Attention's scores are no output: measured only by its output, it was
    lowered with no word of the range (inf and NaN at 300x its generated inputs). The first
    run reads them (qk_matmul_output): the range warning names the node, and scores near
    float16's largest value keep it float32."""
    result = ConvertPrecision(weigh_casts=False)(_attention23(0.3))
    assert result.modified
    [warning] = [w for w in result.warnings if "generated inputs" in w]
    assert "'Attention'" in warning, warning
    hot = ConvertPrecision(weigh_casts=False)(_attention23(30.0))
    assert hot.modified, hot.skipped
    [island] = hot.details["islands"]
    assert island["ops"] == {"Attention": 1} and "its scores" in island["why"][0], island
    # kept float32, it reads its float16 Q, K and V through Casts (ops rule 6: its function
    # body multiplies Q's type with V's), and ONNX Runtime runs the model
    import onnxruntime as ort

    x = np.random.default_rng(0).uniform(-1, 1, (2, 8, 64)).astype(np.float32)
    ort.InferenceSession(hot.model.SerializeToString(),
                         providers=["CPUExecutionProvider"]).run(None, {"x": x})
