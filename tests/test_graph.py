"""The shared graph layer: walking, node counts, the live index, order, dimensions, snapshots."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from graphfix import graph

LOCAL_FUNCTION = """
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[2,4] x, bool c) => (float[2,4] y) {
    a = local.Swish (x)
    b = local.Swish (a)
    y = If (c) <
        then_branch = t () => (float[2,4] o) { o = Relu (b) },
        else_branch = e () => (float[2,4] p) { p = Neg (b) }
    >
}
<domain: "local", opset_import: ["" : 17]>
Swish (x) => (y) {
    t = Sigmoid (x)
    y = Mul (t, x)
}"""


def test_a_node_count_holds_bodies_and_each_function_once():
    model = onnx.parser.parse_model(LOCAL_FUNCTION)
    # 3 nodes, 2 in the If branches, 2 in the function's body (called twice, counted once)
    assert graph.count_nodes(model) == 7
    assert graph.count_nodes(model.graph) == 5
    assert len(list(graph.graphs(model.graph))) == 3
    assert [g.name for g in graph.graphs_bottom_up(model.graph)][-1] == "g"


def test_outer_refs_and_reads_see_what_bodies_read():
    model = onnx.parser.parse_model(LOCAL_FUNCTION)
    if_node = model.graph.node[2]
    assert graph.reads(if_node) == ["c", "b", "b"]
    assert graph.outer_refs(if_node.attribute[0].g) == {"b"}


def test_the_live_index_follows_edits():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) { a = Relu (x)  y = Neg (a) }""")
    index = graph.Index(model.graph)
    relu, neg = model.graph.node
    assert index.producer["a"] is relu and index.readers("a") == [neg]
    assert index.only_reader("a", neg) and index.is_read("y") and not index.is_read("x2")
    old = index.set_input(neg, 0, "x")
    assert old == "a" and not index.is_read("a") and index.readers("x") == [relu, neg]
    index.set_output(relu, 0, "b")
    assert "a" not in index.producer and index.producer["b"] is relu
    index.remove(relu)
    assert "b" not in index.producer and index.readers("x") == [neg]


def test_toposort_keeps_a_valid_order_and_pulls_producers_forward():
    nodes = [helper.make_node("Neg", ["a"], ["y"], name="late"),
             helper.make_node("Relu", ["x"], ["a"], name="early"),
             helper.make_node("Abs", ["x"], ["z"], name="other")]
    assert [n.name for n in graph.toposort(nodes)] == ["early", "late", "other"]
    ordered = graph.toposort([nodes[1], nodes[0], nodes[2]])
    assert [n.name for n in ordered] == ["early", "late", "other"]
    with pytest.raises(graph.CycleError):
        graph.toposort([helper.make_node("Neg", ["b"], ["a"]), helper.make_node("Neg", ["a"], ["b"])])


def test_live_nodes_drops_what_reaches_no_root():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["dead"]),
             helper.make_node("Abs", ["a"], ["y"])]
    assert [n.op_type for n in graph.live_nodes(nodes, {"y"})] == ["Relu", "Abs"]


def test_fresh_names_never_collide():
    names = graph.Names({"x", "x_1"})
    assert [names.fresh("x"), names.fresh("x"), names.fresh("y")] == ["x_2", "x_3", "y"]


