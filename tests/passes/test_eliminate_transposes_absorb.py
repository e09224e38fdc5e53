"""Rule 7: a consumer that ends the layout takes the Transpose in (7a Shape and Size, 7b a Flatten
into constant weights, 7c CastLike's type input). A row is ``pytest.param(onnx_text, expected,
id)`` (:mod:`tests.passes.transposes_support`)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.passes.transposes_support import check_row, expect, optimize, parse, transposes

# ------------------------------------------------------------------ 7a Shape and Size
SHAPES = """
g (float[N,8,6,3] x) => (float[N,8,6,3] y, int64[4] s, int64[2] hw, int64[1] c) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    s = Shape (t)
    hw = Shape <start = -2> (t)
    c = Shape <start = 1, end = 2> (t)
    r = Relu (t)
    y = Transpose <perm = [0, 2, 3, 1]> (r)
}"""

SHAPE_SLICE_KEPT = """
g (float[N,8,6,3] x) => (float[N,8,6,3] y, int64[1] n) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    n = Shape <end = 1> (t)
    y = Transpose <perm = [0, 2, 3, 1]> (t)
}"""

SIZE = """
g (float[2,4,5,6] x) => (int64 n, float[2,4,5,6] y) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    n = Size (t)
    y = Transpose <perm = [0, 2, 3, 1]> (t)
}"""

# At IR 3 every initializer is also a graph input, so the Gather's indices become Constant nodes
# that the look-ahead must count (pushing would make 6 nodes 8).
SHAPES_IR3 = """
<ir_version: 3, opset_import: ["" : 9]>
g (float[1,8,6,3] x) => (float[1,8,6,3] y, int64[4] s, int64[4] s2, int64[4] s3) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    s = Shape (t)
    s2 = Shape (t)
    s3 = Shape (t)
    r = Relu (t)
    y = Transpose <perm = [0, 2, 3, 1]> (r)
}"""

# Found by the property test: each Shape absorbed gets a Gather the look-ahead must count;
# pushed past Neg, the Transpose meets a Shape of t and one of Neg(t) (4 nodes would be 5).
SHAPES_OF_TWO_TENSORS = """
g (float[1,2,3,4] x) => (int64[4] s1, int64[4] s2) {
    t = Transpose <perm = [0, 2, 3, 1]> (x)
    s1 = Shape (t)
    n = Neg (t)
    s2 = Shape (n)
}"""

RULE_7A = [
    pytest.param(SHAPES, expect({"Transpose": 0, "Gather": 3}, dims={"N": 3},
                                stats={"absorbed_by_consumers": 3}),
                 id="7a-shape-of-the-transposed-tensor-becomes-a-gather"),
    pytest.param(SHAPE_SLICE_KEPT, expect(["Shape", "Identity"], dims={"N": 3}),
                 id="7a-shape-slice-the-permutation-keeps-needs-no-gather"),
    pytest.param(SIZE, ["Size", "Identity"], id="7a-size-of-the-transposed-tensor"),
    pytest.param(SHAPES_OF_TWO_TENSORS, expect(), id="7a-shapes-of-two-tensors"),
    pytest.param(SHAPES_IR3, expect(), id="7a-ir3-shapes-gain-no-nodes"),
]


@pytest.mark.parametrize("text, expected", RULE_7A)
def test_7a_shape_and_size(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


# ------------------------------------------------------------------ 7b Flatten into weights
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
def test_7b_flatten_into_constant_weights_reorders_their_rows(flatten, extra, ort_run, rng):
    model = flatten_head(flatten, rng, extra=extra)
    result = optimize(model, ort_run, rng, exact=False, dims={"N": 3})
    assert transposes(result.model) == 0
    assert result.stats["absorbed_by_consumers"] == 1
    assert [i.name for i in result.model.graph.initializer if i.name == "w0"] == []


def test_7b_flatten_with_a_shape_computed_at_run_time(ort_run, rng):
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


def test_7b_gemm_trans_b_reorders_the_weight_columns(ort_run, rng):
    model = flatten_head("Flatten (t)", rng, weights=(7, 60), extra={
        "bias": rng.standard_normal(7).astype(np.float32)})
    model.graph.node[-1].CopyFrom(helper.make_node("Gemm", ["f", "w0", "bias"], ["y"], transB=1))
    result = optimize(model, ort_run, rng, exact=False, dims={"N": 3})
    assert transposes(result.model) == 0


@pytest.mark.parametrize("case", ["exact", "batch moved", "not a flatten", "weights computed",
                                  "flatten read elsewhere", "transA"])
def test_7b_flatten_negative(case, ort_run, rng):
    flatten, extra, options = "Flatten (t)", None, {}
    if case == "exact":
        options = {"keep_reduction_order": True}
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


# ------------------------------------------------------------------ 7c CastLike
CASTLIKE = """
g (int64[2,3] a, float[3,2] x) => (float[2,3] y) {
    t = Transpose <perm = [1, 0]> (x)
    y = CastLike (a, t)
}"""

CASTLIKE_AND_A_PUSH = """
g (int32[2,3] a, float[3,2] x) => (float[2,3] y, float[3,2] z) {
    t = Transpose <perm = [1, 0]> (x)
    y = CastLike (a, t)
    r = Relu (t)
    z = Transpose <perm = [1, 0]> (r)
}"""

# The Transpose reaches CastLike's data input too: no absorption (case 4a refuses as well).
CASTLIKE_BOTH_INPUTS = """
g (float[3,2] x) => (float[2,3] y) {
    t = Transpose <perm = [1, 0]> (x)
    y = CastLike (t, t)
}"""

# On the data input CastLike is elementwise (case 4a): the pair cancels.
CASTLIKE_DATA = """
g (float[3,2] x) => (int64[3,2] y) <int64 like = {0}> {
    t = Transpose <perm = [1, 0]> (x)
    c = CastLike (t, like)
    y = Transpose <perm = [1, 0]> (c)
}"""


def _castlike_reads_x(result) -> None:
    (node,) = [n for n in result.model.graph.node if n.op_type == "CastLike"]
    assert list(node.input) == ["a", "x"]


RULE_7C = [
    pytest.param(CASTLIKE, expect(["CastLike"], stats={"absorbed_by_consumers": 1},
                                  check=_castlike_reads_x), id="7c-castlike-reads-the-type"),
    pytest.param(CASTLIKE_AND_A_PUSH, expect(["CastLike", "Relu"], check=_castlike_reads_x,
                                             stats={"absorbed_by_consumers": 1}),
                 id="7c-castlike-beside-a-push"),
    pytest.param(CASTLIKE_BOTH_INPUTS, expect(["Transpose", "CastLike"], modified=False),
                 id="7c-negative-castlike-reads-it-as-data-too"),
    pytest.param(CASTLIKE_DATA, expect(["CastLike"], stats={"absorbed_by_consumers": 0}),
                 id="7c-castlike-data-input-is-elementwise"),
]


@pytest.mark.parametrize("text, expected", RULE_7C)
def test_7c_castlike(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)
