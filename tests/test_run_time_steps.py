"""Steps on computed values (graphfix.graph.run_time_steps): the quantizers and roundings of
activations, where a last bit moves an output by a whole level, and what parity does about
them (more input sets)."""

from __future__ import annotations

import onnx

from graphfix.graph import before_steps, is_step, run_time_steps
from graphfix.models.quantized import activation_quantizer, weight_quantizer
from graphfix.validate.parity import STEPPED_SETS, check_parity

IN_A_BODY = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,4] x, bool c) => (float[N,4] y) {
    h = Relu (x)
    y = If (c) <then_branch = t () => (float[N,4] a) { a = Round (h) },
                else_branch = e () => (float[N,4] b) { b = Identity (h) }>
}
"""


def _node(op: str, domain: str = "", **attrs) -> onnx.NodeProto:
    return onnx.helper.make_node(op, ["a"], ["b"], domain=domain, **attrs)


def test_what_a_step_is() -> None:
    assert is_step(_node("QuantizeLinear")) and is_step(_node("Round"))
    assert is_step(_node("Cast", to=onnx.TensorProto.INT32))
    assert not is_step(_node("Cast", to=onnx.TensorProto.FLOAT16))
    assert not is_step(_node("ArgMax"))
    # ONNX Runtime's int4 MatMul quantizes its input to int8 blocks at accuracy level 4 only
    assert is_step(_node("MatMulNBits", "com.microsoft", accuracy_level=4))
    assert not is_step(_node("MatMulNBits", "com.microsoft", accuracy_level=0))
    assert not is_step(_node("MatMulNBits", "com.microsoft"))


def test_steps_on_computed_values_are_found_and_weight_quantizers_are_not() -> None:
    found = run_time_steps(activation_quantizer().graph)
    assert [n.op_type for n in found] == ["DynamicQuantizeLinear"]
    assert run_time_steps(weight_quantizer().graph) == []
    body = onnx.parser.parse_model(IN_A_BODY).graph
    assert [n.op_type for n in run_time_steps(body)] == ["Round"]
    assert {"h", "x"} <= before_steps(body)


def test_parity_runs_more_input_sets_on_a_model_that_quantizes_what_it_computes() -> None:
    quantized = activation_quantizer()
    result = check_parity(quantized, quantized)
    assert result.passed and len(result.runs) == 2 * STEPPED_SETS
    assert any("quantizes or rounds values it computes (DynamicQuantizeLinear)" in note
               for note in result.notes)
    assert len(check_parity(quantized, quantized, runs=1).runs) == 1  # asked for: as asked
    plain = weight_quantizer()
    assert len(check_parity(plain, plain).runs) == 2


def test_shape_arithmetic_is_not_a_computed_value() -> None:
    resize = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,C,H,W] x) => (int64[4] size) {
        s = Shape (x)
        f = Cast <to = 1> (s)
        half = Constant <value = float {0.5}> ()
        scaled = Mul (f, half)
        down = Floor (scaled)
        size = Cast <to = 7> (down)
    }
    """)
    assert run_time_steps(resize.graph) == []


def test_a_cast_is_a_step_from_a_float_type_only() -> None:
    casts = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (int64[N,4] mask, float[N,4] x) => (bool[N,4] keep, int32[N,4] level) {
        keep = Cast <to = 9> (mask)
        level = Cast <to = 6> (x)
    }
    """)
    assert [n.output[0] for n in run_time_steps(casts.graph)] == ["level"]