def test_minus_one_is_an_unknown_size_and_the_signature_keeps_it():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,3,4,5] x) => (float[N,60] y) {
        shape = Constant <value = int64[2] {0, -1}> ()
        y = Reshape (x, shape)
    }""")
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.shape.dim[0].Clear()
        value.type.tensor_type.shape.dim[0].dim_value = -1
    assert graph.dims(model.graph.input[0]) == (None, 3, 4, 5)
    written = graph.clear_unknown_dims(model)
    assert written.written == [("x", 0, -1), ("y", 0, -1)]
    assert not model.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")
    written.restore(model)
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_value == -1


def test_a_snapshot_takes_an_in_place_rewrite_back_without_copying_weights():
    weight = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 3])], [weight]))
    before = model.SerializeToString()
    snapshot = graph.Snapshot(model)
    model.graph.node.add(op_type="Relu", input=["y"], output=["z"])
    del model.graph.initializer[:]
    model.opset_import[0].version = 99
    snapshot.restore(model)
    assert model.SerializeToString() == before


def test_keep_only_and_delete_positions_edit_in_place_in_order() -> None:
    from graphfix.graph import delete_positions, drop_unread_initializers, keep_only

    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Neg", [name], [f"{name}_out"]) for name in "abcde"], "g",
        [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [1]) for n in "abcde"],
        [onnx.helper.make_tensor_value_info("a_out", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor(n, onnx.TensorProto.FLOAT, [1], [0.0]) for n in "vwxyz"])
    assert keep_only(graph.node, lambda n: n.input[0] in "ace") == 2
    assert [n.input[0] for n in graph.node] == ["a", "c", "e"]
    assert delete_positions(graph.node, [2, 0, 2]) == 2
    assert [n.input[0] for n in graph.node] == ["c"]
    # Unread initializers go; those a node reads, an output names or an input lists stay.
    graph.node[0].input.append("w")
    graph.output.add().name = "x"
    graph.input.add().name = "y"
    assert drop_unread_initializers(graph) == 2
    assert [t.name for t in graph.initializer] == ["w", "x", "y"]


def test_new_names_are_shortened_where_read_in_bodies_too():
    import onnxruntime as ort

    then = helper.make_graph([helper.make_node("Neg", ["made_by_a_rewrite"], ["t"],
                                               name="Neg_3")], "then",
                             [], [helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [3])])
    other = helper.make_graph([helper.make_node("Identity", ["made_by_a_rewrite"], ["e"],
                                                name="kept_in_body")],
                              "else", [],
                              [helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Relu", ["x"], ["made_by_a_rewrite"], name="Relu_0"),
             helper.make_node("Add", ["made_by_a_rewrite", "folded_weight"], ["y"], name="keep"),
             helper.make_node("If", ["c"], ["z"], then_branch=then, else_branch=other)]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3]),
                     helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3]),
         helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "folded_weight")]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    feeds = {"x": np.array([-1, 0.5, 2], np.float32), "c": np.array(True)}
    before = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    size = model.ByteSize()
    saved = graph.shorten_new_names(model.graph, {"x", "c", "y", "z", "keep", "kept_in_body"})
    assert saved > 0 and model.ByteSize() < size
    onnx.checker.check_model(model, full_check=True)
    assert [n.name for n in model.graph.node] == ["", "keep", ""]
    # a body's nodes too (onnxsim names those of a Loop's body): the new name goes
    assert [n.name for g in (then, other) for n in
            next(a.g for a in model.graph.node[2].attribute if a.g.name == g.name).node] == [
        "", "kept_in_body"]
    assert "made_by_a_rewrite" not in graph.all_names(model.graph)
    after = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)


def test_shortened_names_keep_quantization_parameters_and_bodies_types():
    then = helper.make_graph([helper.make_node("Neg", ["made_by_a_rewrite"], ["t"])], "then",
                             [], [helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [3])])
    then.value_info.append(helper.make_tensor_value_info("made_by_a_rewrite",
                                                         onnx.TensorProto.FLOAT, [3]))
    other = helper.make_graph([helper.make_node("Identity", ["made_by_a_rewrite"], ["e"])],
                              "else", [],
                              [helper.make_tensor_value_info("e", onnx.TensorProto.FLOAT, [3])])
    nodes = [helper.make_node("Mul", ["x", "scale_made_by_a_rewrite"], ["made_by_a_rewrite"]),
             helper.make_node("If", ["c"], ["z"], then_branch=then, else_branch=other)]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3]),
                     helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [3])],
        [numpy_helper.from_array(np.array([2.0], np.float32), "scale_made_by_a_rewrite")]),
        opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    annotation = model.graph.quantization_annotation.add(tensor_name="made_by_a_rewrite")
    annotation.quant_parameter_tensor_names.add(key="SCALE_TENSOR",
                                                value="scale_made_by_a_rewrite")
    graph.shorten_new_names(model.graph, {"x", "c", "z"})
    # the annotated tensor and its parameter keep their names: the annotation names them
    assert "scale_made_by_a_rewrite" in {t.name for t in model.graph.initializer}
    assert model.graph.node[0].output[0] == "made_by_a_rewrite"
    onnx.checker.check_model(model, full_check=True)
    # a body's type of an outer name follows the name where it is renamed
    plain = onnx.ModelProto()
    plain.CopyFrom(model)
    del plain.graph.quantization_annotation[:]
    graph.shorten_new_names(plain.graph, {"x", "c", "z"})
    renamed = plain.graph.node[0].output[0]
    assert renamed != "made_by_a_rewrite"
    body = next(a.g for a in plain.graph.node[1].attribute if a.name == "then_branch")
    assert [v.name for v in body.value_info] == [renamed]
