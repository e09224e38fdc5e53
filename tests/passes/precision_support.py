"""Shared helpers of the convert-precision tests (``tests/passes/test_convert_precision.py``,
``tests/passes/test_precision_economics.py``): models written in ONNX's text format with
their weights, and copies of them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'
FP16 = onnx.TensorProto.FLOAT16


def parse(body: str, **weights: np.ndarray) -> onnx.ModelProto:
    """A checked opset-17 model from the text of its graph, with ``weights`` as initializers."""
    model = onnx.parser.parse_model(HEADER + body)
    model.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in weights.items())
    onnx.checker.check_model(model, full_check=True)
    return model


def copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def cancelling() -> onnx.ModelProto:
    """``y = ((x + 3000) - (x + 2999)) * x``: the Sub cancels what the Adds round, so every
    lowering of the Adds misses float16's bar and the search has an error to trace."""
    return parse("""
    g (float[2,16] x) => (float[2,16] y) {
        a = Add(x, big)
        b = Add(x, small)
        d = Sub(a, b)
        y = Mul(d, x)
    }""", big=np.array(3000.0, np.float32), small=np.array(2999.0, np.float32))
