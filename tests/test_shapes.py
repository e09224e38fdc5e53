"""Shapes of ONNX Runtime's contrib ops, where ONNX's inference stops."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import graphfix
from graphfix.passes import eliminate_transposes
from graphfix.shapes import CONTRIB_SHAPES, infer_shapes
from graphfix.validate.parity import check_parity
from graphfix.pinned import pinned_sizes


def _quantized_lstm(rng: np.random.Generator) -> onnx.ModelProto:
    """A dynamic-quantized forward LSTM, its output's size-1 direction axis moved by a
    Transpose before a Reshape (as Keras and old exporters write it)."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
    g (float[T, B, F] x) => (float[T, B, 32] z) {
        t = Transpose <perm = [0, 2, 1, 3]> (y)
        z = Reshape (t, target)
    }""")
    lstm = helper.make_node(
        "DynamicQuantizeLSTM", ["x", "W", "R", "", "", "", "", "", "w_scale", "w_zero",
                                "r_scale", "r_zero"], ["y"], domain="com.microsoft",
        hidden_size=32)
    model.graph.node.insert(0, lstm)
    model.graph.initializer.extend([
        # DynamicQuantizeLSTM keeps W as [directions, input size, 4 * hidden]
        numpy_helper.from_array(rng.integers(-100, 100, (1, 40, 128)).astype(np.int8), "W"),
        numpy_helper.from_array(rng.integers(-100, 100, (1, 32, 128)).astype(np.int8), "R"),
        numpy_helper.from_array(np.full(1, 0.002, np.float32), "w_scale"),
        numpy_helper.from_array(np.zeros(1, np.int8), "w_zero"),
        numpy_helper.from_array(np.full(1, 0.002, np.float32), "r_scale"),
        numpy_helper.from_array(np.zeros(1, np.int8), "r_zero"),
        numpy_helper.from_array(np.array([0, 0, -1], np.int64), "target"),
    ])
    return model


def test_a_transpose_after_a_quantized_lstm_is_judged_like_any_other(rng) -> None:
    model = _quantized_lstm(rng)
    inferred = {v.name: v for v in infer_shapes(model).graph.value_info}
    assert [d.dim_param or d.dim_value for d in
            inferred["t"].type.tensor_type.shape.dim] == ["T", "B", 1, 32]
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = eliminate_transposes(model)  # a Transpose of a size-1 axis is a Reshape
    assert [n.op_type for n in result.graph.node] == [
        "DynamicQuantizeLSTM", "Reshape", "Reshape"]
    assert check_parity(original, result).passed
    optimized = graphfix.optimize(original).model  # and two Reshapes are one
    assert [n.op_type for n in optimized.graph.node] == ["DynamicQuantizeLSTM", "Reshape"]


def test_the_quantized_lstm_input_size_is_fed_from_its_weights(rng) -> None:
    model = _quantized_lstm(rng)
    assert pinned_sizes(model) == {"x": {2: 40}}
    assert check_parity(model, model).passed


@pytest.mark.parametrize("op, attributes, inputs, expected", [
    ("FusedMatMul", {"transB": 1}, [["B", 8, 16], [32, 16]], [["B", 8, 32]]),
    ("DynamicQuantizeMatMul", {}, [["B", "S", 64], [64, 10]], [["B", "S", 10]]),
    ("MatMulNBits", {"N": 48, "K": 64}, [["B", "S", 64]], [["B", "S", 48]]),
    ("Attention", {"num_heads": 2}, [["B", "S", 16], [16, 48]], [["B", "S", 16]]),
    ("FastGelu", {}, [["B", "S", 16]], [["B", "S", 16]]),
    ("QLinearAdd", {}, [["N", 3, 8], None, None, [8]], [["N", 3, 8]]),
    ("EmbedLayerNormalization", {}, [["B", "S"], None, [100, 16]], [["B", "S", 16], ["B"]]),
])
def test_contrib_rules(op, attributes, inputs, expected) -> None:
    node = helper.make_node(op, [f"i{k}" for k in range(len(inputs))], ["o0", "o1"],
                            domain="com.microsoft", **attributes)
    assert CONTRIB_SHAPES[op](node, inputs)[:len(expected)] == expected
