"""The shipped sample model: a small NHWC CNN showing both problems graphfix fixes by default.

It mimics an old Keras-to-ONNX export: IR version 3 with every initializer also listed as a graph
input (so ONNX Runtime, which reads IR >= 4 initializer inputs as overridable, would skip constant
folding if the model were re-declared), and converter-style ``Transpose(0,3,1,2)`` ...
``Transpose(0,2,3,1)`` around every Conv, with ReLU6 (``Clip``), a residual ``Add``, explicit
``Pad`` before a strided conv, global average pooling (``ReduceMean``) and a ``Gemm`` classifier
in between. IR 3 models in the wild (the ONNX model zoo's, the ``light_*`` backend test models)
declare opset 9, which ONNX Runtime still loads, so the sample uses opset 9 operator forms:
``Clip`` with ``min``/``max`` attributes and ``Pad`` with a ``pads`` attribute.

``python -m models.sample`` (from the repository root) rewrites ``models/sample_nhwc.onnx``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from ._graph import TO_NCHW, TO_NHWC, GraphBuilder, float_input

__all__ = ["SAMPLE_PATH", "build_sample", "sample_input"]

SAMPLE_PATH: Path = Path(__file__).resolve().parent / "sample_nhwc.onnx"
IMAGE_SIZE = 64
NUM_CLASSES = 10


def build_sample(*, seed: int = 0) -> onnx.ModelProto:
    """Build the sample (about 50 KB): IR 3, opset 9, initializers listed as inputs."""
    g = GraphBuilder(seed)

    def conv(x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
        pads = [k // 2] * 4
        if stride > 1:
            x = g.op1("Pad", [x], pads=[0, 0, 0, 0, 0, 1, 1, 0], mode="constant", value=0.0)
            pads = [0, 0, 0, 0]
        w = g.weight("W", [cout, cin // group, k, k], fan_in=cin // group * k * k)
        b = g.const("B", g.rng.uniform(-0.1, 0.1, cout).astype(np.float32))
        t = g.op1("Transpose", [x], perm=TO_NCHW)
        y = g.op1(
            "Conv", [t, w, b], kernel_shape=[k, k], strides=[stride, stride], pads=pads,
            group=group,
        )
        return g.op1("Transpose", [y], perm=TO_NHWC)

    def relu6(x: str) -> str:
        return g.op1("Clip", [x], min=0.0, max=6.0)

    x = relu6(conv("input", 3, 16, 3, stride=2))
    for _ in range(2):
        h = relu6(conv(x, 16, 48, 1))
        h = relu6(conv(h, 48, 48, 3, group=48))
        x = g.op1("Add", [x, conv(h, 48, 16, 1)])
    x = relu6(conv(x, 16, 32, 3, stride=2))
    x = relu6(conv(x, 32, 64, 1))
    x = g.op1("ReduceMean", [x], axes=[1, 2], keepdims=0)
    w = g.weight("fc_W", [NUM_CLASSES, 64], fan_in=64)
    b = g.const("fc_B", np.zeros(NUM_CLASSES, np.float32))
    x = g.op1("Gemm", [x, w, b], transB=1)
    g.nodes.append(helper.make_node("Softmax", [x], ["output"], name="softmax_out", axis=1))
    inputs = [float_input("input", [1, IMAGE_SIZE, IMAGE_SIZE, 3])]
    inputs += [
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in g.initializers
    ]
    return g.model(
        "sample_nhwc",
        inputs,
        [float_input("output", [1, NUM_CLASSES])],
        opset=9,
        ir_version=3,
        producer="keras2onnx-style",
    )


def sample_input(*, seed: int = 0) -> dict[str, np.ndarray]:
    """A seeded feed for the sample's data input."""
    rng = np.random.default_rng(seed)
    return {"input": rng.random((1, IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.float32)}


if __name__ == "__main__":
    onnx.save(build_sample(), SAMPLE_PATH)
