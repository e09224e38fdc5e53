"""hoist-loop-invariants: the weights a Loop carries through unchanged are read from outside
it; small weights and values computed at run time stay carried."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import graphfix
from graphfix.passes._measuring import run_outputs
from graphfix.passes.hoist_loop_invariants import HoistLoopInvariants

F, F16, I64, B = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.INT64,
                  onnx.TensorProto.BOOL)


H = 1024  # the recurrence's width: its float16 weight is 2 MiB, past MIN_BYTES


def _rnn(*, through_identity: bool = False, final_is_output: bool = False,
         width: int = H) -> onnx.ModelProto:
    """A Keras-3-style recurrence as tf2onnx writes it: the float16 weight ``w`` a carried
    value the body passes through unchanged, cast to float32 in every iteration."""
    passed = "w_id" if through_identity else "w_in"
    nodes = [helper.make_node("Cast", ["w_in"], ["wf"], to=F),
             helper.make_node("Cast", ["bias"], ["bf"], to=F),
             helper.make_node("MatMul", ["h_in", "wf"], ["p"]),
             helper.make_node("Add", ["p", "bf"], ["q"]),
             helper.make_node("Tanh", ["q"], ["h_out"]),
             helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Identity", ["h_out"], ["step"])]
    if through_identity:
        nodes.append(helper.make_node("Identity", ["w_in"], ["w_id"]))
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("w_in", F16, [width, width]),
         helper.make_tensor_value_info("h_in", F, [1, width])],
        [helper.make_tensor_value_info("cond_out", B, []),
         helper.make_tensor_value_info(passed, F16, [width, width]),
         helper.make_tensor_value_info("h_out", F, [1, width]),
         helper.make_tensor_value_info("step", F, [1, width])])
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(
        (rng.standard_normal((width, width)) / width ** 0.5).astype(np.float16), "w"),
               numpy_helper.from_array(rng.standard_normal((1, width)).astype(np.float16), "bias"),
               numpy_helper.from_array(np.array(True), "go")]
    outputs = [helper.make_tensor_value_info("h", F, [1, width]),
               helper.make_tensor_value_info("steps", F, ["T", 1, width]),
               helper.make_tensor_value_info("w_back", F, [width, width])]
    main = [helper.make_node("Loop", ["trips", "go", "w", "h0"], ["w_final", "h", "steps"],
                             body=body)]
    if final_is_output:
        outputs.append(helper.make_tensor_value_info("w_final", F16, [width, width]))
    main.append(helper.make_node("Cast", ["w_final"], ["w_back"], to=F))
    graph = helper.make_graph(
        main, "g", [helper.make_tensor_value_info("trips", I64, []),
                    helper.make_tensor_value_info("h0", F, [1, width])], outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _feeds(trips: int, width: int = H) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(trips)
    return [{"trips": np.array(trips, np.int64),
             "h0": rng.standard_normal((1, width)).astype(np.float32)}]


def _loop(model: onnx.ModelProto) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.op_type == "Loop")


def _body_ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in _loop(model).attribute[0].g.node]


@pytest.mark.parametrize("through_identity", [False, True])
def test_a_weight_passed_through_is_read_from_outside_the_loop(through_identity):
    model = _rnn(through_identity=through_identity)
    names = ["h", "steps", "w_back"]
    expected = {trips: run_outputs(model, _feeds(trips), names)[0] for trips in (0, 1, 5)}
    result = HoistLoopInvariants()(onnx.ModelProto.FromString(model.SerializeToString()))
    assert result.modified
    assert result.stats["carried_values_dropped"] == 1
    loop = _loop(result.model)
    assert list(loop.input) == ["trips", "go", "h0"] and list(loop.output) == ["h", "steps"]
    body = loop.attribute[0].g
    assert [n.input[0] for n in body.node if n.op_type == "Cast"] == ["w", "bias"]
    assert [i.name for i in body.input] == ["i", "cond_in", "h_in"]
    assert [n.op_type for n in result.model.graph.node] == ["Loop", "Cast"]
    assert result.model.graph.node[1].input[0] == "w"  # the final value is the given one
    onnx.checker.check_model(result.model, full_check=True)
    for trips, values in expected.items():  # 0 trips too: the final value is the given one
        got = run_outputs(result.model, _feeds(trips), names)[0]
        for name in names:
            np.testing.assert_array_equal(got[name], values[name])


def test_a_carried_value_that_changes_stays():
    model = _rnn()
    result = HoistLoopInvariants()(model)
    assert "h0" in _loop(result.model).input and "h" in _loop(result.model).output


def test_a_slot_whose_final_value_is_a_graph_output_stays():
    result = HoistLoopInvariants()(_rnn(final_is_output=True))
    assert "w" in _loop(result.model).input
    assert result.stats["carried_values_dropped"] == 0


def test_a_small_weight_and_a_value_computed_at_run_time_stay_carried():
    """Read from outside, ONNX Runtime handles them per iteration at a cost their size does not
    repay (a Keras GRU with weights of at most 9 KB ran 0.88x as fast, PaddleOCR's table
    recognizer with weights of 98 to 786 KB 0.86-0.99x)."""
    small = HoistLoopInvariants()(_rnn(width=512))  # 512 KiB
    assert not small.modified and "w" in _loop(small.model).input
    computed = _rnn()
    computed.graph.node.insert(0, helper.make_node("Identity", ["w"], ["w_copy"]))
    _loop(computed).input[2] = "w_copy"
    assert HoistLoopInvariants()(computed).stats["carried_values_dropped"] == 0


def test_a_loop_in_a_loop_reads_the_main_graph_s_weight():
    inner = _rnn()
    inner_loop = _loop(inner)
    outer_body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Loop", ["trips", "go", "w", "h_in"], ["w_final", "h_out", "steps"],
                          body=inner_loop.attribute[0].g)],
        "outer", [helper.make_tensor_value_info("j", I64, []),
                  helper.make_tensor_value_info("c", B, []),
                  helper.make_tensor_value_info("h_in", F, [1, H])],
        [helper.make_tensor_value_info("c_out", B, []),
         helper.make_tensor_value_info("h_out", F, [1, H])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "go", "h0"], ["h"], body=outer_body)], "g",
        list(inner.graph.input), [helper.make_tensor_value_info("h", F, [1, H])],
        list(inner.graph.initializer))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    expected = run_outputs(model, _feeds(3), ["h"])[0]["h"]
    result = HoistLoopInvariants()(onnx.ModelProto.FromString(model.SerializeToString()))
    inner_loop = next(n for n in _loop(result.model).attribute[0].g.node if n.op_type == "Loop")
    assert list(inner_loop.input) == ["trips", "go", "h_in"]
    onnx.checker.check_model(result.model, full_check=True)
    np.testing.assert_array_equal(run_outputs(result.model, _feeds(3), ["h"])[0]["h"], expected)


def test_the_default_pipeline_reads_a_recurrence_s_weight_from_outside_its_loop():
    assert "hoist-loop-invariants" in graphfix.DEFAULT_PASSES
    result = graphfix.optimize(_rnn())
    assert result.report.parity["passed"]
    entry = next(p for p in result.report.passes if p.name == "hoist-loop-invariants")
    assert entry.stats["carried_values_dropped"] == 1
    assert "w" not in _loop(result.model).input
    assert result.model.ByteSize() <= _rnn().ByteSize()
    again = graphfix.optimize(result.model)
    assert [n.SerializeToString() for n in again.model.graph.node] == [
        n.SerializeToString() for n in result.model.graph.node]


def test_a_branch_inside_the_body_reads_the_weight_from_outside_too():
    """The body's If reads the carried weight in its branches: they read the Loop's given
    value once the slot goes, and compute what they computed."""
    model = _rnn()
    body = _loop(model).attribute[0].g
    cast = next(n for n in body.node if n.op_type == "Cast" and n.input[0] == "w_in")
    branch = helper.make_graph([helper.make_node("Cast", ["w_in"], ["wf_then"], to=F)], "then",
                               [], [helper.make_tensor_value_info("wf_then", F, [H, H])])
    other = helper.make_graph([helper.make_node("Cast", ["w_in"], ["wf_else"], to=F),
                               helper.make_node("Neg", ["wf_else"], ["wf_neg"])], "else",
                              [], [helper.make_tensor_value_info("wf_neg", F, [H, H])])
    index = list(body.node).index(cast)
    body.node.remove(cast)
    body.node.insert(index, helper.make_node("If", ["cond_in"], ["wf"], then_branch=branch,
                                             else_branch=other))
    names = ["h", "steps", "w_back"]
    expected = run_outputs(model, _feeds(3), names)[0]
    result = HoistLoopInvariants()(onnx.ModelProto.FromString(model.SerializeToString()))
    assert result.stats["carried_values_dropped"] == 1
    onnx.checker.check_model(result.model, full_check=True)
    got = run_outputs(result.model, _feeds(3), names)[0]
    for name in names:
        np.testing.assert_array_equal(got[name], expected[name])


@pytest.mark.parametrize("through_identity", [False, True])
def test_a_slot_whose_weight_the_body_also_emits_as_a_scan_output_stays(through_identity):
    # The body's scan output names the weight's body input: with that input gone it would name
    # nothing (a body's outputs are values of the body), and neither onnx nor ORT loads it.
    model = _rnn()
    body = next(a.g for a in _loop(model).attribute if a.name == "body")
    if through_identity:
        body.node.append(helper.make_node("Identity", ["w_in"], ["w_seen"]))
    body.output.append(helper.make_tensor_value_info(
        "w_seen" if through_identity else "w_in", F16, [H, H]))
    _loop(model).output.append("w_steps")
    model.graph.output.append(helper.make_tensor_value_info("w_steps", F16, ["T", H, H]))
    onnx.checker.check_model(model, full_check=True)
    result = HoistLoopInvariants()(model)
    assert "w" in _loop(result.model).input and result.stats["carried_values_dropped"] == 0
    onnx.checker.check_model(result.model, full_check=True)


@pytest.mark.parametrize("slot", ["state", "iteration"])
def test_a_body_input_named_as_the_weight_keeps_the_slot_carried(slot):
    # The body's own input (a carried state, or its iteration count) bears the outer weight's
    # name: reads of the pass-through slot renamed to that name would read the body's value.
    model = _rnn()
    body = next(a.g for a in _loop(model).attribute if a.name == "body")
    old = body.input[0 if slot == "iteration" else 3].name
    new = "w"
    for node in body.node:
        node.input[:] = [new if name == old else name for name in node.input]
        node.output[:] = [new if name == old else name for name in node.output]
    target = body.input[0] if slot == "iteration" else body.input[3]
    target.name = new
    for out in body.output:
        if out.name == old:
            out.name = new
    onnx.checker.check_model(model, full_check=True)
    result = HoistLoopInvariants()(model)
    assert result.stats["carried_values_dropped"] == 0
    onnx.checker.check_model(result.model, full_check=True)


def test_a_slot_whose_body_input_is_named_as_the_weight_itself_is_read_from_outside():
    # The body names the weight's own slot as the graph around names the weight (``w``):
    # with the slot gone, the body's reads of ``w`` are the outer weight's.
    model = _rnn()
    body = next(a.g for a in _loop(model).attribute if a.name == "body")
    for node in body.node:
        node.input[:] = ["w" if name == "w_in" else name for name in node.input]
    body.input[2].name = "w"
    body.output[1].name = "w"
    onnx.checker.check_model(model, full_check=True)
    reference = run_outputs(model, _feeds(3), ["h", "steps"])
    result = HoistLoopInvariants()(model)
    assert result.stats["carried_values_dropped"] == 1 and "w" not in _loop(result.model).input
    onnx.checker.check_model(result.model, full_check=True)
    got = run_outputs(result.model, _feeds(3), ["h", "steps"])
    assert all(np.array_equal(reference[0][k], got[0][k]) for k in reference[0])
