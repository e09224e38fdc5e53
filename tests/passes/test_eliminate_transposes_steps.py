"""A sum whose last bits a quantizer or a rounding reads keeps its order.

Pushing a Transpose through a sum-like reduction adds its elements in another order: the float
result moves in its last bits, within any float tolerance. A quantizer after it (a dynamically
quantized classifier head: ReduceMean, DynamicQuantizeLinear, MatMulInteger) turns a last-bit
change into a whole quantization level on the elements that lie near a level's edge, an error
a hundred times the float tolerance on a real export (MobileNetV2 from Keras, quantized by ONNX
Runtime's quantize_dynamic). Such a reduction is a barrier; elsewhere the pass goes on.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from graphfix.passes._measuring import run_outputs
from graphfix.passes.eliminate_transposes import EliminateTransposes
from graphfix.passes.eliminate_transposes.facts import before_steps


def _head(quantized: bool, channels: int = 256, classes: int = 100) -> onnx.ModelProto:
    """An NHWC input made NCHW, Relu, the mean over H and W, then a classifier: a
    dynamically quantized one (DynamicQuantizeLinear, MatMulInteger) or a float MatMul."""
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
             helper.make_node("Relu", ["nchw"], ["r"]),
             helper.make_node("ReduceMean", ["r"], ["pooled"], axes=[2, 3], keepdims=0)]
    if quantized:
        weights = numpy_helper.from_array(
            rng.integers(-127, 128, (channels, classes)).astype(np.int8), "w")
        nodes += [helper.make_node("DynamicQuantizeLinear", ["pooled"], ["q", "s", "z"]),
                  helper.make_node("MatMulInteger", ["q", "w", "z"], ["acc"]),
                  helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
                  helper.make_node("Mul", ["accf", "s"], ["y"])]
    else:
        weights = numpy_helper.from_array(
            rng.standard_normal((channels, classes)).astype(np.float32), "w")
        nodes.append(helper.make_node("MatMul", ["pooled", "w"], ["y"]))
    graph = helper.make_graph(
        nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 7, 7, channels])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])], [weights])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _transposes(model: onnx.ModelProto) -> int:
    return sum(n.op_type == "Transpose" for n in model.graph.node)


def test_a_reduction_a_quantizer_reads_keeps_its_order_and_every_output_bit() -> None:
    model = _head(quantized=True)
    optimized = EliminateTransposes()(onnx.load_from_string(model.SerializeToString())).model
    assert _transposes(optimized) == 1  # the Transpose stays before the ReduceMean
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.uniform(0, 6, (1, 7, 7, 256)).astype(np.float32)} for _ in range(64)]
    before = run_outputs(model, feeds, ["y"])
    after = run_outputs(optimized, feeds, ["y"])
    assert all(np.array_equal(b["y"], a["y"]) for b, a in zip(before, after))


def test_a_float_head_still_loses_its_transpose() -> None:
    optimized = EliminateTransposes()(_head(quantized=False)).model
    assert _transposes(optimized) == 0


def test_what_reaches_a_step_follows_values_not_shapes_and_enters_bodies() -> None:
    # Shape reads no value: a size that a Floor rounds does not hold back the tensor it
    # measures. A body holding a quantizer holds back what it reads from outside.
    body = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["outer", "scale"], ["q"])], "body", [],
        [helper.make_tensor_value_info("q", TensorProto.UINT8, None)],
        [numpy_helper.from_array(np.array(0.1, np.float32), "scale")])
    nodes = [helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=1),
             helper.make_node("Shape", ["sum"], ["shape"]),
             helper.make_node("Cast", ["shape"], ["size"], to=TensorProto.FLOAT),
             helper.make_node("Floor", ["size"], ["floored"]),
             helper.make_node("ReduceMean", ["x"], ["outer"], keepdims=1),
             helper.make_node("If", ["cond"], ["branch"], then_branch=body, else_branch=body)]
    graph = helper.make_graph(nodes, "g", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
        helper.make_tensor_value_info("cond", TensorProto.BOOL, [])], [
        helper.make_tensor_value_info("floored", TensorProto.FLOAT, [2]),
        helper.make_tensor_value_info("branch", TensorProto.UINT8, None)])
    found = before_steps(graph)
    assert {"size", "shape", "outer", "x", "cond"} <= found
    assert "sum" not in found
