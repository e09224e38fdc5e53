"""Rule 4, cases 4f-4l: a Transpose pushed past consumers that name axes (reductions, Softmax,
Squeeze/Unsqueeze, Q/DQ, Reshape, Tile, CumSum, Gather, Resize). One table per case family; a row is
``pytest.param(onnx_text, expected, id)`` (:mod:`tests.passes.transposes_support`)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from graphfix.passes.eliminate_transposes import EliminateTransposes
from tests.passes.transposes_support import check_row, expect, optimize, parse, transposes

# ------------------------------------------------------------------ 4f Reduce / ArgMax
REDUCE = """
g (float[1,4,5,3] x) => (float{out_shape} y) {inits} {{
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    r = {call}
    {tail}
}}"""


def reduce_row(op: str, keepdims: int, opset: int):
    axes_as_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    inits = "<int64[2] axes = {2, 3}>" if axes_as_input else ""
    call = f"{op} <keepdims = {keepdims}> (t, axes)" if axes_as_input else (
        f"{op} <keepdims = {keepdims}, axes = [2, 3]> (t)")
    text = REDUCE.format(
        out_shape="[1,1,1,3]" if keepdims else "[1,3]", inits=inits, call=call,
        tail="y = Transpose <perm = [0, 2, 3, 1]> (r)" if keepdims else "y = Identity (r)")
    return pytest.param(text, expect({"Transpose": 0}, opset=opset),
                        id=f"4f-{op}-keepdims{keepdims}-opset{opset}")


KEEPDIMS0_SHRINKS = """
g (float[2,3,4,5] x) => (float[2,5] y) {
    t = Transpose <perm = [3, 1, 0, 2]> (x)
    r = ReduceMax <axes = [1, 3], keepdims = 0> (t)
    y = Transpose <perm = [1, 0]> (r)
}"""

ALL_AXES_AND_NOOP = """
g (float[2,3,4] x) => (float y, float[2,3,4] z) <int64[0] none = {}> {
    t = Transpose <perm = [2, 0, 1]> (x)
    y = ReduceMax <keepdims = 0> (t)
    n = ReduceMax <noop_with_empty_axes = 1> (t, none)
    z = Transpose <perm = [1, 2, 0]> (n)
}"""

ARGMAX = """
g (float[2,3,4] x) => (int64[2,1,4] y) {{
    t = Transpose <perm = [2, 1, 0]> (x)
    a = {op} <axis = 1, keepdims = 1> (t)
    y = Transpose <perm = [2, 1, 0]> (a)
}}"""

ORDER_SENSITIVE = """
g (float[1,4,5,3] x) => (float[1,1,1,3] y, float[1,1,1,3] z) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    s = ReduceMean <axes = [2, 3]> (t)
    m = ReduceMin <axes = [2, 3]> (t)
    y = Transpose <perm = [0, 2, 3, 1]> (s)
    z = Transpose <perm = [0, 2, 3, 1]> (m)
}"""

RULE_4F = [
    *(reduce_row(op, keepdims, opset) for op in ("ReduceMax", "ReduceSum")
      for keepdims in (0, 1) for opset in (11, 13, 18)),
    *(reduce_row(op, 1, 18) for op in ("ReduceL1", "ReduceL2", "ReduceLogSum",
                                       "ReduceLogSumExp", "ReduceMean", "ReduceMin",
                                       "ReduceProd", "ReduceSumSquare")),
    # p' = (1, 0) on the kept axes cancels the trailing Transpose.
    pytest.param(KEEPDIMS0_SHRINKS, expect(["ReduceMax"], opset=13,
                                           attrs={"ReduceMax": {"axes": [1, 2]}}),
                 id="4f-keepdims0-shrinks-the-permutation"),
    pytest.param(ALL_AXES_AND_NOOP, expect(["ReduceMax", "ReduceMax"], opset=18),
                 id="4f-all-axes-and-noop-with-empty-axes"),
    pytest.param(ARGMAX.format(op="ArgMax"),
                 expect(["ArgMax"], opset=13), id="4f-argmax-axis-remapped"),
    pytest.param(ARGMAX.format(op="ArgMin"),
                 expect(["ArgMin"], opset=13), id="4f-argmin-axis-remapped"),
    # The Transpose before ReduceMean stays; those after the reductions only move size-1 dims.
    pytest.param(ORDER_SENSITIVE, expect(
        ["Transpose", "ReduceMean", "ReduceMin", "Reshape", "Reshape"], opset=13, exact=True,
        options={"keep_reduction_order": True}), id="4f-negative-sum-like-kept-for-exactness"),
]


@pytest.mark.parametrize("text, expected", RULE_4F)
def test_4f_reduce(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


# ------------------------------------------------------------------ 4g Softmax
SOFTMAX = """
g (float[2,4,5,3] x) => (float[2,4,5,3] y) {{
    t = Transpose <perm = {perm}> (x)
    s = {op} <axis = {axis}> (t)
    y = Transpose <perm = {inverse}> (s)
}}"""


def softmax(row_id: str, op: str, perm: list[int], axis: int, expected, **how):
    inverse = [perm.index(i) for i in range(len(perm))]
    text = SOFTMAX.format(op=op, perm=perm, inverse=inverse, axis=axis)
    return pytest.param(text, expect(expected, **how), id=row_id)


# Two maxima a reordered row meets in another order: x[0,0,0,1] and x[0,1,0,0] (NHWC). In the
# NCHW row of the original the second comes first; in the NHWC row the first does.
HARDMAX_TIE = np.zeros((2, 4, 5, 3), np.float32)
HARDMAX_TIE[0, 0, 0, 1] = HARDMAX_TIE[0, 1, 0, 0] = 1.0

# A row whose reordered axes are of one element but one keeps its order: exact for Hardmax too.
SOFTMAX_SIZE_ONE = SOFTMAX.replace("float[2,4,5,3]", "float[2,4,1,3]")
HARDMAX_TIE_SIZE_ONE = np.zeros((2, 4, 1, 3), np.float32)
HARDMAX_TIE_SIZE_ONE[0, 0, 0, 1] = HARDMAX_TIE_SIZE_ONE[0, 1, 0, 0] = 1.0

RULE_4G = [
    *(softmax(f"4g-{op}-axis-remapped-opset13", op, [0, 3, 1, 2], 1, [op], opset=13,
              attrs={op: {"axis": 3}}) for op in ("Softmax", "LogSoftmax", "Hardmax")),
    # Before opset 13 each row is the flattened axes 1.. : [0,3,1,2] keeps the batch a row of
    # its own, so every row holds the same elements, summed in another order.
    *(softmax(f"4g-{op}-opset11-row-reordered-pushes", op, [0, 3, 1, 2], 1, [op], opset=11,
              exact=False) for op in ("Softmax", "LogSoftmax")),
    *(softmax(f"4g-{op}-opset11-row-reordered-kept-for-exactness", op, [0, 3, 1, 2], 1,
              {"Transpose": 2}, opset=11, exact=True, modified=False,
              options={"keep_reduction_order": True}) for op in ("Softmax", "LogSoftmax")),
    softmax("4g-Softmax-opset11-row-reordered-axis2-pushes", "Softmax", [0, 1, 3, 2], 2,
            ["Softmax"], opset=11),
    # The leading axes permuted among themselves, the row untouched: exact either way.
    softmax("4g-Softmax-opset11-leading-block-pushes", "Softmax", [1, 0, 2, 3], 2, ["Softmax"],
            opset=11, exact=True),
    softmax("4g-LogSoftmax-opset11-leading-block-pushes-exactly", "LogSoftmax", [1, 0, 2, 3], 2,
            ["LogSoftmax"], opset=11, exact=True, options={"keep_reduction_order": True}),
    softmax("4g-Softmax-opset11-both-blocks-reordered", "Softmax", [1, 0, 3, 2], 2,
            ["Softmax"], opset=11),
    # A permutation that mixes the leading and the trailing axes is a barrier.
    softmax("4g-negative-opset11-permutation-crosses-coercion", "Softmax", [2, 1, 0, 3], 2,
            {"Transpose": 2}, opset=11, exact=True, modified=False),
    softmax("4g-negative-opset11-channel-moves-into-the-row", "LogSoftmax", [0, 3, 1, 2], 2,
            {"Transpose": 2}, opset=11, exact=True, modified=False),
    softmax("4g-negative-opset11-batch-moves-into-the-row", "Softmax", [3, 0, 1, 2], 1,
            {"Transpose": 2}, opset=11, exact=True, modified=False),
    softmax("4g-Hardmax-opset11-leading-block-pushes", "Hardmax", [1, 0, 2, 3], 2,
            ["Hardmax"], opset=11, pinned={"x": HARDMAX_TIE}),
    pytest.param(
        SOFTMAX.format(op="Hardmax", perm=[0, 3, 1, 2], inverse=[0, 2, 3, 1], axis=1),
        expect(opset=11, pinned={"x": HARDMAX_TIE}), id="4g-Hardmax-opset11-row-reordered-ties"),
    softmax("4g-negative-Hardmax-opset11-row-reordered-is-a-barrier", "Hardmax", [0, 3, 1, 2], 1,
            {"Transpose": 2}, opset=11, modified=False, pinned={"x": HARDMAX_TIE}),
    *(pytest.param(
        SOFTMAX_SIZE_ONE.format(op=op, perm=[0, 1, 3, 2], inverse=[0, 1, 3, 2], axis=1),
        expect([op], opset=11, exact=True, pinned={"x": HARDMAX_TIE_SIZE_ONE},
               options={"keep_reduction_order": True}),
        id=f"4g-{op}-opset11-size-one-axis-moves-in-the-row") for op in (
            "Softmax", "LogSoftmax", "Hardmax")),
]


@pytest.mark.parametrize("text, expected", RULE_4G)
def test_4g_softmax(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


# ------------------------------------------------------------------ 4h Squeeze / Unsqueeze
def squeeze_row(opset: int):
    squeeze = "q = Squeeze <axes = [1, 2]> (t)" if opset < 13 else "q = Squeeze (t, axes)"
    inits = "" if opset < 13 else "<int64[2] axes = {1, 2}>"
    text = f"""
    g (float[2,5,1,1] x) => (float[5,2] y) {inits} {{
        t = Transpose <perm = [0, 2, 3, 1]> (x)
        {squeeze}
        y = Transpose <perm = [1, 0]> (q)
    }}"""
    return pytest.param(text, expect(["Squeeze", "Transpose"], opset=opset,
                                     stats={"transposes_after": 1}),
                        id=f"4h-squeeze-after-global-pool-opset{opset}")


def unsqueeze_row(opset: int):
    unsqueeze = "u = Unsqueeze <axes = [0, 3]> (t)" if opset < 13 else "u = Unsqueeze (t, axes)"
    inits = "" if opset < 13 else "<int64[2] axes = {0, 3}>"
    text = f"""
    g (float[2,3,4] x) => (float[1,4,2,1,3] y) {inits} {{
        t = Transpose <perm = [2, 0, 1]> (x)
        {unsqueeze}
        r = Relu (u)
        y = Transpose <perm = [0, 1, 2, 3, 4]> (r)
    }}"""
    return pytest.param(text, expect({"Transpose": 1}, opset=opset),
                        id=f"4h-unsqueeze-grows-the-permutation-opset{opset}")


SQUEEZE_AXES_UNKNOWN = """
g (float[2,5,3,1] x, int64[1] axes) => (float[2,3,5] y) {
    t = Transpose <perm = [0, 2, 3, 1]> (x)
    y = Squeeze (t, axes)
}"""

RULE_4H = [
    squeeze_row(11), squeeze_row(13), unsqueeze_row(11), unsqueeze_row(13),
    pytest.param(SQUEEZE_AXES_UNKNOWN, expect(modified=False, opset=13,
                                              pinned={"axes": np.array([2])}),
                 id="4h-negative-squeeze-axes-unknown"),
]


@pytest.mark.parametrize("text, expected", RULE_4H)
def test_4h_squeeze_unsqueeze(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


# ------------------------------------------------------------------ 4i Q/DQ
QDQ = """
g (float[1,4,4,3] x) => (float[1,4,4,3] y) <{inits}> {{
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    q = QuantizeLinear{axis} (t, scale, zp)
    d = DequantizeLinear{axis} (q, scale, zp)
    y = Transpose <perm = [0, 2, 3, 1]> (d)
}}"""

RULE_4I = [
    pytest.param(QDQ.format(axis=" <axis = 1>",
                            inits="float[3] scale = {0.1, 0.2, 0.3}, int8[3] zp = {0, 1, -1}"),
                 expect(["QuantizeLinear", "DequantizeLinear"], opset=13, attrs={
                     "QuantizeLinear": {"axis": 3}, "DequantizeLinear": {"axis": 3}}),
                 id="4i-per-axis"),
    pytest.param(QDQ.format(axis="", inits="float scale = {0.05}, uint8 zp = {128}"),
                 expect(["QuantizeLinear", "DequantizeLinear"], opset=13), id="4i-per-tensor"),
]


@pytest.mark.parametrize("text, expected", RULE_4I)
def test_4i_quantize(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


# ------------------------------------------------------------------ 4j Reshape
MERGE_SPATIAL = """
g (float[2,4,5,6] x) => (float[2,4,5,6] y) <int64[3] flat = {2, 6, 20},
                                            int64[4] back = {2, 6, 4, 5}> {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    f = Reshape (t, flat)
    s = Softmax <axis = -1> (f)
    b = Reshape (s, back)
    y = Transpose <perm = [0, 2, 3, 1]> (b)
}"""

TARGET_FROM_THE_BATCH = """
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
}"""

MIXING_PERMUTED_AXES = """
g (float[1,4,4,3] x) => (float[1,4,12] y) <int64[3] shape = {1, 4, 12}> {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    y = Reshape (t, shape)
}"""


def reshape_negative(target: list[int]):
    text = f"""
    g (float[2,4,5,6] x) => (float[{",".join(map(str, target))}] y)
        <int64[{len(target)}] shape = {{{", ".join(map(str, target))}}}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        y = Reshape (t, shape)
    }}"""
    return pytest.param(text, {"Transpose": 1},
                        id=f"4j-negative-target-{'x'.join(map(str, target))}")


RULE_4J = [
    pytest.param(MERGE_SPATIAL, {"Transpose": 0}, id="4j-merging-spatial-axes"),
    # The target computation goes with the pushes.
    pytest.param(TARGET_FROM_THE_BATCH, expect({"Transpose": 0, "Shape": 0}, dims={"N": 3}),
                 id="4j-target-computed-from-the-batch"),
    pytest.param(MIXING_PERMUTED_AXES, expect(modified=False), id="4j-negative-mixes-permuted-axes"),
    # merges axes the permutation separates; size-1 dimensions; batch merged (then permuted
    # rows follow it, no cheaper than the Transpose itself)
    reshape_negative([2, 24, 5]), reshape_negative([2, 1, 6, 20]), reshape_negative([2, 120]),
]


@pytest.mark.parametrize("text, expected", RULE_4J)
def test_4j_reshape(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


def test_4j_reshape_splitting_the_channels_pushes_and_cancels(ort_run, rng):
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


def test_4j_reshape_that_only_drops_and_adds_size_one_axes(ort_run, rng):
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


def test_4j_reshape_with_a_zero_size_dimension_is_left_alone():
    # A literal 0 in the rewritten target would copy another axis of the input.
    model = parse("""
    g (float[3,2,0] x) => (float[0,6] y) <int64[2] s = {0, 6}> {
        t = Transpose <perm = [2, 0, 1]> (x)
        r = Reshape (t, s)
        y = Transpose <perm = [1, 0]> (r)
    }""")
    result = EliminateTransposes()(model)
    assert transposes(result.model) == 2


# ------------------------------------------------------------------ 4k Tile, CumSum, Gather
AXES_4K = """
g (float[2,4,5,6] x{extra_input}) => (float[{out_shape}] y)
    <int64[4] repeats = {{1, 3, 2, 1}}, int64 axis = {{-1}}, int64[3] rows = {{3, 0, 3}}> {{
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    {middle}
    y = Transpose <perm = [0, 2, 3, 1]> (m)
}}"""


def axes_4k(row_id: str, middle: str, out_shape: str, expected, extra_input: str = "", **how):
    text = AXES_4K.format(middle=middle, out_shape=out_shape, extra_input=extra_input)
    return pytest.param(text, expect(expected, **how), id=row_id)


SCALAR_INDEX = """
g (float[2,4,5,6] x) => (float[2,5,6] y) <int64 row = {2}> {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    m = Gather <axis = 2> (t, row)
    y = Transpose <perm = [0, 2, 1]> (m)
}"""

# At IR 3 the Gathers' indices become Constant nodes the look-ahead must count (pushing would
# make 5 nodes 6).
TILES_IR3 = """
<ir_version: 3, opset_import: ["" : 9]>
g (float[1,4,5,6] x, int64[4] reps) => (float[?,?,?,?] y, float[?,?,?,?] z) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    a = Tile (t, reps)
    b = Tile (t, reps)
    y = Transpose <perm = [0, 2, 3, 1]> (a)
    z = Transpose <perm = [0, 2, 3, 1]> (b)
}"""

RULE_4K = [
    axes_4k("4k-tile-constant-repeats", "m = Tile (t, repeats)", "2,8,5,18", {"Transpose": 0}),
    axes_4k("4k-cumsum-axis-remapped", "m = CumSum <reverse = 1> (t, axis)", "2,4,5,6",
            {"Transpose": 0}),
    axes_4k("4k-gather-axis-remapped", "m = Gather <axis = 2> (t, rows)", "2,3,5,6",
            {"Transpose": 0}),
    pytest.param(SCALAR_INDEX, {"Transpose": 0}, id="4k-gather-scalar-index-drops-the-axis"),
    # Repeats computed at run time are reordered by a Gather.
    axes_4k("4k-tile-repeats-graph-input", "m = Tile (t, reps)", "2,8,5,18",
            ["Gather", "Tile"], extra_input=", int64[4] reps",
            pinned={"reps": np.array([1, 3, 2, 1])}),
    axes_4k("4k-tile-repeats-computed", "r = Concat <axis = 0> (one, reps)\n    "
            "m = Tile (t, r)", "2,8,5,18", ["Concat", "Gather", "Tile"],
            extra_input=", int64[3] reps, int64[1] one",
            pinned={"reps": np.array([3, 2, 1]), "one": np.array([1])}),
    axes_4k("4k-tile-repeats-of-unknown-length", "m = Tile (t, reps)", "2,8,5,18",
            ["Gather", "Tile"], extra_input=", int64[K] reps",
            pinned={"reps": np.array([1, 3, 2, 1])}),
    pytest.param(TILES_IR3, expect(pinned={"reps": np.array([1, 2, 1, 1])}),
                 id="4k-ir3-computed-repeats-gain-no-nodes"),
]


@pytest.mark.parametrize("text, expected", RULE_4K)
def test_4k_tile_cumsum_gather(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


@pytest.mark.parametrize("middle, inputs", [
    ("m = Tile (t, repeats)", "int64[4] repeats"),
    ("m = Gather <axis = 2> (t, rows)", "int64[2,2] rows"),
])
def test_4k_tile_and_gather_negative(middle, inputs):
    # repeats computed at run time feeding a graph output; 2-D indices add an axis the
    # permutation does not know
    model = parse(f"""
    g (float[2,4,5,6] x, {inputs}) => (float[N,M,P,Q] y) {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        {middle}
        y = Relu (m)
    }}""")
    result = EliminateTransposes()(model)
    assert transposes(result.model) == 1


# ------------------------------------------------------------------ 4l Resize, Upsample
RESIZE_4L = """
g (float[1,6,8,3] x{extra_input}) => (float[{out_shape}] y)
    <float[4] scales = {{1.0, 1.0, 2.0, 0.5}}, int64[4] sizes = {{1, 3, 12, 4}},
     float[8] roi = {{0, 0, 0.1, 0.2, 1, 1, 0.9, 0.8}}, float[2] hw = {{2.0, 0.5}},
     float[4] up = {{1.0, 1.0, 2.0, 2.0}}> {{
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    {middle}
    y = Transpose <perm = [0, 2, 3, 1]> (m)
}}"""


def resize_4l(row_id: str, middle: str, out_shape: str, expected, extra_input: str = "",
              **how):
    text = RESIZE_4L.format(middle=middle, out_shape=out_shape, extra_input=extra_input)
    return pytest.param(text, expect(expected, **how), id=row_id)


RULE_4L = [
    resize_4l("4l-resize-constant-scales", "m = Resize (t, , scales)", "1,12,4,3",
              {"Transpose": 0}),
    resize_4l("4l-resize-constant-sizes", "m = Resize (t, , , sizes)", "1,12,4,3",
              {"Transpose": 0}),
    resize_4l("4l-resize-roi-halves-permuted",
              'm = Resize <coordinate_transformation_mode = "tf_crop_and_resize"> '
              "(t, roi, scales)", "1,12,4,3", {"Transpose": 0}),
    resize_4l("4l-resize-axes-attribute-remapped", "m = Resize <axes = [2, 3]> (t, , hw)",
              "1,12,4,3", {"Transpose": 0}, opset=18),
    resize_4l("4l-upsample-opset-9", "m = Upsample (t, up)", "1,12,16,3",
              {"Transpose": 0}, opset=9),
    # Scales computed at run time are reordered by a Gather.
    resize_4l("4l-resize-scales-graph-input", "m = Resize (t, , s)", "1,12,4,3",
              ["Gather", "Resize"], extra_input=", float[4] s",
              pinned={"s": np.array([1.0, 1.0, 2.0, 0.5], dtype=np.float32)}),
    # Linear and cubic kernels accept only some layouts of the resized axes: barriers.
    resize_4l("4l-resize-linear-is-a-barrier", 'm = Resize <mode = "linear"> (t, , scales)',
              "1,12,4,3", {"Transpose": 2}),
    resize_4l("4l-resize-cubic-is-a-barrier", 'm = Resize <mode = "cubic"> (t, , scales)',
              "1,12,4,3", {"Transpose": 2}),
]


@pytest.mark.parametrize("text, expected", RULE_4L)
def test_4l_resize(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)
