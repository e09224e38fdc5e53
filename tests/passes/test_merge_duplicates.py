"""merge-duplicates: the same op on the same inputs is computed once."""

from __future__ import annotations

import numpy as np
import onnx

from graphfix.passes.merge_duplicates import MergeDuplicates

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def parse(body: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(HEADER + body)


def ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def check(model: onnx.ModelProto, ort_run, rng) -> onnx.ModelProto:
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = MergeDuplicates()(model)
    onnx.checker.check_model(result.model, full_check=True)
    feeds = {v.name: rng.standard_normal([d.dim_value for d in v.type.tensor_type.shape.dim])
             .astype(np.float32) for v in original.graph.input}
    expected, actual = ort_run(original, feeds), ort_run(result.model, feeds)
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)
    assert not MergeDuplicates()(result.model).modified
    return result.model


def test_split_transposes_are_merged_and_cascade(ort_run, rng):
    # ORT's transpose optimizer gives each reader its own copy of a Transpose.
    model = check(parse("""
    g (float[2,3,4] x) => (float[4,3,2] y) {
        a = Transpose <perm = [2, 1, 0]> (x)
        b = Transpose <perm = [2, 1, 0]> (x)
        ra = Relu (a)
        rb = Relu (b)
        y = Add (ra, rb)
    }"""), ort_run, rng)
    assert ops(model) == ["Transpose", "Relu", "Add"]


def test_different_attributes_or_inputs_stay_apart(ort_run, rng):
    model = check(parse("""
    g (float[2,3,4] x) => (float[4,3,2] y, float[3,4,2] z, float[4,3,2] w) {
        y = Transpose <perm = [2, 1, 0]> (x)
        z = Transpose <perm = [1, 2, 0]> (x)
        r = Relu (x)
        w = Transpose <perm = [2, 1, 0]> (r)
    }"""), ort_run, rng)
    assert ops(model) == ["Transpose", "Transpose", "Relu", "Transpose"]


def test_a_graph_output_keeps_its_producer(ort_run, rng):
    model = check(parse("""
    g (float[2,3] x) => (float[2,3] y, float[2,3] z) {
        y = Relu (x)
        z = Relu (x)
    }"""), ort_run, rng)
    assert ops(model) == ["Relu", "Relu"]


def test_random_ops_are_never_merged():
    model = parse("""
    g (float[2,3] x) => (float[2,3] y) {
        a = RandomUniformLike (x)
        b = RandomUniformLike (x)
        y = Add (a, b)
    }""")
    result = MergeDuplicates()(model)
    assert not result.modified and ops(result.model) == ["RandomUniformLike"] * 2 + ["Add"]


def test_bodies_read_the_merged_name(ort_run, rng):
    model = parse("""
    g (float[2,3] x, bool c) => (float[2,3] y) {
        a = Relu (x)
        b = Relu (x)
        y = If (c) <
            then_branch = t () => (float[2,3] o) { o = Neg (b) },
            else_branch = e () => (float[2,3] p) { p = Neg (a) }
        >
    }""")
    result = MergeDuplicates()(model)
    assert ops(result.model) == ["Relu", "If"]
    onnx.checker.check_model(result.model, full_check=True)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    for flag in (True, False):
        y = ort_run(result.model, {"x": x, "c": np.array(flag)})["y"]
        np.testing.assert_array_equal(y, -np.maximum(x, 0))


def test_an_optional_output_only_the_later_node_names_is_kept(ort_run, rng):
    """GRU(x) -> [y1, ""] and the same GRU -> [y2, h2], h2 the next GRU's initial state: the
    merge read h2 as "", and the next GRU started from zeros."""
    from onnx import helper, numpy_helper

    hidden = 3
    weights = {name: numpy_helper.from_array(
        (rng.standard_normal(shape) * 0.5).astype(np.float32), name) for name, shape in (
            ("W", (1, 3 * hidden, 2)), ("R", (1, 3 * hidden, hidden)))}
    nodes = [
        helper.make_node("GRU", ["x", "W", "R"], ["y1", ""], hidden_size=hidden),
        helper.make_node("GRU", ["x", "W", "R"], ["y2", "h2"], hidden_size=hidden),
        helper.make_node("GRU", ["x", "W", "R", "", "", "h2"], ["y3", "h3"],
                         hidden_size=hidden),
        helper.make_node("Add", ["y1", "y2"], ["s"]),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 1, 2])],
        [helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT, [4, 1, 1, hidden]),
         helper.make_tensor_value_info("h3", onnx.TensorProto.FLOAT, [1, 1, hidden])],
        list(weights.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    merged = check(model, ort_run, rng)
    assert ops(merged).count("GRU") == 2
