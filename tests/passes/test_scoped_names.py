"""Names in nested bodies: a rewrite that renames reads, or reads a constant of the main graph,
must respect what each enclosing body defines.

A value a body defines under a name hides the outer value of that name, in the body and in the
bodies within it. Four rewrites got that wrong: a read renamed to a name a nested Loop body
defines itself (fold-shapes rule 10, merge-duplicates, rule 12's inlining) was captured by the
body's own value, and rule 12 folded an If two levels deep on the main graph's initializer
that a Loop body between them redefines as a carried value. Each model here takes the guilty
path only for inputs above 100 (generated inputs never reach it), and each is checked there.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from graphfix.passes.fold_shapes import FoldShapes
from graphfix.passes.merge_duplicates import MergeDuplicates

LARGE = {"x": np.array([101.0, 2.0, 3.0], np.float32)}
SMALL = {"x": np.array([1.0, 2.0, 3.0], np.float32)}


def vi(name: str, elem: int = T.FLOAT, shape: tuple = (3,)) -> onnx.ValueInfoProto:
    return h.make_tensor_value_info(name, elem, list(shape))


def scalars(**values: float) -> list[onnx.TensorProto]:
    return [h.make_tensor(k, T.INT64 if k == "trip" else T.FLOAT, [], [v])
            for k, v in values.items()]


def model(graph: onnx.GraphProto) -> onnx.ModelProto:
    made = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    made.ir_version = 8
    onnx.checker.check_model(made, full_check=True)
    return made


def loop_body(carried: str, reads: str, out: str) -> onnx.GraphProto:
    """A Loop body whose carried value is named ``carried`` and that adds ``reads`` to it."""
    return h.make_graph([h.make_node("Identity", ["cond"], ["cond_out"]),
                         h.make_node("Add", [carried, reads], [out])], "loop_body",
                        [vi("i", T.INT64, ()), vi("cond", T.BOOL, ()), vi(carried)],
                        [vi("cond_out", T.BOOL, ()), vi(out)])


def above_100(then: onnx.GraphProto, outputs: list[str], condition: list[onnx.NodeProto]
              ) -> list[onnx.NodeProto]:
    """``If max(x) > 100: then, else x`` (the else branch copies ``x`` to each output)."""
    other = h.make_graph([h.make_node("Identity", ["x"], [f"{name}_else"]) for name in outputs],
                         "else", [], [vi(f"{name}_else") for name in outputs])
    return [*condition, h.make_node("ReduceMax", ["x"], ["max"], keepdims=0),
            h.make_node("Greater", ["max", "hundred"], ["large"]),
            h.make_node("If", ["large"], outputs, then_branch=then, else_branch=other)]


def same_function(pass_, original: onnx.ModelProto, ort_run) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(original)
    result = pass_()(copy)
    assert result.modified
    onnx.checker.check_model(result.model, full_check=True)
    for feeds in (LARGE, SMALL):
        expected, actual = ort_run(original, feeds), ort_run(result.model, feeds)
        for name, value in expected.items():
            np.testing.assert_array_equal(actual[name], value, err_msg=name)
    return result.model


def test_a_read_renamed_into_a_body_that_defines_the_new_name_is_not_captured(ort_run):
    """Rule 10: Squeeze(Unsqueeze(src)) is src; a Loop body below reads the Squeeze's output
    and has a carried value of its own named ``src``."""
    then = h.make_graph([
        h.make_node("Constant", [], ["axes"], value=h.make_tensor("a", T.INT64, [1], [0])),
        h.make_node("Add", ["x", "one"], ["src"]),
        h.make_node("Unsqueeze", ["src", "axes"], ["u"]),
        h.make_node("Squeeze", ["u", "axes"], ["s"]),
        h.make_node("Mul", ["x", "ten"], ["x10"]),
        h.make_node("Loop", ["trip", "", "x10"], ["y"], body=loop_body("src", "s", "v")),
    ], "then", [], [vi("y")])
    original = model(h.make_graph(above_100(then, ["y"], []), "g", [vi("x")], [vi("y")],
                                  scalars(one=1.0, ten=10.0, hundred=100.0, trip=1)))
    folded = same_function(FoldShapes, original, ort_run)
    branch = folded.graph.node[-1].attribute[0].g
    assert "Squeeze" not in [n.op_type for n in branch.node]


def test_a_merged_read_is_not_captured_by_a_body_that_defines_the_kept_name(ort_run):
    """merge-duplicates: b = Relu(x) merges into a = Relu(x); a Loop body reading b has a
    carried value named ``a``."""
    then = h.make_graph([h.make_node("Loop", ["trip", "", "x10"], ["z"],
                                     body=loop_body("a", "b", "v"))], "then", [], [vi("z")])
    nodes = [h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["x"], ["b"]),
             h.make_node("Mul", ["x", "ten"], ["x10"])]
    nodes = above_100(then, ["z"], nodes) + [h.make_node("Add", ["z", "a"], ["y"])]
    original = model(h.make_graph(nodes, "g", [vi("x")], [vi("y")],
                                  scalars(ten=10.0, hundred=100.0, trip=1)))
    merged = same_function(MergeDuplicates, original, ort_run)
    assert [n.op_type for n in merged.graph.node].count("Relu") == 1


def test_an_inlined_branch_output_is_not_captured_by_a_body_within(ort_run):
    """Rule 12: the taken branch's output ``a`` becomes the If's ``y``; a Loop body within
    the branch reads ``a`` and has a carried value named ``y``."""
    inner = h.make_graph([h.make_node("Mul", ["x", "ten"], ["x10"]),
                          h.make_node("Loop", ["trip", "", "x10"], ["l"],
                                      body=loop_body("y", "a", "v"))], "inner", [], [vi("l")])
    branch = h.make_graph([h.make_node("Add", ["x", "one"], ["a"]),
                           *above_100(inner, ["l"], [])], "branch", [], [vi("a"), vi("l")])
    nodes = [h.make_node("If", ["flag"], ["y", "z"], then_branch=branch, else_branch=branch)]
    original = model(h.make_graph(nodes, "g", [vi("x")], [vi("y"), vi("z")],
                                  [*scalars(one=1.0, ten=10.0, hundred=100.0, trip=1),
                                   h.make_tensor("flag", T.BOOL, [], [True])]))
    inlined = same_function(FoldShapes, original, ort_run)
    assert "If" not in [n.op_type for n in inlined.graph.node][:1]


def test_an_if_in_a_body_is_not_folded_on_a_main_constant_a_body_between_redefines(ort_run):
    """Rule 12: an If two levels down reads ``flag``, a value the Loop body between carries;
    the main graph's initializer of that name is not the If's condition."""
    add = h.make_graph([h.make_node("Add", ["x", "one"], ["p"])], "add", [], [vi("p")])
    sub = h.make_graph([h.make_node("Sub", ["x", "one"], ["q"])], "sub", [], [vi("q")])
    middle = h.make_graph([h.make_node("If", ["flag"], ["m"], then_branch=add, else_branch=sub)],
                          "middle", [], [vi("m")])
    copy = h.make_graph([h.make_node("Identity", ["x"], ["m2"])], "copy", [], [vi("m2")])
    body = h.make_graph([h.make_node("Identity", ["cond"], ["cond_out"]),
                         h.make_node("Identity", ["flag"], ["flag_out"]),
                         h.make_node("Greater", ["i", "minus_one"], ["always"]),
                         h.make_node("If", ["always"], ["s"], then_branch=middle,
                                     else_branch=copy)], "body",
                        [vi("i", T.INT64, ()), vi("cond", T.BOOL, ()), vi("flag", T.BOOL, ())],
                        [vi("cond_out", T.BOOL, ()), vi("flag_out", T.BOOL, ()), vi("s")])
    nodes = [h.make_node("ReduceMax", ["x"], ["max"], keepdims=0),
             h.make_node("Greater", ["max", "hundred"], ["large"]),
             h.make_node("Loop", ["trip", "", "large"], ["flag_final", "ys"], body=body),
             h.make_node("Cast", ["flag"], ["flag_float"], to=T.FLOAT),
             h.make_node("Mul", ["x", "flag_float"], ["y"])]
    original = model(h.make_graph(
        nodes, "g", [vi("x")], [vi("ys", shape=(2, 3)), vi("y")],
        [*scalars(one=1.0, hundred=100.0, trip=2), h.make_tensor("flag", T.BOOL, [], [False]),
         h.make_tensor("minus_one", T.INT64, [], [-1])]))
    copy_ = onnx.ModelProto()
    copy_.CopyFrom(original)
    result = FoldShapes()(copy_)
    for feeds in (LARGE, SMALL):
        expected, actual = ort_run(original, feeds), ort_run(result.model, feeds)
        for name, value in expected.items():
            np.testing.assert_array_equal(actual[name], value, err_msg=name)
