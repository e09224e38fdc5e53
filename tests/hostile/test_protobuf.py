"""Malformed models: files that are not ONNX at all, and ONNX protobufs with broken fields, for
``inspect``, ``check`` and ``optimize`` alike; plus two oddities that must work.

Cases (101): 5 files that are not a model x 3 commands (15): empty, random bytes, a truncated
model, a JSON file, ONNX's text format; 27 broken models x 3 commands (81): no graph, no
opset_import, an unknown op in the default domain, two nodes writing one tensor, a node reading
a tensor nobody produces, a cycle, an initializer whose raw data is too short, one with too few
float_data, an input of element type 99, an initializer of data type 99, an input of element
type UNDEFINED, a graph output nobody produces, IR version 99, opset 99, IR version 0, a
negative IR version, two inputs of one name, an empty op_type, an attribute of the wrong type,
an invalid Transpose perm, two initializers of one name, a model-local function that calls
itself, the default domain imported twice, a graph without outputs, subgraphs nested deeper than
protobuf's recursion limit, a newline in an unknown op's name, an initializer of data type
UNDEFINED; and 2 that must work (optimize): unknown protobuf fields (a newer writer), a
model-local function that is used; and 3 decisions: duplicate initializers (optimize refuses,
inspect warns), IR version 99 (refused by every command), ONNX Runtime's refusals shown without
its C++ signature.

Files that are not a model must be refused. A broken model must be refused with one line, or,
where ONNX Runtime still runs it (IR version 0, the default domain imported twice), handled
correctly: ``check SRC SRC`` passes, ``inspect`` warns or ONNX Runtime loads the model, and what
``optimize`` writes passes the full checker and computes what SRC computes.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

COMMANDS = ["inspect", "check", "optimize"]


def _args(command: str) -> list[str]:
    return {"inspect": ["inspect", "bad.onnx"],
            "check": ["check", "bad.onnx", "bad.onnx"],
            "optimize": ["optimize", "bad.onnx", "out.onnx"]}[command]


def _good() -> onnx.ModelProto:
    return onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x) => (float[2,3] y) { t = Relu (x)  y = Neg (t) }""")


# --------------------------------------------------------------------------- not a model
def _not_a_model(kind: str) -> bytes:
    good = _good().SerializeToString()
    if kind == "empty":
        return b""
    if kind == "random":
        return np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    if kind == "truncated":
        return good[: len(good) // 2]
    if kind == "json":
        return json.dumps({"irVersion": 8, "graph": {"node": []}}).encode()
    return onnx.printer.to_text(_good()).encode()  # the text format


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", ["empty", "random", "truncated", "json", "text-format"])
def test_a_file_that_is_not_a_model(gf, kind, command):
    (gf.folder / "bad.onnx").write_bytes(_not_a_model(kind))
    gf.refused(*_args(command), match="bad.onnx")


# --------------------------------------------------------------------------- broken fields
def _text(body: str, *, opset: int = 17, ir: int = 8, signature: str = "(float[2,3] x) => "
          "(float[2,3] y)") -> onnx.ModelProto:
    return onnx.parser.parse_model(
        f'<ir_version: {ir}, opset_import: ["" : {opset}]>\ng {signature} {{ {body} }}')


def _no_graph() -> onnx.ModelProto:
    model = _good()
    model.ClearField("graph")
    return model


def _no_opset() -> onnx.ModelProto:
    model = _good()
    del model.opset_import[:]
    return model


def _short_raw_data() -> onnx.ModelProto:
    model = _text("y = Add (x, k)", signature="(float[2,3] x) => (float[2,3] y)")
    k = numpy_helper.from_array(np.ones((2, 3), np.float32), "k")
    k.raw_data = b"\0" * 10
    model.graph.initializer.append(k)
    return model


def _few_float_data() -> onnx.ModelProto:
    model = _text("y = Add (x, k)")
    k = helper.make_tensor("k", TensorProto.FLOAT, [2, 3], [1.0] * 6)
    del k.float_data[2:]
    model.graph.initializer.append(k)
    return model


def _input_type_99() -> onnx.ModelProto:
    model = _good()
    model.graph.input[0].type.tensor_type.elem_type = 99
    return model


def _initializer_type(data_type: int) -> onnx.ModelProto:
    model = _text("y = Add (x, k)")
    k = numpy_helper.from_array(np.ones((2, 3), np.float32), "k")
    k.data_type = data_type
    model.graph.initializer.append(k)
    return model


def _input_undefined() -> onnx.ModelProto:
    model = _good()
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.UNDEFINED
    return model


def _unproduced_output() -> onnx.ModelProto:
    model = _good()
    model.graph.output.append(helper.make_tensor_value_info("ghost", TensorProto.FLOAT, [2, 3]))
    return model


def _ir(version: int) -> onnx.ModelProto:
    model = _good()
    model.ir_version = version
    return model


def _duplicate_inputs() -> onnx.ModelProto:
    model = _text("y = Add (x, x)")
    model.graph.input.append(helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]))
    return model


