"""hoist-loop-invariants: carried values passed through unchanged are read from outside the
Loop, and body nodes that compute from constants alone run once, before it."""

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


def _rnn(*, through_identity: bool = False, final_is_output: bool = False,
         random_in_body: bool = False) -> onnx.ModelProto:
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
    if random_in_body:
        nodes.append(helper.make_node("RandomUniformLike", ["bias"], ["noise"], dtype=F))
        nodes.append(helper.make_node("Mul", ["step", "noise"], ["step_noisy"]))
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("w_in", F16, [4, 4]),
         helper.make_tensor_value_info("h_in", F, [1, 4])],
        [helper.make_tensor_value_info("cond_out", B, []),
         helper.make_tensor_value_info(passed, F16, [4, 4]),
         helper.make_tensor_value_info("h_out", F, [1, 4]),
         helper.make_tensor_value_info("step_noisy" if random_in_body else "step", F, [1, 4])])
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array((rng.standard_normal((4, 4)) / 2).astype(np.float16), "w"),
               numpy_helper.from_array(rng.standard_normal((1, 4)).astype(np.float16), "bias"),
               numpy_helper.from_array(np.array(True), "go")]
    outputs = [helper.make_tensor_value_info("h", F, [1, 4]),
               helper.make_tensor_value_info("steps", F, ["T", 1, 4]),
               helper.make_tensor_value_info("w_back", F, [4, 4])]
    main = [helper.make_node("Loop", ["trips", "go", "w", "h0"], ["w_final", "h", "steps"],
                             body=body)]
    if final_is_output:
        outputs.append(helper.make_tensor_value_info("w_final", F16, [4, 4]))
    main.append(helper.make_node("Cast", ["w_final"], ["w_back"], to=F))
    graph = helper.make_graph(
        main, "g", [helper.make_tensor_value_info("trips", I64, []),
                    helper.make_tensor_value_info("h0", F, [1, 4])], outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _feeds(trips: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(trips)
    return [{"trips": np.array(trips, np.int64),
             "h0": rng.standard_normal((1, 4)).astype(np.float32)}]


def _loop(model: onnx.ModelProto) -> onnx.NodeProto:
    return next(n for n in model.graph.node if n.op_type == "Loop")


def _body_ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in _loop(model).attribute[0].g.node]


@pytest.mark.parametrize("through_identity", [False, True])
def test_a_weight_passed_through_is_read_from_outside_and_its_cast_runs_once(through_identity):
    model = _rnn(through_identity=through_identity)
    names = ["h", "steps", "w_back"]
    expected = {trips: run_outputs(model, _feeds(trips), names)[0] for trips in (0, 1, 5)}
    result = HoistLoopInvariants()(onnx.ModelProto.FromString(model.SerializeToString()))
    assert result.modified
    assert result.stats["carried_values_dropped"] == 1 and result.stats["nodes_hoisted"] == 2
    loop = _loop(result.model)
    assert list(loop.input) == ["trips", "go", "h0"] and list(loop.output) == ["h", "steps"]
    assert "Cast" not in _body_ops(result.model) and "Identity" in _body_ops(result.model)
    assert [n.op_type for n in result.model.graph.node] == ["Cast", "Cast", "Loop", "Cast"]
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
    # the weight is read through the body's input, which is no constant: its Cast stays
    assert _body_ops(result.model).count("Cast") == 1


def test_random_nodes_and_nodes_writing_the_body_s_outputs_stay():
    result = HoistLoopInvariants()(_rnn(random_in_body=True))
    ops = _body_ops(result.model)
    assert "RandomUniformLike" in ops and "Mul" in ops


def test_a_loop_in_a_loop_hands_its_invariants_outward():
    """The inner Loop's Cast of a weight moves into the outer body, then out of the outer
    Loop too."""
    inner = _rnn()
    inner_loop = _loop(inner)
    outer_body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Loop", ["trips", "go", "w", "h_in"], ["w_final", "h_out", "steps"],
                          body=inner_loop.attribute[0].g)],
        "outer", [helper.make_tensor_value_info("j", I64, []),
                  helper.make_tensor_value_info("c", B, []),
                  helper.make_tensor_value_info("h_in", F, [1, 4])],
        [helper.make_tensor_value_info("c_out", B, []),
         helper.make_tensor_value_info("h_out", F, [1, 4])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "go", "h0"], ["h"], body=outer_body)], "g",
        list(inner.graph.input), [helper.make_tensor_value_info("h", F, [1, 4])],
        list(inner.graph.initializer))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    expected = run_outputs(model, _feeds(3), ["h"])[0]["h"]
    result = HoistLoopInvariants()(onnx.ModelProto.FromString(model.SerializeToString()))
    assert [n.op_type for n in result.model.graph.node] == ["Cast", "Cast", "Loop"]
    onnx.checker.check_model(result.model, full_check=True)
    np.testing.assert_array_equal(run_outputs(result.model, _feeds(3), ["h"])[0]["h"], expected)


PIPELINE = ["remove-initializer-inputs", "hoist-loop-invariants", "simplify", "ort-offline"]


def test_a_pipeline_with_the_pass_moves_a_recurrence_s_weights_out_of_its_loop():
    assert "hoist-loop-invariants" not in graphfix.DEFAULT_PASSES
    result = graphfix.optimize(_rnn(), passes=PIPELINE)
    assert result.report.parity["passed"]
    entry = next(p for p in result.report.passes if p.name == "hoist-loop-invariants")
    assert entry.stats["carried_values_dropped"] == 1
    assert "Cast" not in _body_ops(result.model)
    assert result.model.ByteSize() <= _rnn().ByteSize()
    again = graphfix.optimize(result.model, passes=PIPELINE)
    assert [n.SerializeToString() for n in again.model.graph.node] == [
        n.SerializeToString() for n in result.model.graph.node]
