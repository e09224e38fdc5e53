from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

import graphfix.passes
from graphfix.passes.remove_initializer_inputs import RemoveInitializerInputs

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

# IR 3 style: the weight is both an initializer and a graph input.
LINEAR_IR3 = """
<ir_version: 3, opset_import: ["" : 8]>
g (float[1,4] x, float[4,2] w, float[2] b) => (float[1,2] y) <float[4,2] w = {1,2,3,4,5,6,7,8}, float[2] b = {0.5, -0.5}> {
    m = MatMul (x, w)
    y = Add (m, b)
}
"""

# An If whose then-branch has its own initializer listed as an input of the branch is invalid
# ONNX, so the subgraph case is a Loop body that shadows nothing: only the outer graph changes.
IF_WITH_INNER_INITIALIZER = """
<ir_version: 7, opset_import: ["" : 13]>
g (bool c, float[2] x, float[2] k) => (float[2] y) <float[2] k = {1.0, 2.0}> {
    y = If (c) <
        then_branch = t () => (float[2] ty) <float[2] inner = {3.0, 4.0}> { ty = Add (x, inner) },
        else_branch = e () => (float[2] ey) { ey = Mul (x, k) }
    >
}
"""


def test_removes_initializer_inputs_and_raises_ir(ort_run):
    model = onnx.parser.parse_model(LINEAR_IR3)
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    before = ort_run(model, {"x": x})["y"]

    result = RemoveInitializerInputs()(model)

    assert result.modified
    assert [i.name for i in result.model.graph.input] == ["x"]
    assert result.model.ir_version == 4
    assert result.stats["initializer_inputs_removed"] == 2
    assert result.stats["ir_version_raised"] == 1
    onnx.checker.check_model(result.model, full_check=True)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"], before)


def test_keeps_real_inputs_and_their_order():
    model = onnx.parser.parse_model(IF_WITH_INNER_INITIALIZER)
    result = RemoveInitializerInputs()(model)
    assert [i.name for i in result.model.graph.input] == ["c", "x"]
    onnx.checker.check_model(result.model, full_check=True)


def test_idempotent():
    model = onnx.parser.parse_model(LINEAR_IR3)
    first = RemoveInitializerInputs()(model)
    again = RemoveInitializerInputs()(first.model)
    assert first.modified and not again.modified
    assert again.stats["initializer_inputs_removed"] == 0


def test_nothing_to_do_is_not_modified():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) <float[2] k = {1.0, 2.0}> { y = Add (x, k) }
    """)
    before = model.SerializeToString()
    result = RemoveInitializerInputs()(model)
    assert not result.modified
    assert result.model.SerializeToString() == before


def test_subgraph_inputs_shadowing_body_initializers():
    # A Loop body whose formal input list names one of its own initializers (legal at IR 3).
    body = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         onnx.helper.make_node("Add", ["acc", "step"], ["acc_out"])],
        "body",
        [onnx.helper.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
         onnx.helper.make_tensor_value_info("cond_in", onnx.TensorProto.BOOL, []),
         onnx.helper.make_tensor_value_info("acc", onnx.TensorProto.FLOAT, [1]),
         onnx.helper.make_tensor_value_info("step", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []),
         onnx.helper.make_tensor_value_info("acc_out", onnx.TensorProto.FLOAT, [1])],
        [onnx.numpy_helper.from_array(np.ones(1, np.float32), "step")],
    )
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Loop", ["n", "c", "a0"], ["a"], body=body)],
        "g",
        [onnx.helper.make_tensor_value_info("n", onnx.TensorProto.INT64, []),
         onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, []),
         onnx.helper.make_tensor_value_info("a0", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [1])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])
    result = RemoveInitializerInputs()(model)
    loop_body = result.model.graph.node[0].attribute[0].g
    assert [i.name for i in loop_body.input] == ["i", "cond_in", "acc"]
    assert result.stats["initializer_inputs_removed"] == 1
    assert [i.name for i in result.model.graph.input] == ["n", "c", "a0"]


def test_function_twin_rewrites_in_place():
    model = onnx.parser.parse_model(LINEAR_IR3)
    out = graphfix.passes.remove_initializer_inputs(model)
    assert out is model
    assert [i.name for i in model.graph.input] == ["x"]


@pytest.mark.parametrize("path", sorted(LIGHT.glob("light_*.onnx")), ids=lambda p: p.stem)
def test_light_models_keep_their_outputs(path, ort_run):
    model = onnx.load(str(path))
    initializers = {init.name for init in model.graph.initializer}
    (data,) = [i for i in model.graph.input if i.name not in initializers]
    data_input = data.name
    shape = [d.dim_value for d in data.type.tensor_type.shape.dim]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    before = ort_run(model, {data_input: x})

    out = RemoveInitializerInputs()(model).model

    assert [i.name for i in out.graph.input] == [data_input]
    after = ort_run(out, {data_input: x})
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value)


def test_an_overridable_input_removed_is_said(ort_run):
    """From IR 4 an input with an initializer is a default a caller may override: the result
    refuses a caller that feeds it, and nothing said so."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4] x, float threshold) => (float[N, 4] y) {
        y = Sub (x, threshold)
    }""")
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.array(0.5, np.float32),
                                                                "threshold"))
    result = RemoveInitializerInputs()(model)
    [warning] = result.warnings
    assert "'threshold'" in warning and "refused" in warning
    at_ir3 = RemoveInitializerInputs()(onnx.parser.parse_model(LINEAR_IR3))
    assert at_ir3.warnings == []