def _empty_op_type() -> onnx.ModelProto:
    model = _good()
    model.graph.node[0].op_type = ""
    return model


def _perm_as_float() -> onnx.ModelProto:
    model = _text("y = Transpose (x)", signature="(float[2,3] x) => (float[3,2] y)")
    model.graph.node[0].attribute.append(helper.make_attribute("perm", [1.0, 0.0]))
    return model


def _duplicate_initializers() -> onnx.ModelProto:
    model = _text("y = Add (x, k)")
    for value in (1.0, 2.0):
        model.graph.initializer.append(
            numpy_helper.from_array(np.full((2, 3), value, np.float32), "k"))
    return model


def _recursive_function() -> onnx.ModelProto:
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g (float[2,3] x) => (float[2,3] y) { y = local.Loop (x) }
    <domain: "local", opset_import: ["" : 17, "local" : 1]>
    Loop (a) => (b) { c = Relu (a)  b = local.Loop (c) }
    """)
    return model


def _opset_twice() -> onnx.ModelProto:
    model = _good()
    model.opset_import.append(helper.make_opsetid("", 13))
    return model


def _no_outputs() -> onnx.ModelProto:
    model = _good()
    del model.graph.output[:]
    return model


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _deep_nesting(depth: int = 150) -> bytes:
    """If inside If inside If ... far deeper than protobuf's recursion limit (100 messages);
    written by hand, as protobuf refuses to build it."""
    out = helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3]).SerializeToString()
    leaf = helper.make_graph([helper.make_node("Neg", ["x"], ["r"])], "leaf", [],
                             [helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3])])
    leaf_bytes = leaf.SerializeToString()
    graph = leaf_bytes
    for level in range(depth):
        attributes = b"".join(
            _field(5, _field(1, name.encode()) + _field(6, body) + _varint(20 << 3) + _varint(5))
            for name, body in (("then_branch", graph), ("else_branch", leaf_bytes)))
        node = _field(1, b"c") + _field(2, b"r") + _field(4, b"If") + attributes
        graph = _field(1, node) + _field(2, f"g{level}".encode()) + _field(12, out)
    # The top graph's inputs; serialized messages concatenated merge, so the graph gets them
    # and the nested If that writes its output 'r'.
    top = helper.make_graph([], "top", [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                                        helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      [2, 3])], [])
    model = helper.make_model(onnx.GraphProto(), opset_imports=[helper.make_opsetid("", 17)],
                              ir_version=8)
    model.ClearField("graph")
    return model.SerializeToString() + _field(7, top.SerializeToString() + graph)


def _newline_op() -> onnx.ModelProto:
    model = _good()
    model.graph.node[0].op_type = "Foo\nBar"
    model.graph.node[0].name = "first\nnode"
    return model


BROKEN = {
    "no-graph": _no_graph,
    "no-opset-import": _no_opset,
    "unknown-op": lambda: _text("t = FooBar (x)  y = Neg (t)"),
    "duplicate-output-name": lambda: _text("t = Relu (x)  t = Neg (x)  y = Abs (t)"),
    "unproduced-input": lambda: _text("y = Add (x, nobody)"),
    "cycle": lambda: _text("a = Add (x, b)  b = Relu (a)  y = Neg (b)"),
    "short-raw-data": _short_raw_data,
    "few-float-data": _few_float_data,
    "input-elem-type-99": _input_type_99,
    "initializer-type-99": lambda: _initializer_type(99),
    "input-undefined": _input_undefined,
    "unproduced-output": _unproduced_output,
    "ir-99": lambda: _ir(99),
    "opset-99": lambda: _text("t = Relu (x)  y = Neg (t)", opset=99),
    "ir-0": lambda: _ir(0),
    "ir-negative": lambda: _ir(-1),
    "duplicate-inputs": _duplicate_inputs,
    "empty-op-type": _empty_op_type,
    "attribute-wrong-type": _perm_as_float,
    "invalid-perm": lambda: _text("y = Transpose <perm = [0, 0]> (x)",
                                  signature="(float[2,3] x) => (float[3,2] y)"),
    "duplicate-initializers": _duplicate_initializers,
    "recursive-function": _recursive_function,
    "default-domain-twice": _opset_twice,
    "no-outputs": _no_outputs,
    "nesting-past-recursion-limit": lambda: _deep_nesting(),
    "newline-in-op-type": _newline_op,
    "initializer-undefined-type": lambda: _initializer_type(TensorProto.UNDEFINED),
}

def _cases():
    for name in BROKEN:
        for command in COMMANDS:
            yield pytest.param(name, command, id=f"{name}-{command}")


@pytest.mark.parametrize("name, command", list(_cases()))
def test_a_broken_model_is_refused_or_handled(gf, name, command):
    model = BROKEN[name]()
    (gf.folder / "bad.onnx").write_bytes(
        model if isinstance(model, bytes) else model.SerializeToString())
    gf.refused_or_correct(*_args(command))


# --------------------------------------------------------------------------- must work
def test_unknown_protobuf_fields_are_ignored(gf):
    """A newer writer's fields (here field 99 of ModelProto, a varint): readers skip them."""
    data = _good().SerializeToString() + bytes([0x98, 0x06, 0x2A])  # field 99, varint 42
    parsed = onnx.ModelProto()
    parsed.ParseFromString(data)
    (gf.folder / "m.onnx").write_bytes(data)
    gf.optimized("m.onnx", "out.onnx")


