"""The look-ahead (:mod:`graphfix.passes.eliminate_transposes.cost`): a push happens only when it
lowers the count of Transposes and adds no more nodes than it removes; fan-outs go all or none;
barriers stop it; the regressions where Transposes chased each other. A row is
``pytest.param(onnx_text, expected, id)`` (:mod:`tests.passes.transposes_support`)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from graphfix.passes.eliminate_transposes import EliminateTransposes
from tests.passes.transposes_support import check_row, expect, ops, optimize, parse

FAN_OUT = """
g (float[1,4,4,3] x) => (float[1,4,4,3] y, float[1,4,4,3] z) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    r = Relu (t)
    s = Sigmoid (t)
    y = Transpose <perm = [0, 2, 3, 1]> (r)
    z = Transpose <perm = [0, 2, 3, 1]> (s)
}"""

FAN_OUT_INTO_A_BARRIER = """
g (float[1,4,4,3] x) => (float[1,4,4,3] y, float[1,3,8,8] z)
    <float[4] scales = {1, 1, 2, 2}, float[0] roi = {}> {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    z = Resize <mode = "linear"> (t, roi, scales)
    y = Transpose <perm = [0, 2, 3, 1]> (t)
}"""

NDHWC = """
g (float[1,2,4,4,3] x) => (float[1,2,4,4,3] y, float[1,3] z) <float[1,1,1,1,3] b5 = {1, 2, 3}> {
    t = Transpose <perm = [0, 4, 1, 2, 3]> (x)
    bt = Transpose <perm = [0, 4, 1, 2, 3]> (b5)
    a = Add (t, bt)
    m = Relu (a)
    z = ReduceMax <axes = [2, 3, 4], keepdims = 0> (m)
    y = Transpose <perm = [0, 2, 3, 4, 1]> (m)
}"""

# Each block's Add reads the previous block's NHWC output: the compensation for the graph input
# reuses the existing Transpose(0,3,1,2) on x, and the Transposes arriving through Relu/Mul
# chains are seen by the cost check.
RESIDUAL_BLOCKS = """
g (float[1,4,4,2] x) => (float[1,2] y) <float[2,2,1,1] w0 = {1, 0.5, -0.5, 1},
                                        float[2,2,1,1] w1 = {0.5, 1, 1, -1}, float[2] g = {0.5, 2}> {
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
}"""

# Found by the property test: pushing T(x) through Add(x, T(x)) needs T(x) on the other operand
# again; the two traded places up to the push limit and a second run changed more.
X_PLUS_ITS_TRANSPOSE = """
g (float[1,2,2,1] x) => (float[1,2,2,1] y, float[1,2,2,1] z) {
    t = Transpose <perm = [0, 2, 1, 3]> (x)
    unused = Transpose <perm = [0, 2, 1, 3]> (x)
    a = Add (x, t)
    y = Transpose <perm = [0, 2, 1, 3]> (a)
    z = Transpose <perm = [0, 1, 2, 3]> (x)
}"""

# Found by the property test: a push composed a consumer Transpose into the identity and a later
# push composed it back before the identity was dropped; the pair chased each other.
PENDING_IDENTITY = """
g (float[2,2,2,1] x) => (float[2,2,2] s, float[2,2,2,1] y) {
    s = Squeeze <axes = [3]> (x)
    t = Transpose <perm = [1, 0, 2, 3]> (x)
    u = Unsqueeze <axes = [3]> (s)
    a = Add (u, t)
    unused = Transpose <perm = [1, 0, 2, 3]> (a)
    b = Add (a, a)
    y = Transpose <perm = [0, 1, 2, 3]> (b)
}"""

# Found by the property test: Add(t, T(t)) with t = T(p)(u): undoing T(p) on the second operand
# pointed at t itself, whose Transpose the push removed (a dangling input).
OPERAND_FROM_THE_PUSHED_TENSOR = """
g (float[3,1] x) => (float[1,1] y) <int64[2] sizes = {1, 2}> {
    s1, s2 = Split <axis = 0> (x, sizes)
    t6 = Transpose <perm = [1, 0]> (s1)
    a7 = Add (s1, s1)
    a8 = Add (t6, a7)
    t9 = Transpose <perm = [1, 0]> (a8)
    t10 = Transpose <perm = [0, 1]> (t9)
    y = Add (a8, t10)
}"""

# Found by a random search: the compensation on sub was counted as cancelled by the Transpose
# coming down through Sub, but was pushed on first; the two chased each other round the Add up
# to the push limit.
COMPENSATION_WAITS = """
g (float[2,3] x) => (float[3,2] y) <float c = {0}> {
    t2 = Transpose <perm = [1, 0]> (x)
    t3 = Transpose <perm = [1, 0]> (x)
    n = Neg (t2)
    s = Sub (t3, c)
    y = Add (s, n)
}"""

# t * Sigmoid(t) before a global pool (EfficientNet's head): the operand Sigmoid(t) of the Mul
# is counted as carrying the pushed Transpose, since the push moves it past both readers of t;
# the Transpose then vanishes into the reduction.
SWISH = """
g (float[1,3,4,4] x) => (float[1,3] y) {
    t = Transpose <perm = [0, 2, 3, 1]> (x)
    s = Sigmoid (t)
    m = Mul (t, s)
    y = ReduceMean <axes = [1, 2], keepdims = 0> (m)
}"""

# Found by the property test: T(T(x)) at a graph output, x a graph input, composes to the
# identity, which rule 1 keeps as an Identity: a node the look-ahead must count. Counted as gone,
# with the Unsqueeze case 4b adds for b, 3 nodes became 4.
IDENTITY_AT_OUTPUT_IS_A_NODE = """
g (float[3,3] x, float[3] b) => (float[3,3] m, float[3,3] z) {
    t = Transpose <perm = [1, 0]> (x)
    m = Max (b, t)
    z = Transpose <perm = [1, 0]> (t)
}"""

COST = [
    pytest.param(FAN_OUT, ["Relu", "Sigmoid"], id="fan-out-pushed-into-every-consumer"),
    pytest.param(FAN_OUT_INTO_A_BARRIER, expect(["Transpose", "Resize", "Identity"],
                                                stats={"transposes_after": 1}),
                 id="fan-out-negative-one-consumer-is-a-barrier"),
    pytest.param(NDHWC, expect(["Add", "Relu", "ReduceMax"], opset=13), id="ndhwc-5d"),
    pytest.param(RESIDUAL_BLOCKS, ["Transpose", "Conv", "Relu", "Mul", "Add", "Conv", "Relu",
                                   "Add", "ReduceMax"], id="residual-blocks-share-the-input-transpose"),
    pytest.param(X_PLUS_ITS_TRANSPOSE, expect(["Transpose", "Add", "Transpose", "Identity"],
                                              opset=11, stats={"pushed_through": 0}),
                 id="regression-x-plus-its-transpose-does-not-oscillate"),
    pytest.param(PENDING_IDENTITY, expect(opset=11, stats={"transposes_after": 1,
                                                           "pushed_through": (0, 4)}),
                 id="regression-pending-identity-settled-before-the-next-push"),
    pytest.param(OPERAND_FROM_THE_PUSHED_TENSOR, expect(opset=13),
                 id="regression-operand-transposed-from-the-pushed-tensor"),
    pytest.param(COMPENSATION_WAITS, expect(["Neg", "Sub", "Add", "Transpose"], opset=11,
                                            stats={"pushed_through": 3}),
                 id="regression-compensation-waits-for-the-arriving-transpose"),
    pytest.param(SWISH, expect(["Sigmoid", "Mul", "ReduceMean"], opset=13),
                 id="swish-reads-the-pushed-tensor-twice"),
    pytest.param(IDENTITY_AT_OUTPUT_IS_A_NODE, expect(), id="identity-at-an-output-is-a-node"),
]


@pytest.mark.parametrize("text, expected", COST)
def test_cost(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


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


def test_swish_after_a_squeeze_is_seen_by_the_look_ahead(ort_run, rng):
    # Conv1D -> Swish -> global average pool: the Transpose is pushed through the Squeeze into a
    # Swish whose Mul reads the squeezed tensor twice; the look-ahead must see the planned
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


def test_regression_nested_concats_do_not_make_transposes_chase_each_other(ort_run, rng):
    # Found on InceptionV3 through TFLite: a Concat of two Concats and two convolution branches,
    # read by four Transposes. A compensation pushed back through the Concat it was made for
    # undid that push, and the two Transposes traded places until the push limit (8 left of 11,
    # 203 pushes, names thousands of characters long).
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
