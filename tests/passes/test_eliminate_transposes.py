from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from graphfix.errors import PassError
from graphfix.passes.eliminate_transposes import EliminateTransposes, eliminate_transposes

HEADER = '<ir_version: 8, opset_import: ["" : {opset}]>'


def parse(body: str, opset: int = 17) -> onnx.ModelProto:
    return onnx.parser.parse_model(HEADER.format(opset=opset) + body)


def ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def feeds_for(model: onnx.ModelProto, rng: np.random.Generator, dims: dict[str, int] | None = None
              ) -> dict[str, np.ndarray]:
    feeds = {}
    initializers = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in initializers:
            continue
        tensor_type = inp.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
                 else (dims or {}).get(d.dim_param, 2) for d in tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        if dtype == np.bool_:
            feeds[inp.name] = rng.integers(0, 2, shape).astype(bool)
        elif np.issubdtype(dtype, np.integer):
            feeds[inp.name] = rng.integers(-5, 5, shape).astype(dtype)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def optimize(model: onnx.ModelProto, ort_run, rng, *, exact: bool = True, dims=None, **options):
    """Run the pass on a copy; check validity and parity on ORT CPU with optimizations off."""
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = EliminateTransposes(**options)(model)
    assert result.model is model
    onnx.checker.check_model(model, full_check=True)
    assert [(o.name, o.type) for o in model.graph.output] == [
        (o.name, o.type) for o in original.graph.output]
    assert [(i.name, i.type) for i in model.graph.input] == [
        (i.name, i.type) for i in original.graph.input]
    feeds = feeds_for(original, rng, dims)
    expected = ort_run(original, feeds)
    actual = ort_run(model, feeds)
    assert expected.keys() == actual.keys()
    for name, value in expected.items():
        assert actual[name].dtype == value.dtype and actual[name].shape == value.shape, name
        if exact:
            np.testing.assert_array_equal(actual[name], value, err_msg=name)
        else:  # sum-like reductions add in another order
            np.testing.assert_allclose(actual[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    return result


# ------------------------------------------------------------------ rules 1-3
NHWC_RELU = """
g (float[1,8,8,3] x) => (float[1,8,8,3] y) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    r = Relu (t)
    y = Transpose <perm = [0, 2, 3, 1]> (r)
}"""


def test_inverse_pair_cancels_through_relu(ort_run, rng):
    result = optimize(parse(NHWC_RELU), ort_run, rng)
    assert ops(result.model) == ["Relu"]
    assert result.model.graph.node[0].output[0] == "y"
    assert result.modified
    assert result.stats["transposes_before"] == 2
    assert result.stats["transposes_after"] == 0
    assert result.stats["transposes_removed"] == 2
    assert result.stats["pushed_through"] == 1


def test_chain_composes_into_one(ort_run, rng):
    model = parse("""
    g (float[2,3,4,5] x) => (float[3,2,5,4] y) {
        a = Transpose <perm = [0, 2, 3, 1]> (x)
        b = Transpose <perm = [3, 0, 2, 1]> (a)
        y = Transpose <perm = [0, 1, 2, 3]> (b)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Transpose"]
    assert list(result.model.graph.node[0].attribute[0].ints) == [1, 0, 3, 2]


def test_identity_permutation_from_graph_input_to_output_becomes_identity(ort_run, rng):
    model = parse("""
    g (float[2,3] x) => (float[2,3] y) { y = Transpose <perm = [0, 1]> (x) }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Identity"]
    assert result.stats["transposes_after"] == 0


def test_identity_at_output_renames_the_producer(ort_run, rng):
    model = parse("""
    g (float[2,3] x) => (float[2,3] y) {
        r = Relu (x)
        y = Transpose <perm = [0, 1]> (r)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Relu"]
    assert result.model.graph.node[0].output[0] == "y"


def test_fold_shared_initializer_keeps_the_original(ort_run, rng):
    model = parse("""
    g (float[2,3] x) => (float[3,2] y, float[2,3] z) <float[2,3] w = {1,2,3,4,5,6}> {
        wt = Transpose <perm = [1, 0]> (w)
        xt = Transpose <perm = [1, 0]> (x)
        y = Mul (xt, wt)
        z = Add (x, w)
    }""")
    result = optimize(model, ort_run, rng)
    inits = {i.name: numpy_helper.to_array(i) for i in result.model.graph.initializer}
    np.testing.assert_array_equal(inits["w"], np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    assert result.stats["folded_into_constants"] >= 1
    assert "Transpose" in ops(result.model)  # xt feeds the graph output through Mul
    assert result.stats["transposes_after"] == 1


def test_fold_constant_node(ort_run, rng):
    model = parse("""
    g (float[3,2] x) => (float[3,2] y) {
        c = Constant <value = float[2,3] {1,2,3,4,5,6}> ()
        ct = Transpose <perm = [1, 0]> (c)
        y = Add (x, ct)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Add"]
    assert result.stats["folded_into_constants"] == 1


# ------------------------------------------------------------------ 4a unary
def test_unary_family_pushes(ort_run, rng):
    model = parse("""
    g (float[1,8,8,3] x) => (int32[1,8,8,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        a = Clip (t, lo, hi)
        b = LeakyRelu <alpha = 0.2> (a)
        c = HardSwish (b)
        d = Erf (c)
        e = Cast <to = 6> (d)
        y = Transpose <perm = [0, 2, 3, 1]> (e)
    }""", opset=14)
    model = parse("""
    g (float[1,8,8,3] x) => (int32[1,8,8,3] y) <float lo = {-1.0}, float hi = {2.0}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        a = Clip (t, lo, hi)
        b = LeakyRelu <alpha = 0.2> (a)
        c = HardSwish (b)
        d = Erf (c)
        e = Cast <to = 6> (d)
        y = Transpose <perm = [0, 2, 3, 1]> (e)
    }""", opset=14)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Clip", "LeakyRelu", "HardSwish", "Erf", "Cast"]


def test_unary_negative_feeds_graph_output_unchanged(ort_run, rng):
    model = parse("""
    g (float[1,8,8,3] x) => (float[1,3,8,8] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        y = Relu (t)
    }""")
    before = model.SerializeToString()
    result = optimize(model, ort_run, rng)
    assert not result.modified
    assert result.model.SerializeToString() == before


# ------------------------------------------------------------------ 4b binary
def test_binary_with_broadcast_constant(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x) => (float[1,4,4,3] y) <float[3,1,1] b = {1,2,3}, float s = {0.5}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        a = Add (t, b)
        m = Mul (s, a)
        y = Transpose <perm = [0, 2, 3, 1]> (m)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Add", "Mul"]
    (new_b,) = [i for i in result.model.graph.initializer if i.name != "s"]
    assert list(new_b.dims) == [3]  # [3,1,1] in NCHW is [3] in NHWC


def test_binary_two_transposed_operands_cancel(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x, float[1,4,4,3] z) => (float[1,4,4,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        u = Transpose <perm = [0, 3, 1, 2]> (z)
        a = Sub (t, u)
        w = Where (c, a, t)
        y = Transpose <perm = [0, 2, 3, 1]> (w)
        c = Greater (t, u)
    }""".replace("        c = Greater (t, u)\n", "").replace(
        "        a = Sub", "        c = Greater (t, u)\n        a = Sub"))
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Greater", "Sub", "Where"]


def test_binary_negative_non_constant_operand_would_add_a_transpose(ort_run, rng):
    # Pushing would need a Transpose on z and one before y: two for one.
    model = parse("""
    g (float[1,4,4,3] x, float[1,3,4,4] z) => (float[1,3,4,4] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        y = Add (t, z)
    }""")
    result = optimize(model, ort_run, rng)
    assert not result.modified
    assert ops(result.model) == ["Transpose", "Add"]


def test_binary_compensates_when_the_count_goes_down(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x, float[1,3,4,4] z) => (float[1,4,4,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        a = Add (t, z)
        y = Transpose <perm = [0, 2, 3, 1]> (a)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Transpose", "Add"]
    assert result.model.graph.node[0].input[0] == "z"


def test_prelu_slope_constant(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x) => (float[1,4,4,3] y) <float[3,1,1] slope = {0.1, 0.2, 0.3}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        p = PRelu (t, slope)
        y = Transpose <perm = [0, 2, 3, 1]> (p)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["PRelu"]


# ------------------------------------------------------------------ 4c Concat / Split
def test_concat_axis_remapped(ort_run, rng):
    model = parse("""
    g (float[1,3,4,4] a, float[1,3,4,4] b) => (float[1,6,4,4] y) {
        ta = Transpose <perm = [0, 2, 3, 1]> (a)
        tb = Transpose <perm = [0, 2, 3, 1]> (b)
        c = Concat <axis = 3> (ta, tb)
        y = Transpose <perm = [0, 3, 1, 2]> (c)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Concat"]
    assert helper.get_attribute_value(result.model.graph.node[0].attribute[0]) == 1


def test_concat_negative_output_and_non_constant_operand(ort_run, rng):
    model = parse("""
    g (float[1,3,4,4] a, float[1,4,4,3] b) => (float[1,4,4,6] y) {
        ta = Transpose <perm = [0, 2, 3, 1]> (a)
        y = Concat <axis = -1> (ta, b)
    }""")
    result = optimize(model, ort_run, rng)
    assert not result.modified


def test_split_axis_remapped(ort_run, rng):
    model = parse("""
    g (float[1,6,4,4] x) => (float[1,2,4,4] y, float[1,4,4,4] z) {
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        s1, s2 = Split <axis = 3> (t, sizes)
        y = Transpose <perm = [0, 3, 1, 2]> (s1)
        z = Transpose <perm = [0, 3, 1, 2]> (s2)
    }""".replace("(t, sizes)", "(t, sizes)"), opset=13)
    model = parse("""
    g (float[1,6,4,4] x) => (float[1,2,4,4] y, float[1,4,4,4] z) <int64[2] sizes = {2, 4}> {
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        s1, s2 = Split <axis = 3> (t, sizes)
        y = Transpose <perm = [0, 3, 1, 2]> (s1)
        z = Transpose <perm = [0, 3, 1, 2]> (s2)
    }""", opset=13)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Split"]


# ------------------------------------------------------------------ 4d Pad
@pytest.mark.parametrize("opset", [10, 11, 18])
def test_pad_pads_remapped(opset, ort_run, rng):
    if opset < 11:
        pad = "p = Pad <mode = \"constant\", pads = [0, 1, 2, 0, 0, 3, 0, 0]> (t)"
        init = ""
    elif opset < 18:
        pad = "p = Pad (t, pads)"
        init = "<int64[8] pads = {0, 1, 2, 0, 0, 3, 0, 0}>"
    else:
        pad = "p = Pad (t, pads, cv, axes)"
        init = "<int64[4] pads = {1, 2, 3, 0}, float cv = {1.5}, int64[2] axes = {1, 2}>"
    model = parse(f"""
    g (float[1,4,5,3] x) => (float[1,6,5,7] y) {init} {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        {pad}
        y = Transpose <perm = [0, 2, 3, 1]> (p)
    }}""", opset=opset)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Pad"]


def test_pad_with_pads_computed_at_run_time_reorders_them_with_a_gather(ort_run):
    # Case 4d: pads not constant (opset >= 11) are reordered at run time.
    model = parse("""
    g (float[1,4,5,3] x, int64[8] pads) => (float[1,?,?,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        p = Pad (t, pads)
        y = Transpose <perm = [0, 2, 3, 1]> (p)
    }""")
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = EliminateTransposes()(model)
    assert ops(result.model) == ["Gather", "Pad"]
    onnx.checker.check_model(result.model, full_check=True)
    x = np.arange(60, dtype=np.float32).reshape(1, 4, 5, 3)
    pads = np.array([0, 0, 1, 2, 0, 1, 0, 0], np.int64)  # NCHW: 0,0,1,2 before; 0,1,0,0 after
    np.testing.assert_array_equal(ort_run(result.model, {"x": x, "pads": pads})["y"],
                                  ort_run(original, {"x": x, "pads": pads})["y"])


# ------------------------------------------------------------------ 4e Slice
@pytest.mark.parametrize("with_axes", [True, False])
def test_slice_axes_remapped(with_axes, ort_run, rng):
    if with_axes:
        body = "s = Slice (t, starts, ends, axes)"
        init = "<int64[2] starts = {1, 0}, int64[2] ends = {3, 2}, int64[2] axes = {3, 1}>"
        out = "[1,4,2,2]"
    else:
        body = "s = Slice (t, starts, ends)"
        init = "<int64[3] starts = {0, 1, 1}, int64[3] ends = {1, 3, 4}>"
        out = "[1,3,5,2]"
    model = parse(f"""
    g (float[1,4,5,6] x) => (float{out} y) {init} {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        {body}
        y = Transpose <perm = [0, 2, 3, 1]> (s)
    }}""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Slice"]


def test_slice_negative_axes_not_constant(ort_run, rng):
    model = parse("""
    g (float[1,4,5,6] x, int64[1] axes) => (float[1,4,5,6] y) <int64[1] starts = {1}, int64[1] ends = {3}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        s = Slice (t, starts, ends, axes)
        y = Transpose <perm = [0, 2, 3, 1]> (s)
    }""")
    result = EliminateTransposes()(model)
    assert not result.modified


# ------------------------------------------------------------------ 4f Reduce / ArgMax
@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceSum"])
def test_reduce_axes_remapped(op, keepdims, opset, ort_run, rng):
    axes_as_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    init = "<int64[2] axes = {2, 3}>" if axes_as_input else ""
    call = f"{op} <keepdims = {keepdims}> (t, axes)" if axes_as_input else (
        f"{op} <keepdims = {keepdims}, axes = [2, 3]> (t)")
    out_shape = "[1,1,1,3]" if keepdims else "[1,3]"
    tail = ("y = Transpose <perm = [0, 2, 3, 1]> (r)" if keepdims else "y = Identity (r)")
    model = parse(f"""
    g (float[1,4,5,3] x) => (float{out_shape} y) {init} {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = {call}
        {tail}
    }}""", opset=opset)
    result = optimize(model, ort_run, rng, exact=op != "ReduceSum")
    assert "Transpose" not in ops(result.model)


def test_reduce_keepdims0_shrinks_the_permutation(ort_run, rng):
    model = parse("""
    g (float[2,3,4,5] x) => (float[2,5] y) {
        t = Transpose <perm = [3, 1, 0, 2]> (x)
        r = ReduceMax <axes = [1, 3], keepdims = 0> (t)
        y = Transpose <perm = [1, 0]> (r)
    }""", opset=13)
    result = optimize(model, ort_run, rng)
    # p' = (1, 0) on the kept axes cancels the trailing Transpose.
    assert ops(result.model) == ["ReduceMax"]
    axes = next(a for a in result.model.graph.node[0].attribute if a.name == "axes")
    assert list(axes.ints) == [1, 2]


def test_reduce_all_axes_and_noop_with_empty_axes(ort_run, rng):
    model = parse("""
    g (float[2,3,4] x) => (float y, float[2,3,4] z) <int64[0] none = {}> {
        t = Transpose <perm = [2, 0, 1]> (x)
        y = ReduceMax <keepdims = 0> (t)
        n = ReduceMax <noop_with_empty_axes = 1> (t, none)
        z = Transpose <perm = [1, 2, 0]> (n)
    }""", opset=18)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["ReduceMax", "ReduceMax"]


def test_argmax_axis_remapped(ort_run, rng):
    model = parse("""
    g (float[2,3,4] x) => (int64[4,1,2] y) {
        t = Transpose <perm = [2, 1, 0]> (x)
        a = ArgMax <axis = 1, keepdims = 1> (t)
        y = Identity (a)
    }""", opset=13)
    model = parse("""
    g (float[2,3,4] x) => (int64[2,1,4] y) {
        t = Transpose <perm = [2, 1, 0]> (x)
        a = ArgMax <axis = 1, keepdims = 1> (t)
        y = Transpose <perm = [2, 1, 0]> (a)
    }""", opset=13)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["ArgMax"]


def test_reduce_negative_order_sensitive_when_asked_for_exactness(ort_run, rng):
    model = parse("""
    g (float[1,4,5,3] x) => (float[1,1,1,3] y, float[1,1,1,3] z) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        s = ReduceMean <axes = [2, 3]> (t)
        m = ReduceMin <axes = [2, 3]> (t)
        y = Transpose <perm = [0, 2, 3, 1]> (s)
        z = Transpose <perm = [0, 2, 3, 1]> (m)
    }""", opset=13)
    result = optimize(model, ort_run, rng, reorder_reductions=False)
    # The Transpose before ReduceMean stays; those after the reductions only move size-1 dims.
    assert ops(result.model) == ["Transpose", "ReduceMean", "ReduceMin", "Reshape", "Reshape"]
    assert "ReduceMean" in ops(result.model)


# ------------------------------------------------------------------ 4g Softmax
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_softmax_axis_remapped_opset13(op, ort_run, rng):
    model = parse(f"""
    g (float[2,4,5,3] x) => (float[2,4,5,3] y) {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        s = {op} <axis = 1> (t)
        y = Transpose <perm = [0, 2, 3, 1]> (s)
    }}""", opset=13)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == [op]
    assert helper.get_attribute_value(result.model.graph.node[0].attribute[0]) == 3


SOFTMAX11_ROW_REORDERED = """
    g (float[2,4,5,3] x) => (float[2,4,5,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        s = Softmax <axis = 1> (t)
        y = Transpose <perm = [0, 2, 3, 1]> (s)
    }"""


def test_softmax_opset11_permutation_inside_the_row_pushes_as_a_reduction(ort_run, rng):
    # Before opset 13 each row is the flattened axes 1.. : [0,3,1,2] keeps the batch a row of
    # its own, so every row holds the same elements, summed in another order (case 4g).
    result = optimize(parse(SOFTMAX11_ROW_REORDERED, opset=11), ort_run, rng, exact=False)
    assert ops(result.model) == ["Softmax"]


def test_softmax_opset11_row_reordered_is_kept_for_bit_identical_outputs(ort_run, rng):
    result = optimize(parse(SOFTMAX11_ROW_REORDERED, opset=11), ort_run, rng,
                      reorder_reductions=False)
    assert not result.modified


def test_softmax_opset11_negative_permutation_crosses_coercion(ort_run, rng):
    model = parse("""
    g (float[2,4,5,3] x) => (float[2,4,5,3] y) {
        t = Transpose <perm = [2, 1, 0, 3]> (x)
        s = Softmax <axis = 2> (t)
        y = Transpose <perm = [2, 1, 0, 3]> (s)
    }""", opset=11)
    result = optimize(model, ort_run, rng)
    assert not result.modified


def test_softmax_opset11_leading_block_permutation_pushes(ort_run, rng):
    model = parse("""
    g (float[2,4,5,3] x) => (float[2,4,5,3] y) {
        t = Transpose <perm = [1, 0, 2, 3]> (x)
        s = Softmax <axis = 2> (t)
        y = Transpose <perm = [1, 0, 2, 3]> (s)
    }""".replace("float[2,4,5,3] y", "float[2,4,5,3] y"), opset=11)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Softmax"]


# ------------------------------------------------------------------ 4h Squeeze / Unsqueeze
@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_after_global_pool(opset, ort_run, rng):
    squeeze = ("q = Squeeze <axes = [1, 2]> (t)" if opset < 13 else "q = Squeeze (t, axes)")
    init = "" if opset < 13 else "<int64[2] axes = {1, 2}>"
    model = parse(f"""
    g (float[2,1,1,5] x) => (float[5,2] y) {init} {{
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        q = Squeeze_placeholder
        y = Transpose <perm = [1, 0]> (q)
    }}""".replace("q = Squeeze_placeholder", squeeze), opset=opset)
    model = parse(f"""
    g (float[2,5,1,1] x) => (float[5,2] y) {init} {{
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        {squeeze}
        y = Transpose <perm = [1, 0]> (q)
    }}""", opset=opset)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Squeeze", "Transpose"]
    assert result.stats["transposes_after"] == 1


@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze_grows_the_permutation(opset, ort_run, rng):
    unsqueeze = ("u = Unsqueeze <axes = [0, 3]> (t)" if opset < 13 else "u = Unsqueeze (t, axes)")
    init = "" if opset < 13 else "<int64[2] axes = {0, 3}>"
    model = parse(f"""
    g (float[2,3,4] x) => (float[1,4,2,1,3] y) {init} {{
        t = Transpose <perm = [2, 0, 1]> (x)
        {unsqueeze}
        r = Relu (u)
        y = Transpose <perm = [0, 1, 2, 3, 4]> (r)
    }}""", opset=opset)
    result = optimize(model, ort_run, rng)
    assert ops(result.model).count("Transpose") == 1


def test_squeeze_negative_axes_unknown(ort_run, rng):
    model = parse("""
    g (float[2,5,3,1] x, int64[1] axes) => (float[2,3,5] y) {
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        y = Squeeze (t, axes)
    }""", opset=13)
    result = EliminateTransposes()(model)
    assert not result.modified


# ------------------------------------------------------------------ 4i Q/DQ
def test_quantize_dequantize_per_axis(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x) => (float[1,4,4,3] y) <float[3] scale = {0.1, 0.2, 0.3}, int8[3] zp = {0, 1, -1}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        q = QuantizeLinear <axis = 1> (t, scale, zp)
        d = DequantizeLinear <axis = 1> (q, scale, zp)
        y = Transpose <perm = [0, 2, 3, 1]> (d)
    }""", opset=13)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["QuantizeLinear", "DequantizeLinear"]
    assert all(helper.get_attribute_value(n.attribute[0]) == 3 for n in result.model.graph.node)


def test_quantize_per_tensor(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x) => (float[1,4,4,3] y) <float scale = {0.05}, uint8 zp = {128}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        q = QuantizeLinear (t, scale, zp)
        d = DequantizeLinear (q, scale, zp)
        y = Transpose <perm = [0, 2, 3, 1]> (d)
    }""", opset=13)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["QuantizeLinear", "DequantizeLinear"]


# ------------------------------------------------------------------ fan-out and boundaries
def test_fan_out_pushed_into_every_consumer(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x) => (float[1,4,4,3] y, float[1,4,4,3] z) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Relu (t)
        s = Sigmoid (t)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
        z = Transpose <perm = [0, 2, 3, 1]> (s)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Relu", "Sigmoid"]


def test_fan_out_negative_one_consumer_is_a_barrier(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x) => (float[1,4,4,3] y, float[1,3,8,8] z) <float[4] scales = {1, 1, 2, 2}, float[0] roi = {}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        z = Resize (t, roi, scales)
        y = Transpose <perm = [0, 2, 3, 1]> (t)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Transpose", "Resize", "Identity"]
    assert result.stats["transposes_after"] == 1


def test_transpose_on_graph_output_stays(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x) => (float[1,3,4,4] t, float[1,4,4,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Relu (t)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""")
    result = optimize(model, ort_run, rng)
    assert not result.modified
    assert ops(result.model) == ["Transpose", "Relu", "Transpose"]
    assert [o.name for o in result.model.graph.output] == ["t", "y"]


def test_dynamic_batch(ort_run, rng):
    model = parse("""
    g (float[N,8,8,3] x) => (float[N,8,8,3] y) <float[3] b = {1, 2, 3}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Relu (t)
        y0 = Transpose <perm = [0, 2, 3, 1]> (r)
        y = Add (y0, b)
    }""")
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = optimize(model, ort_run, rng, dims={"N": 3})
    assert ops(result.model) == ["Relu", "Add"]
    x = rng.standard_normal((5, 8, 8, 3)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"],
                                  ort_run(original, {"x": x})["y"])


def test_ndhwc_5d(ort_run, rng):
    model = parse("""
    g (float[1,2,4,4,3] x) => (float[1,2,4,4,3] y, float[1,3] z) <float[3] b = {1, 2, 3}> {
        t = Transpose <perm = [0, 4, 1, 2, 3]> (x)
        bt = Transpose <perm = [0, 4, 1, 2, 3]> (b5)
        a = Add (t, bt)
        m = Relu (a)
        z = ReduceMax <axes = [2, 3, 4], keepdims = 0> (m)
        y = Transpose <perm = [0, 2, 3, 4, 1]> (m)
    }""".replace("(b5)", "(b5)"), opset=13)
    model = parse("""
    g (float[1,2,4,4,3] x) => (float[1,2,4,4,3] y, float[1,3] z) <float[1,1,1,1,3] b5 = {1, 2, 3}> {
        t = Transpose <perm = [0, 4, 1, 2, 3]> (x)
        bt = Transpose <perm = [0, 4, 1, 2, 3]> (b5)
        a = Add (t, bt)
        m = Relu (a)
        z = ReduceMax <axes = [2, 3, 4], keepdims = 0> (m)
        y = Transpose <perm = [0, 2, 3, 4, 1]> (m)
    }""", opset=13)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Add", "Relu", "ReduceMax"]


def test_size_one_move_becomes_reshape(ort_run, rng):
    model = parse("""
    g (float[2,5,4,4] x) => (float[2,1,1,5] y) {
        p = GlobalAveragePool (x)
        y = Transpose <perm = [0, 2, 3, 1]> (p)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["GlobalAveragePool", "Reshape"]
    assert result.stats["converted_to_reshape"] == 1


def test_non_default_domain_is_a_barrier():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17, "custom.domain" : 1]>
    g (float[1,4,4,3] x) => (float[1,4,4,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = custom.domain.Relu (t)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""")
    result = EliminateTransposes()(model)
    assert not result.modified
    assert ops(result.model) == ["Transpose", "Relu", "Transpose"]


def test_reshape_mixing_permuted_axes_is_a_barrier(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x) => (float[1,4,12] y) <int64[3] shape = {1, 4, 12}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        y = Reshape (t, shape)
    }""")
    result = optimize(model, ort_run, rng)
    assert not result.modified


# ------------------------------------------------------------------ subgraphs
IF_MODEL = """
g (bool c, float[1,4,4,3] x) => (float[1,4,4,3] y) {
    outer = Transpose <perm = [0, 3, 1, 2]> (x)
    y = If (c) <
        then_branch = t () => (float[1,4,4,3] ty) {
            a = Transpose <perm = [0, 3, 1, 2]> (x)
            r = Relu (a)
            ty = Transpose <perm = [0, 2, 3, 1]> (r)
        },
        else_branch = e () => (float[1,4,4,3] ey) {
            s = Sigmoid (outer)
            ey = Transpose <perm = [0, 2, 3, 1]> (s)
        }
    >
}"""


def test_inside_if_body_and_outer_scope_reference_kept(ort_run, rng):
    model = parse(IF_MODEL)
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = EliminateTransposes()(model)
    onnx.checker.check_model(model, full_check=True)
    assert ops(model) == ["Transpose", "If"]
    then_branch = model.graph.node[1].attribute[0].g
    assert [n.op_type for n in then_branch.node] == ["Relu"]
    x = rng.standard_normal((1, 4, 4, 3)).astype(np.float32)
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": x}
        np.testing.assert_array_equal(ort_run(model, feeds)["y"], ort_run(original, feeds)["y"])
    assert result.stats["transposes_before"] == 4
    assert result.stats["transposes_after"] == 2


# ------------------------------------------------------------------ realistic CNN
def _nhwc_cnn(opset: int = 13, batch: int | str = 1) -> onnx.ModelProto:
    """A converter-style NHWC CNN: every Conv wrapped in Transpose(0,3,1,2) ... (0,2,3,1)."""
    rng = np.random.default_rng(1)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    count = [0]

    def name(base: str) -> str:
        count[0] += 1
        return f"{base}{count[0]}"

    def const(value: np.ndarray, base: str) -> str:
        n = name(base)
        inits.append(numpy_helper.from_array(value, n))
        return n

    def conv_nhwc(x: str, cin: int, cout: int, k: int) -> str:
        t, c, o = name("to_nchw"), name("conv"), name("to_nhwc")
        w = const(rng.standard_normal((cout, cin, k, k)).astype(np.float32) * 0.3, "w")
        b = const(rng.standard_normal(cout).astype(np.float32) * 0.1, "b")
        nodes.append(helper.make_node("Transpose", [x], [t], perm=[0, 3, 1, 2]))
        nodes.append(helper.make_node("Conv", [t, w, b], [c], pads=[k // 2] * 4))
        nodes.append(helper.make_node("Transpose", [c], [o], perm=[0, 2, 3, 1]))
        return o

    def op(op_type: str, inputs: list[str], **attrs) -> str:
        out = name(op_type.lower())
        nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    pads = const(np.array([0, 1, 1, 0, 0, 1, 1, 0], np.int64), "pads")
    lo, hi = const(np.array(0, np.float32), "lo"), const(np.array(6, np.float32), "hi")
    h = op("Pad", ["x", pads])
    h = conv_nhwc(h, 3, 8, 3)
    h = op("Clip", [h, lo, hi])
    skip = h
    h = conv_nhwc(h, 8, 8, 3)
    h = op("Clip", [h, lo, hi])
    h = conv_nhwc(h, 8, 8, 1)
    h = op("Add", [h, skip])
    h = op("Mul", [h, const(rng.standard_normal(8).astype(np.float32), "gamma")])
    branch = conv_nhwc(h, 8, 4, 1)
    h = op("Concat", [h, branch], axis=3)
    pooled = op("ReduceMean", [h], axes=[1, 2], keepdims=0)
    h = conv_nhwc(h, 12, 6, 1)
    h = op("ReduceMax", [h], axes=[1, 2], keepdims=1)
    if opset >= 13:
        squeezed = op("Squeeze", [h, const(np.array([1, 2], np.int64), "axes")])
    else:
        squeezed = op("Squeeze", [h], axes=[1, 2])
    nodes.append(helper.make_node("Identity", [pooled], ["pooled"]))
    nodes.append(helper.make_node("Identity", [squeezed], ["logits"]))
    graph = helper.make_graph(
        nodes, "nhwc_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 8, 3])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [batch, 12]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 6])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_nhwc_cnn_ends_without_interior_transposes(opset, ort_run, rng):
    model = _nhwc_cnn(opset)
    result = optimize(model, ort_run, rng, exact=False)
    transposes = [n for n in model.graph.node if n.op_type == "Transpose"]
    assert len(transposes) <= 1
    for node in transposes:  # the boundary one: right after the Pad that reads the input
        producer = next(n for n in model.graph.node if node.input[0] in n.output)
        assert producer.op_type == "Pad" and producer.input[0] == "x"
    assert result.stats["transposes_before"] == 10
    assert result.stats["transposes_removed"] >= 9


def test_nhwc_cnn_bit_exact_without_reordered_reductions(ort_run, rng):
    model = _nhwc_cnn(13, batch="N")
    result = optimize(model, ort_run, rng, reorder_reductions=False, dims={"N": 2})
    assert result.stats["transposes_after"] < result.stats["transposes_before"]


def test_idempotent_and_deterministic():
    first, second = _nhwc_cnn(17), _nhwc_cnn(17)
    r1 = EliminateTransposes()(first)
    r2 = EliminateTransposes()(second)
    assert r1.modified
    assert first.SerializeToString() == second.SerializeToString()
    again = EliminateTransposes()(first)
    assert not again.modified
    assert again.stats["transposes_removed"] == 0
    assert r2.stats == r1.stats


def test_nothing_to_do_is_not_modified():
    model = parse("""
    g (float[2,3] x) => (float[2,3] y) { y = Relu (x) }""")
    before = model.SerializeToString()
    result = EliminateTransposes()(model)
    assert not result.modified
    assert model.SerializeToString() == before
    assert result.stats["transposes_before"] == 0


def test_function_twin_rewrites_in_place():
    model = parse(NHWC_RELU)
    assert eliminate_transposes(model) is model
    assert ops(model) == ["Relu"]


def test_value_info_of_rewired_tensors_stays_consistent(ort_run, rng):
    model = parse(NHWC_RELU)
    model = onnx.shape_inference.infer_shapes(model)
    assert {v.name for v in model.graph.value_info} == {"t", "r"}
    optimize(model, ort_run, rng)
    assert {v.name for v in model.graph.value_info} == set()


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_options_validated(bad):
    with pytest.raises(PassError):
        EliminateTransposes(reorder_reductions=bad)


# ------------------------------------------------------------------ regressions
def test_regression_compensating_transpose_of_size_one_dims_is_idempotent(ort_run, rng):
    # Found by the property test: the compensating Transpose on z only moves a size-1 dim; its
    # shape was unknown to the first run (a fresh tensor), so the second run turned it into a
    # Reshape and reported modified=True.
    model = parse("""
    g (float[1,4,4,3] x, float[1,1,4,4] z) => (float[1,4,4,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        a = Add (t, z)
        y = Transpose <perm = [0, 2, 3, 1]> (a)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Reshape", "Add"]
    assert not EliminateTransposes()(model).modified


def test_regression_operand_transpose_of_an_initializer_keeps_the_initializer(ort_run, rng):
    # The operand's Transpose was dropped before the node read its source, which removed the
    # initializer it still needed.
    model = parse("""
    g (float[1,2,2,3] x) => (float[1,2,2,3] y) <float[1,2,2,3] k = {1,2,3,4,5,6,7,8,9,10,11,12}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        kt = Transpose <perm = [0, 3, 1, 2]> (k)
        a = Mul (t, kt)
        y = Transpose <perm = [0, 2, 3, 1]> (a)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Mul"]


def test_regression_ir3_new_constants_are_not_made_for_a_size_one_move(ort_run, rng):
    # At IR 3 every initializer must also be a graph input; the shape of rule 5's Reshape would
    # have to be a Constant node (onnx's pytorch-operator permute2): one node more, so the
    # Transpose stays (the pipeline raises such a model to IR 4 first).
    model = onnx.parser.parse_model("""
    <ir_version: 3, opset_import: ["" : 9]>
    g (float[2,5,1,1] x) => (float[2,1,1,5] y) {
        y = Transpose <perm = [0, 2, 3, 1]> (x)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Transpose"]
    assert [i.name for i in result.model.graph.input] == ["x"]
    assert not result.model.graph.initializer


def test_residual_blocks_share_the_input_transpose(ort_run, rng):
    # Each block's Add reads the previous block's NHWC output: the compensation for the graph
    # input reuses the existing Transpose(0,3,1,2) on x, and the Transposes arriving through
    # Relu/Mul chains are seen by the cost check.
    model = parse("""
    g (float[1,4,4,2] x) => (float[1,2] y) <float[2,2,1,1] w0 = {1, 0.5, -0.5, 1}, float[2,2,1,1] w1 = {0.5, 1, 1, -1}, float[2] g = {0.5, 2}> {
        a0 = Transpose <perm = [0, 3, 1, 2]> (x)
        c0 = Conv (a0, w0)
        d0 = Transpose <perm = [0, 2, 3, 1]> (c0)
        r0 = Relu (d0)
        m0 = Mul (r0, g)
        o0 = Add (m0, x)
        a1 = Transpose <perm = [0, 3, 1, 2]> (o0)
        c1 = Conv (a1, w1)
        d1 = Transpose <perm = [0, 2, 3, 1]> (c1)
        r1 = Relu (d1)
        o1 = Add (r1, o0)
        y = ReduceMax <axes = [1, 2], keepdims = 0> (o1)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Transpose", "Conv", "Relu", "Mul", "Add", "Conv", "Relu", "Add",
                                 "ReduceMax"]


def test_loop_body_optimized_and_outer_transpose_kept(ort_run, rng):
    model = parse("""
    g (int64 n, bool c, float[2,3] x) => (float[3,2] y) {
        t = Transpose <perm = [1, 0]> (x)
        y = Loop (n, c, t) <
            body = b (int64 i, bool ci, float[3,2] acc) => (bool co, float[3,2] out) {
                co = Identity (ci)
                u = Transpose <perm = [1, 0]> (acc)
                r = Relu (u)
                v = Transpose <perm = [1, 0]> (r)
                out = Add (v, t)
            }
        >
    }""")
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = EliminateTransposes()(model)
    onnx.checker.check_model(model, full_check=True)
    assert ops(model) == ["Transpose", "Loop"]
    body = model.graph.node[1].attribute[0].g
    assert [n.op_type for n in body.node] == ["Identity", "Relu", "Add"]
    feeds = {"n": np.array(3, np.int64), "c": np.array(True), "x": rng.standard_normal((2, 3))
             .astype(np.float32)}
    np.testing.assert_array_equal(ort_run(model, feeds)["y"], ort_run(original, feeds)["y"])
    assert result.stats["transposes_after"] == 1


def _relu_chain(length: int, *, inverse_at_end: bool) -> onnx.ModelProto:
    nodes = [helper.make_node("Transpose", ["x"], ["h0"], perm=[0, 3, 1, 2])]
    nodes += [helper.make_node("Relu", [f"h{i}"], [f"h{i + 1}"]) for i in range(length)]
    if inverse_at_end:
        nodes.append(helper.make_node("Transpose", [f"h{length}"], ["y"], perm=[0, 2, 3, 1]))
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 2, 3])
    else:
        out = helper.make_tensor_value_info(f"h{length}", TensorProto.FLOAT, [1, 3, 2, 2])
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2, 3])],
        [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_regression_inverse_beyond_the_look_ahead_still_cancels(ort_run, rng):
    # 300 Relus lie between the pair, more than the cost check looks ahead: the Transpose walks
    # the chain a step at a time (each step keeps the count) until the pair is in sight.
    model = _relu_chain(300, inverse_at_end=True)
    result = optimize(model, ort_run, rng)
    assert result.stats["transposes_after"] == 0
    assert not EliminateTransposes()(model).modified


def test_long_chain_to_a_graph_output_keeps_its_transpose_and_is_idempotent(ort_run, rng):
    model = _relu_chain(300, inverse_at_end=False)
    result = optimize(model, ort_run, rng)
    assert result.stats["transposes_after"] == 1
    assert not EliminateTransposes()(model).modified


def test_regression_x_plus_its_transpose_does_not_oscillate(ort_run, rng):
    # Found by the property test: pushing T(x) through Add(x, T(x)) needs T(x) on the other
    # operand again; the two traded places up to the push limit and a second run changed more.
    model = parse("""
    g (float[1,2,2,1] x) => (float[1,2,2,1] y, float[1,2,2,1] z) {
        t = Transpose <perm = [0, 2, 1, 3]> (x)
        unused = Transpose <perm = [0, 2, 1, 3]> (x)
        a = Add (x, t)
        y = Transpose <perm = [0, 2, 1, 3]> (a)
        z = Transpose <perm = [0, 1, 2, 3]> (x)
    }""", opset=11)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Transpose", "Add", "Transpose", "Identity"]
    assert result.stats["pushed_through"] == 0
    assert not EliminateTransposes()(model).modified


def test_regression_pending_identity_is_settled_before_the_next_push(ort_run, rng):
    # Found by the property test: a push composed a consumer Transpose into the identity and a
    # later push composed it back before the identity was dropped; the pair chased each other.
    model = parse("""
    g (float[2,2,2,1] x) => (float[2,2,2] s, float[2,2,2,1] y) {
        s = Squeeze <axes = [3]> (x)
        t = Transpose <perm = [1, 0, 2, 3]> (x)
        u = Unsqueeze <axes = [3]> (s)
        a = Add (u, t)
        unused = Transpose <perm = [1, 0, 2, 3]> (a)
        b = Add (a, a)
        y = Transpose <perm = [0, 1, 2, 3]> (b)
    }""", opset=11)
    result = optimize(model, ort_run, rng)
    assert result.stats["transposes_after"] == 1
    assert result.stats["pushed_through"] <= 4
    assert not EliminateTransposes()(model).modified


def test_regression_source_renamed_to_an_output_during_a_fan_out_push(ort_run, rng):
    # Found by the property test: composing into the first consumer gave an identity at a graph
    # output, which renamed the shared source; the second consumer then read the old name.
    model = parse("""
    g (float[2,3] x) => (float[2,3] y, float[3,2] z) {
        r = Relu (x)
        t = Transpose <perm = [1, 0]> (r)
        y = Transpose <perm = [1, 0]> (t)
        z = Transpose <perm = [0, 1]> (t)
    }""", opset=11)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Relu", "Transpose"]
    assert not EliminateTransposes()(model).modified


def test_regression_operand_transposed_from_the_pushed_tensor(ort_run, rng):
    # Found by the property test: Add(t, T(t)) with t = T(p)(u): undoing T(p) on the second
    # operand pointed at t itself, whose Transpose the push removed (a dangling input).
    model = parse("""
    g (float[3,1] x) => (float[1,1] y) <int64[2] sizes = {1, 2}> {
        s1, s2 = Split <axis = 0> (x, sizes)
        t6 = Transpose <perm = [1, 0]> (s1)
        a7 = Add (s1, s1)
        a8 = Add (t6, a7)
        t9 = Transpose <perm = [1, 0]> (a8)
        t10 = Transpose <perm = [0, 1]> (t9)
        y = Add (a8, t10)
    }""", opset=13)
    optimize(model, ort_run, rng)
    assert not EliminateTransposes()(model).modified


def test_regression_compensation_waits_for_the_arriving_transpose(ort_run, rng):
    # Found by a random search: the compensation on sub was counted as cancelled by the
    # Transpose coming down through Sub, but was pushed on first; the two chased each other
    # round the Add up to the push limit.
    model = parse("""
    g (float[2,3] x) => (float[3,2] y) <float c = {0}> {
        t2 = Transpose <perm = [1, 0]> (x)
        t3 = Transpose <perm = [1, 0]> (x)
        n = Neg (t2)
        s = Sub (t3, c)
        y = Add (s, n)
    }""", opset=11)
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Neg", "Sub", "Add", "Transpose"]
    assert result.stats["pushed_through"] == 3
    assert not EliminateTransposes()(model).modified


def test_swish_reads_the_pushed_tensor_twice(ort_run, rng):
    # t * Sigmoid(t) before a global pool (EfficientNet's head): the operand Sigmoid(t) of the
    # Mul is counted as carrying the pushed Transpose, since the push moves it past both
    # readers of t; the Transpose then vanishes into the reduction.
    model = parse("""
    g (float[1,3,4,4] x) => (float[1,3] y) {
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        s = Sigmoid (t)
        m = Mul (t, s)
        y = ReduceMean <axes = [1, 2], keepdims = 0> (m)
    }""", opset=13)
    result = optimize(model, ort_run, rng, exact=False)
    assert ops(result.model) == ["Sigmoid", "Mul", "ReduceMean"]
    assert not EliminateTransposes()(result.model).modified


# ------------------------------------------------------------------ raw tf2onnx patterns
# Conv1D as tf2onnx writes it: Unsqueeze(axis 1) -> T(0,3,1,2) -> Conv -> T(0,2,3,1) -> Squeeze,
# the Unsqueeze axes computed from a constant (Cast), as in its output without optimizers.
CONV1D_TWICE = """
g (float[N,16,4] x) => (float[N,16,6] y) {
    ax = Cast <to = 7> (ax32)
    u = Unsqueeze (x, ax)
    t = Transpose <perm = [0, 3, 1, 2]> (u)
    c = Conv <pads = [0, 1, 0, 1]> (t, w1)
    b = Transpose <perm = [0, 2, 3, 1]> (c)
    s = Squeeze (b, ax)
    r = Relu (s)
    u2 = Unsqueeze (r, ax)
    t2 = Transpose <perm = [0, 3, 1, 2]> (u2)
    c2 = Conv <pads = [0, 1, 0, 1]> (t2, w2)
    b2 = Transpose <perm = [0, 2, 3, 1]> (c2)
    y = Squeeze (b2, ax)
}"""


def _conv1d_model(body: str) -> onnx.ModelProto:
    model = parse(body, opset=13)
    rng = np.random.default_rng(7)
    model.graph.initializer.extend([
        numpy_helper.from_array(np.array([1], np.int32), "ax32"),
        numpy_helper.from_array(rng.standard_normal((5, 4, 1, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((6, 5, 1, 3)).astype(np.float32), "w2"),
    ])
    return model


def test_conv1d_transposes_are_absorbed_into_the_unsqueezes(ort_run, rng):
    # Rule 6 plus the folded Cast axes: what stays is the NWC input's and output's Transposes.
    result = optimize(_conv1d_model(CONV1D_TWICE), ort_run, rng, dims={"N": 2})
    assert ops(result.model).count("Transpose") == 2
    assert ops(result.model).count("Conv") == 2
    unsqueezes = [n for n in result.model.graph.node if n.op_type == "Unsqueeze"]
    # The second Unsqueeze now inserts the size-1 axis where the Conv wants it (NCHW: axis 2).
    axes = {i.name: numpy_helper.to_array(i) for i in result.model.graph.initializer}
    assert [axes[n.input[1]].tolist() if n.input[1] in axes else None for n in unsqueezes][1] \
        == [2]


def test_unsqueeze_negative_permutation_moves_the_kept_axes(ort_run, rng):
    # T(0,3,1,2) after Unsqueeze(axis 1) also moves C before T: not a size-1 move, kept.
    model = parse("""
    g (float[2,16,4] x) => (float[2,4,1,16] y) {
        u = Unsqueeze (x, ax)
        y = Transpose <perm = [0, 3, 1, 2]> (u)
    }""", opset=13)
    model.graph.initializer.append(numpy_helper.from_array(np.array([1], np.int64), "ax"))
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Unsqueeze", "Transpose"] and not result.modified


def test_unsqueeze_absorbs_a_size_one_move_opset11(ort_run, rng):
    model = parse("""
    g (float[2,16,4] x) => (float[2,4,16] y) {
        u = Unsqueeze <axes = [1]> (x)
        t = Transpose <perm = [0, 2, 1, 3]> (u)
        r = Relu (t)
        y = Squeeze <axes = [2]> (r)
    }""", opset=11)
    # u: [2,1,16,4] -> t: [2,16,1,4]: only the inserted axis moves.
    model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 16
    model.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 4
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Unsqueeze", "Relu", "Squeeze"]
    assert list(result.model.graph.node[0].attribute[0].ints) == [2]


def test_transpose_of_a_reshaped_kernel_folds_and_the_reshape_goes(ort_run, rng):
    # tf2onnx's depthwise kernel: Transpose(Reshape(W[3,3,4,1], [3,3,1,4]), perm 3,2,0,1).
    model = parse("""
    g (float[1,4,8,8] x) => (float[1,4,8,8] y) {
        k = Reshape (w, shape)
        kt = Transpose <perm = [3, 2, 0, 1]> (k)
        y = Conv <group = 4, pads = [1, 1, 1, 1]> (x, kt)
    }""")
    model.graph.initializer.extend([
        numpy_helper.from_array(rng.standard_normal((3, 3, 4, 1)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([3, 3, 1, 4], np.int64), "shape"),
    ])
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Conv"]
    assert {i.name for i in result.model.graph.initializer}.isdisjoint({"w", "shape"})
    assert result.stats["folded_into_constants"] == 1


def test_cast_of_a_constant_operand_is_rewritten_not_compensated(ort_run, rng):
    model = parse("""
    g (float[1,4,4,3] x) => (float[1,4,4,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        c = Cast <to = 1> (ci)
        m = Mul (t, c)
        y = Transpose <perm = [0, 2, 3, 1]> (m)
    }""")
    model.graph.initializer.append(numpy_helper.from_array(
        np.array([1, 2, 3], np.int64).reshape(1, 3, 1, 1), "ci"))
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Mul"]


def test_cast_float_to_int_constant_is_not_folded(ort_run, rng):
    # numpy and ONNX Runtime may round such a cast differently: it stays a computed operand.
    model = parse("""
    g (int64[1,4,4,3] x) => (int64[1,4,4,3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        c = Cast <to = 7> (cf)
        m = Mul (t, c)
        y = Transpose <perm = [0, 2, 3, 1]> (m)
    }""")
    model.graph.initializer.append(numpy_helper.from_array(
        np.array([1.5, 2.5, -3.5], np.float32).reshape(1, 3, 1, 1), "cf"))
    result = optimize(model, ort_run, rng)
    assert "Cast" in ops(result.model)


def test_swish_after_a_squeeze_is_seen_by_the_look_ahead(ort_run, rng):
    # Conv1D -> Swish -> global average pool: the Transpose is pushed through the Squeeze into
    # a Swish whose Mul reads the squeezed tensor twice; the look-ahead must see the planned
    # Transpose arrive at both operands (it used to count a compensation and keep it).
    model = parse("""
    g (float[N,16,4] x) => (float[N,6] y) {
        u = Unsqueeze (x, ax)
        t = Transpose <perm = [0, 3, 1, 2]> (u)
        c = Conv <pads = [0, 1, 0, 1]> (t, w2)
        b = Transpose <perm = [0, 2, 3, 1]> (c)
        s = Squeeze (b, ax)
        g = Sigmoid (s)
        m = Mul (s, g)
        y = ReduceMean <axes = [1], keepdims = 0> (m)
    }""", opset=13)
    model.graph.initializer.extend([
        numpy_helper.from_array(np.array([1], np.int64), "ax"),
        numpy_helper.from_array(rng.standard_normal((6, 4, 1, 3)).astype(np.float32), "w2"),
    ])
    result = optimize(model, ort_run, rng, exact=False, dims={"N": 2})
    assert ops(result.model).count("Transpose") == 1


# ------------------------------------------------------------------ rule 7
def transposes(model: onnx.ModelProto) -> int:
    return ops(model).count("Transpose")


def test_shape_of_the_transposed_tensor_becomes_a_gather(ort_run, rng):
    model = parse("""
    g (float[N,8,6,3] x) => (float[N,8,6,3] y, int64[4] s, int64[2] hw, int64[1] c) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        s = Shape (t)
        hw = Shape <start = -2> (t)
        c = Shape <start = 1, end = 2> (t)
        r = Relu (t)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""")
    result = optimize(model, ort_run, rng, dims={"N": 3})
    assert transposes(result.model) == 0
    assert ops(result.model).count("Gather") == 3
    assert result.stats["absorbed_by_consumers"] == 3


def test_shape_slice_the_permutation_keeps_needs_no_gather(ort_run, rng):
    model = parse("""
    g (float[N,8,6,3] x) => (float[N,8,6,3] y, int64[1] n) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        n = Shape <end = 1> (t)
        y = Transpose <perm = [0, 2, 3, 1]> (t)
    }""")
    result = optimize(model, ort_run, rng, dims={"N": 3})
    assert ops(result.model) == ["Shape", "Identity"]


FLATTEN_HEAD = """
g (float[N,3,4,5] x) => (float[N,7] y) {{
    t = Transpose <perm = [0, 2, 3, 1]> (x)
    f = {flatten}
    y = MatMul (f, w0)
}}"""


def flatten_head(flatten: str, rng, *, weights: tuple[int, int] = (60, 7), extra: dict | None = None
                 ) -> onnx.ModelProto:
    model = parse(FLATTEN_HEAD.format(flatten=flatten))
    model.graph.initializer.append(
        numpy_helper.from_array(rng.standard_normal(weights).astype(np.float32), "w0"))
    for name, value in (extra or {}).items():
        model.graph.initializer.append(numpy_helper.from_array(value, name))
    return model


@pytest.mark.parametrize("flatten, extra", [
    ("Flatten <axis = 1> (t)", None),
    ("Flatten <axis = -3> (t)", None),
    ("Reshape (t, shape)", {"shape": np.array([-1, 60], np.int64)}),
    ("Reshape (t, shape)", {"shape": np.array([0, -1], np.int64)}),
])
def test_flatten_into_constant_weights_reorders_their_rows(flatten, extra, ort_run, rng):
    model = flatten_head(flatten, rng, extra=extra)
    result = optimize(model, ort_run, rng, exact=False, dims={"N": 3})
    assert transposes(result.model) == 0
    assert result.stats["absorbed_by_consumers"] == 1
    assert [i.name for i in result.model.graph.initializer if i.name == "w0"] == []


def test_flatten_with_a_shape_computed_at_run_time(ort_run, rng):
    # tf2onnx's Keras Flatten: Reshape(t, Concat(Shape(t)[0:1], [-1])).
    model = flatten_head("Reshape (t, shape)", rng, extra={
        "start": np.array([0], np.int64), "end": np.array([1], np.int64),
        "minus_one": np.array([-1], np.int64)})
    shape_nodes = parse("""
    g (float[N,4,5,3] t) => (int64[2] shape) {
        full = Shape (t)
        batch = Slice (full, start, end)
        shape = Concat <axis = 0> (batch, minus_one)
    }""").graph.node
    model.graph.node.insert(1, shape_nodes[2])
    model.graph.node.insert(1, shape_nodes[1])
    model.graph.node.insert(1, shape_nodes[0])
    result = optimize(model, ort_run, rng, exact=False, dims={"N": 3})
    assert transposes(result.model) == 0


def test_gemm_trans_b_reorders_the_weight_columns(ort_run, rng):
    model = flatten_head("Flatten (t)", rng, weights=(7, 60), extra={
        "bias": rng.standard_normal(7).astype(np.float32)})
    model.graph.node[-1].CopyFrom(helper.make_node("Gemm", ["f", "w0", "bias"], ["y"], transB=1))
    result = optimize(model, ort_run, rng, exact=False, dims={"N": 3})
    assert transposes(result.model) == 0


@pytest.mark.parametrize("case", ["exact", "batch moved", "not a flatten", "weights computed",
                                  "flatten read elsewhere", "transA"])
def test_flatten_negative(case, ort_run, rng):
    flatten, extra, options = "Flatten (t)", None, {}
    if case == "exact":
        options = {"reorder_reductions": False}
    elif case == "not a flatten":
        flatten, extra = "Reshape (t, shape)", {"shape": np.array([-1, 12], np.int64)}
    model = flatten_head(flatten, rng, weights=(12, 7) if case == "not a flatten" else (60, 7),
                         extra=extra)
    if case == "batch moved":
        model.graph.node[0].attribute[0].ints[:] = [1, 0, 2, 3]
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 3
        model.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 3
    elif case == "weights computed":
        model.graph.node.insert(2, helper.make_node("Relu", ["w0"], ["w_relu"]))
        model.graph.node[-1].input[1] = "w_relu"
    elif case == "flatten read elsewhere":
        model.graph.node.append(helper.make_node("Relu", ["f"], ["z"]))
        model.graph.output.append(
            helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 60]))
    elif case == "transA":
        model = flatten_head(flatten, rng, weights=(7, 7))
        model.graph.node[-1].CopyFrom(helper.make_node("Gemm", ["f", "w0"], ["y"], transA=1))
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 7
        model.graph.output[0].type.tensor_type.shape.dim[0].dim_value = 60
    result = optimize(model, ort_run, rng, dims={"N": 3}, **options)
    assert transposes(result.model) == 1
    assert result.stats["absorbed_by_consumers"] == 0


# ------------------------------------------------------------------ case 4j: Reshape
def test_reshape_splitting_the_channels_pushes_and_cancels(ort_run, rng):
    # GroupNormalization in NHWC: channels split into groups, normalized, merged back.
    model = parse("""
    g (float[N,4,4,6] x) => (float[N,4,4,6] y) <int64[5] split = {0, 4, 4, 2, 3},
                                                int64[4] merge = {-1, 4, 4, 6}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        c = Conv (t, w)
        n = Transpose <perm = [0, 2, 3, 1]> (c)
        g5 = Reshape (n, split)
        m = ReduceMean <axes = [1, 2, 4]> (g5)
        d = Sub (g5, m)
        r = Reshape (d, merge)
        s = Transpose <perm = [0, 3, 1, 2]> (r)
        o = Conv (s, w)
        y = Transpose <perm = [0, 2, 3, 1]> (o)
    }""")
    model.graph.initializer.append(
        numpy_helper.from_array(rng.standard_normal((6, 6, 1, 1)).astype(np.float32), "w"))
    result = optimize(model, ort_run, rng, exact=False, dims={"N": 3})
    assert transposes(result.model) == 2  # the graph input's and output's
    assert result.stats["pushed_through"] == 4  # Reshape, ReduceMean, Sub, Reshape


def test_reshape_merging_spatial_axes_pushes(ort_run, rng):
    model = parse("""
    g (float[2,4,5,6] x) => (float[2,4,5,6] y) <int64[3] flat = {2, 6, 20},
                                                int64[4] back = {2, 6, 4, 5}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        f = Reshape (t, flat)
        s = Softmax <axis = -1> (f)
        b = Reshape (s, back)
        y = Transpose <perm = [0, 2, 3, 1]> (b)
    }""")
    result = optimize(model, ort_run, rng)
    assert transposes(result.model) == 0


def test_reshape_with_a_target_computed_from_the_batch(ort_run, rng):
    model = parse("""
    g (float[N,6,4,4] x) => (float[N,6,4,4] y) <int64[1] start = {0}, int64[1] end = {1},
                                                int64[4] groups = {4, 4, 2, 3},
                                                int64[3] channels = {4, 4, 6}> {
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        full = Shape (t)
        batch = Slice (full, start, end)
        split = Concat <axis = 0> (batch, groups)
        g5 = Reshape (t, split)
        e = Exp (g5)
        merge = Concat <axis = 0> (batch, channels)
        r = Reshape (e, merge)
        y = Transpose <perm = [0, 3, 1, 2]> (r)
    }""")
    result = optimize(model, ort_run, rng, dims={"N": 3})
    assert transposes(result.model) == 0
    assert "Shape" not in ops(result.model)  # the target computation went with the pushes


@pytest.mark.parametrize("target", [[2, 24, 5], [2, 1, 6, 20], [2, 120]])
def test_reshape_negative(target, ort_run, rng):
    # merges axes the permutation separates; size-1 dimensions; batch merged (then permuted
    # rows follow it, no cheaper than the Transpose itself)
    model = parse(f"""
    g (float[2,4,5,6] x) => (float[{",".join(map(str, target))}] y)
        <int64[{len(target)}] shape = {{{", ".join(map(str, target))}}}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        y = Reshape (t, shape)
    }}""")
    result = optimize(model, ort_run, rng)
    assert transposes(result.model) == 1


# ------------------------------------------------------------------ case 4k, rule 7a's Size
@pytest.mark.parametrize("middle, out_shape", [
    ("m = Tile (t, repeats)", "2,8,5,18"),
    ("m = CumSum <reverse = 1> (t, axis)", "2,4,5,6"),
    ("m = Gather <axis = 2> (t, rows)", "2,3,5,6"),
])
def test_tile_cumsum_gather_remap_their_axes(middle, out_shape, ort_run, rng):
    model = parse(f"""
    g (float[2,4,5,6] x) => (float[{out_shape}] y)
        <int64[4] repeats = {{1, 3, 2, 1}}, int64 axis = {{-1}}, int64[3] rows = {{3, 0, 3}}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        {middle}
        y = Transpose <perm = [0, 2, 3, 1]> (m)
    }}""")
    result = optimize(model, ort_run, rng)
    assert transposes(result.model) == 0


def test_gather_with_a_scalar_index_drops_the_axis(ort_run, rng):
    model = parse("""
    g (float[2,4,5,6] x) => (float[2,5,6] y) <int64 row = {2}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        m = Gather <axis = 2> (t, row)
        y = Transpose <perm = [0, 2, 1]> (m)
    }""")
    result = optimize(model, ort_run, rng)
    assert transposes(result.model) == 0


def test_size_of_the_transposed_tensor(ort_run, rng):
    model = parse("""
    g (float[2,4,5,6] x) => (int64 n, float[2,4,5,6] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        n = Size (t)
        y = Transpose <perm = [0, 2, 3, 1]> (t)
    }""")
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Size", "Identity"]


@pytest.mark.parametrize("middle, inputs", [
    ("m = Tile (t, repeats)", "int64[4] repeats"),
    ("m = Gather <axis = 2> (t, rows)", "int64[2,2] rows"),
])
def test_tile_and_gather_negative(middle, inputs, ort_run, rng):
    # repeats computed at run time; 2-D indices add an axis the permutation does not know
    model = parse(f"""
    g (float[2,4,5,6] x, {inputs}) => (float[N,M,P,Q] y) {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        {middle}
        y = Relu (m)
    }}""")
    result = EliminateTransposes()(model)
    assert transposes(result.model) == 1


# ------------------------------------------------------------------ inputs_as_nchw
NHWC_CONV = """
g (float[N,8,8,3] x) => (float[N,8,8,4] y) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    c = Conv <pads = [1, 1, 1, 1]> (t, w)
    y = Transpose <perm = [0, 2, 3, 1]> (c)
}"""


def nhwc_conv(rng) -> onnx.ModelProto:
    model = parse(NHWC_CONV)
    model.graph.initializer.append(
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"))
    return model


def dims(info: onnx.ValueInfoProto) -> list:
    return [d.dim_value or d.dim_param for d in info.type.tensor_type.shape.dim]


def test_inputs_and_outputs_as_nchw_change_the_signature_and_leave_no_transpose(ort_run, rng):
    from graphfix import layout

    model = nhwc_conv(rng)
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = EliminateTransposes(inputs_as_nchw=["x"], outputs_as_nchw="y")(model)
    onnx.checker.check_model(model, full_check=True)
    assert ops(model) == ["Conv"]
    assert dims(model.graph.input[0]) == ["N", 3, 8, 8]
    assert dims(model.graph.output[0]) == ["N", 4, 8, 8]
    assert result.stats["signature_changes"] == 2 and len(result.warnings) == 2
    assert layout.read(model) == {"inputs": {"x": (0, 3, 1, 2)}, "outputs": {"y": (0, 3, 1, 2)}}
    x = rng.standard_normal((2, 8, 8, 3)).astype(np.float32)
    expected = ort_run(original, {"x": x})["y"]
    actual = ort_run(model, {"x": x.transpose(0, 3, 1, 2)})["y"]
    np.testing.assert_array_equal(actual.transpose(0, 2, 3, 1), expected)
    again = EliminateTransposes(inputs_as_nchw=["x"], outputs_as_nchw=["y"])(model)
    assert not again.modified and dims(model.graph.input[0]) == ["N", 3, 8, 8]


@pytest.mark.parametrize("options, message", [
    ({"inputs_as_nchw": ["nope"]}, "no graph input named 'nope'"),
    ({"outputs_as_nchw": ["x"]}, "no graph output named 'x'"),
    ({"inputs_as_nchw": 3}, "list of tensor names"),
])
def test_inputs_as_nchw_errors(options, message, rng):
    with pytest.raises(PassError, match=message):
        EliminateTransposes(**options)(nhwc_conv(rng))


def test_inputs_as_nchw_needs_rank_three(rng):
    model = parse("g (float[2,3] x) => (float[2,3] y) { y = Relu (x) }")
    with pytest.raises(PassError, match="rank 3 or more"):
        EliminateTransposes(inputs_as_nchw=["x"])(model)


def test_reshape_that_only_drops_and_adds_size_one_axes(ort_run, rng):
    # TFLite's Conv1D through tf2onnx: ExpandDims and Squeeze are Reshapes.
    model = parse("""
    g (float[N,8,3] x) => (float[N,8,4] y) <int64[1] one = {1}, int64[3] squeeze = {-1, 8, 4},
                                           int64[4] expand = {-1, 1, 8, 4}> {
        u = Unsqueeze (x, one)
        t1 = Transpose <perm = [0, 3, 1, 2]> (u)
        c1 = Conv <pads = [0, 1, 0, 1]> (t1, w1)
        t2 = Transpose <perm = [0, 2, 3, 1]> (c1)
        s = Reshape (t2, squeeze)
        r = Relu (s)
        e = Reshape (r, expand)
        t3 = Transpose <perm = [0, 3, 1, 2]> (e)
        c2 = Conv <pads = [0, 1, 0, 1]> (t3, w2)
        t4 = Transpose <perm = [0, 2, 3, 1]> (c2)
        y = Reshape (t4, squeeze)
    }""")
    model.graph.initializer.extend([
        numpy_helper.from_array(rng.standard_normal((4, 3, 1, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.standard_normal((4, 4, 1, 3)).astype(np.float32), "w2")])
    result = optimize(model, ort_run, rng, dims={"N": 3})
    assert transposes(result.model) == 2  # before the first Conv, and at the output


def test_regression_nested_concats_do_not_make_transposes_chase_each_other(ort_run, rng):
    # Found on InceptionV3 through TFLite: a Concat of two Concats and two convolution
    # branches, read by four Transposes. A compensation pushed back through the Concat it was
    # made for undid that push, and the two Transposes traded places until the push limit
    # (8 left of 11, 203 pushes, names thousands of characters long).
    nodes = ['xt = Transpose <perm = [0, 3, 1, 2]> (x)']
    for b in "abcdef":
        nodes += [f"c_{b} = Conv (xt, w_{b})", f"t_{b} = Transpose <perm = [0, 2, 3, 1]> (c_{b})",
                  f"r_{b} = Relu (t_{b})"]
    nodes += ["bc = Concat <axis = 3> (r_b, r_c)", "de = Concat <axis = 3> (r_d, r_e)",
              "m = Concat <axis = 3> (r_a, bc, de, r_f)"]
    for k in range(4):
        nodes += [f"mt{k} = Transpose <perm = [0, 3, 1, 2]> (m)", f"o{k} = Conv (mt{k}, wo{k})"]
    outputs = ", ".join(f"float[N,2,8,8] o{k}" for k in range(4))
    body = "\n".join(nodes)
    model = parse(f"g (float[N,8,8,3] x) => ({outputs}) {{ {body} }}")
    model.graph.initializer.extend(
        [numpy_helper.from_array(rng.standard_normal((4, 3, 1, 1)).astype(np.float32), f"w_{b}")
         for b in "abcdef"]
        + [numpy_helper.from_array(rng.standard_normal((2, 24, 1, 1)).astype(np.float32), f"wo{k}")
           for k in range(4)])
    result = optimize(model, ort_run, rng, dims={"N": 2})
    assert result.stats["transposes_after"] == 1
    assert result.stats["pushed_through"] <= 16
    assert max(len(o) for n in model.graph.node for o in n.output) < 64


def test_reshape_with_a_zero_size_dimension_is_left_alone(ort_run, rng):
    # A literal 0 in the rewritten target would copy another axis of the input.
    model = parse("""
    g (float[3,2,0] x) => (float[0,6] y) <int64[2] s = {0, 6}> {
        t = Transpose <perm = [2, 0, 1]> (x)
        r = Reshape (t, s)
        y = Transpose <perm = [1, 0]> (r)
    }""")
    result = EliminateTransposes()(model)
    assert transposes(result.model) == 2


def test_inputs_as_nchw_refuses_before_editing_anything(rng):
    model = parse("""
    g (float[1,4,5,3] x) => (float[1,4,5,3] y, float[1,4,5,3] x) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Relu (t)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""")
    before = model.SerializeToString()
    for options in ({"inputs_as_nchw": ["x"]}, {"outputs_as_nchw": ["y"], "inputs_as_nchw": ["x"]}):
        with pytest.raises(PassError, match="also a graph output"):
            EliminateTransposes(**options)(model)
        assert model.SerializeToString() == before


# ------------------------------------------------------------------ unknown sizes written as -1
def _with_dims(body: str, dims: list[str]) -> onnx.ModelProto:
    model = parse(body)
    for dim, value in zip(model.graph.input[0].type.tensor_type.shape.dim, dims):
        if value.lstrip("-").isdigit():
            dim.dim_value = int(value)
        else:
            dim.dim_param = value
    for dim in model.graph.output[0].type.tensor_type.shape.dim:
        dim.ClearField("dim_value")
    return model


@pytest.mark.parametrize("dims", [["2", "-1", "-1", "1"], ["2", "N", "H", "1"]])
def test_size_one_move_with_two_unknown_sizes_stays_a_transpose(dims, ort_run, rng):
    # [2,?,?,1] -> [2,1,?,?]: a Reshape target would need two -1s, which ORT refuses.
    model = _with_dims("""
    g (float[2,5,6,1] x) => (float[2,1,5,6] y) { y = Transpose <perm = [0, 3, 1, 2]> (x) }""",
                       dims)
    result = optimize(model, ort_run, rng, dims={"N": 5, "H": 6})
    assert ops(result.model) == ["Transpose"]


@pytest.mark.parametrize("dims, target", [
    (["-1", "4", "1", "5"], [0, 1, 4, 5]),  # the unknown size stays in place: copied
    (["2", "-1", "1", "5"], [2, 1, -1, 5]),  # one unknown size that moves: inferred
])
def test_size_one_move_with_an_unknown_size_becomes_a_valid_reshape(dims, target, ort_run):
    model = _with_dims("""
    g (float[2,4,1,5] x) => (float[2,1,4,5] y) { y = Transpose <perm = [0, 2, 1, 3]> (x) }""",
                       dims)
    reference = onnx.ModelProto()
    reference.CopyFrom(model)
    result = EliminateTransposes()(model)
    assert ops(result.model) == ["Reshape"]
    assert numpy_helper.to_array(result.model.graph.initializer[0]).tolist() == target
    onnx.checker.check_model(result.model, full_check=True)
    x = np.arange(40, dtype=np.float32).reshape(2, 4, 1, 5)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"],
                                  ort_run(reference, {"x": x})["y"])