def test_a_model_local_function(gf):
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g (float[2,3] x) => (float[2,3] y) { y = local.Twice (x) }
    <domain: "local", opset_import: ["" : 17]>
    Twice (a) => (b) { b = Add (a, a) }
    """)
    gf.model(model)
    gf.optimized("m.onnx", "out.onnx")


# --------------------------------------------------------------------------- decisions
def test_duplicate_initializers_are_refused_by_optimize_and_warned_by_inspect(gf):
    """ONNX Runtime runs the model with the last 'k'; which one the exporter meant is
    ambiguous, and a written model would fail the checker: optimize refuses, naming it."""
    (gf.folder / "bad.onnx").write_bytes(_duplicate_initializers().SerializeToString())
    gf.refused("optimize", "bad.onnx", "out.onnx", match="initializer 'k' is defined 2 times")
    assert "not unique" in gf.succeeded("inspect", "bad.onnx").stdout


def test_an_ir_version_newer_than_onnx_and_ort_read_is_refused(gf):
    (gf.folder / "bad.onnx").write_bytes(_ir(99).SerializeToString())
    for command in COMMANDS:
        gf.refused(*_args(command), match="IR version 99 is newer")


def test_onnx_runtime_refusals_keep_their_reason_without_the_cpp_signature(gf):
    """ONNX Runtime's messages start with a C++ source location and function signature;
    the error shows the sentence instead, in a line of at most 300 characters, and whole
    with -v."""
    (gf.folder / "bad.onnx").write_bytes(
        _text("t = Relu (x)  y = Neg (t)", opset=99).SerializeToString())
    line = gf.refused("check", "bad.onnx", "bad.onnx").error_lines[0]
    assert "Opset 99" in line and len(line) <= 300, line
    assert "onnxruntime::" not in line and ".h:" not in line and "ONNXRuntimeError" not in line
    whole = gf.invoke("check", "bad.onnx", "bad.onnx", "-v")
    assert whole.code == 1 and "till opset" in whole.stderr, whole.describe()
    warning = gf.succeeded("inspect", "bad.onnx").stdout
    assert "ONNX Runtime cannot load the model" in warning and "onnxruntime::" not in warning
