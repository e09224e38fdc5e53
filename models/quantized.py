"""Small models that quantize what they compute, for the tests of what graphfix does about
run-time steps (:func:`graphfix.graph.run_time_steps`): a product whose result
DynamicQuantizeLinear quantizes, and the same product on weights that only their own
QuantizeLinear/DequantizeLinear pair quantizes (no step on a computed value)."""

from __future__ import annotations

import onnx

__all__ = ["activation_quantizer", "weight_quantizer"]

_WEIGHTS = "w = Constant <value = float[4,4] {1,0,0,0, 0,2,0,0, 0,0,3,0, 0,0,0,4}> ()"


def activation_quantizer() -> onnx.ModelProto:
    """``y = Dequantize(DynamicQuantizeLinear(x @ w))``: the product's result is quantized."""
    return onnx.parser.parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,4] x) => (float[N,4] y) {{
        {_WEIGHTS}
        h = MatMul (x, w)
        q, scale, zero = DynamicQuantizeLinear (h)
        y = DequantizeLinear (q, scale, zero)
    }}""")


def weight_quantizer() -> onnx.ModelProto:
    """``y = Relu(x @ Dequantize(Quantize(w)))``: only a weight is quantized."""
    return onnx.parser.parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,4] x) => (float[N,4] y) {{
        {_WEIGHTS}
        s = Constant <value = float {{0.1}}> ()
        z = Constant <value = int8 {{0}}> ()
        qw = QuantizeLinear (w, s, z)
        dw = DequantizeLinear (qw, s, z)
        m = MatMul (x, dw)
        y = Relu (m)
    }}""")
