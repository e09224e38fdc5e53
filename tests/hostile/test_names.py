"""Names that are not valid UTF-8 (ONNX Runtime loads such a model; protobuf hands graphfix the
bytes): refused once, at load, in one line, by every command.

Cases: an invalid byte in a node's output (and the input that reads it), a graph input's name, a
graph output's name, an initializer's name, a node's name, a value_info's name, the graph's
name, the model's doc string, its producer, a metadata key and value, a symbolic dimension, a
subgraph's node output; each with inspect, inspect --json, check, optimize and bench.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

# Each field holds a marker of its own; a case turns one marker's bytes into invalid UTF-8 of
# the same length (so that no protobuf length changes).
MARKERS = {
    "node-output": b"OUTa01", "graph-input": b"INPa02", "graph-output": b"RESa03",
    "initializer": b"WGTa04", "node-name": b"NODa05", "value-info": b"VIFa06",
    "graph-name": b"GRPa07", "doc-string": b"DOCa08", "producer": b"PRDa09",
    "metadata": b"MTDa10", "dim-param": b"DIMa11", "subgraph-output": b"SUBa12",
}


def _model() -> onnx.ModelProto:
    m = {k: v.decode() for k, v in MARKERS.items()}
    weight = numpy_helper.from_array(np.ones((4,), np.float32), m["initializer"])
    then_branch = helper.make_graph(
        [helper.make_node("Identity", [m["node-output"]], [m["subgraph-output"]])], "then", [],
        [helper.make_tensor_value_info(m["subgraph-output"], TensorProto.FLOAT, [4])])
    else_branch = helper.make_graph(
        [helper.make_node("Neg", [m["node-output"]], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [4])])
    graph = helper.make_graph(
        [helper.make_node("Add", [m["graph-input"], m["initializer"]], [m["node-output"]],
                          name=m["node-name"]),
         helper.make_node("ReduceSum", [m["node-output"]], ["s"], keepdims=0),
         helper.make_node("Constant", [], ["zero"], value_float=0.0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], [m["graph-output"]], then_branch=then_branch,
                          else_branch=else_branch)],
        m["graph-name"],
        [helper.make_tensor_value_info(m["graph-input"], TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info(m["graph-output"], TensorProto.FLOAT, [4])], [weight],
        value_info=[helper.make_tensor_value_info(m["value-info"], TensorProto.FLOAT,
                                                  [m["dim-param"]])])
    graph.value_info.append(helper.make_tensor_value_info(m["node-output"], TensorProto.FLOAT,
                                                          [4]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name=m["producer"], doc_string=m["doc-string"])
    model.ir_version = 8
    helper.set_model_props(model, {m["metadata"]: m["metadata"]})
    return model


def _broken(field: str) -> bytes:
    marker = MARKERS[field]
    data = _model().SerializeToString()
    assert marker in data
    return data.replace(marker, marker[:2] + b"\xff" + marker[3:])


COMMANDS = {"inspect": ["inspect", "bad.onnx"], "inspect-json": ["inspect", "bad.onnx", "--json"],
            "check": ["check", "bad.onnx", "bad.onnx"], "optimize": ["optimize", "bad.onnx",
                                                                     "out.onnx"],
            "bench": ["bench", "bad.onnx", "--runs", "1", "--warmup", "0"]}


def test_the_model_is_sound_with_valid_names(gf):
    (gf.folder / "good.onnx").write_bytes(_model().SerializeToString())
    gf.optimized("good.onnx", "out.onnx")


@pytest.mark.parametrize("field", list(MARKERS))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_name_that_is_not_utf8_is_refused_once_at_load(gf, field, command):
    (gf.folder / "bad.onnx").write_bytes(_broken(field))
    gf.refused(*COMMANDS[command], match="not valid UTF-8")
