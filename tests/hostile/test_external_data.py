"""Hostile external data: locations that escape the model's folder, data files that are missing,
short, folders or links elsewhere, offsets and lengths that are not numbers or point past the end
— for ``inspect``, ``check`` and ``optimize`` alike — and the legal layouts that must work.

Cases (69): 20 refusals x 3 commands (60): ``../x``, an absolute location, ``..`` after a
folder name, a link outside the folder, a missing data file, a truncated one, offset past the
end, length past the end, length shorter than the tensor, length longer than the tensor, a NUL
byte in the location, a location over NAME_MAX, one over PATH_MAX, length not a number, offset
not a number, a negative offset, a negative length, a data file that is a folder, one that is a
FIFO, an empty location; plus escapes hidden in a Constant's tensor attribute, in an If branch's
initializer and in a sparse initializer (3, optimize); and 6 layouts that must work: two tensors
sharing one file, a data file in a subfolder, a data file that is a link inside the folder, no
``length`` field, a location spelled ``sub/../w.data``, ``check`` of two models sharing one data
file.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

COMMANDS = ["inspect", "check", "optimize"]
N = 16  # the weights are N x N float32: 1024 bytes, biases 64


def _args(command: str, model: str = "model/m.onnx") -> list[str]:
    return {"inspect": ["inspect", model],
            "check": ["check", model, "good.onnx"],
            "optimize": ["optimize", model, "out.onnx"]}[command]


def _layout(gf, **fields: str) -> tuple[onnx.ModelProto, Path]:
    """model/m.onnx with its weights in model/w.data, good.onnx (weights inside) beside the
    folder, and outside.data (a valid copy of the data file) outside the model's folder.
    ``fields`` change the external_data fields of the weight 'w'."""
    folder = gf.folder / "model"
    folder.mkdir()
    gf.model(name="good.onnx")
    path = gf.model(name="model/m.onnx", location="w.data")
    (gf.folder / "outside.data").write_bytes((folder / "w.data").read_bytes())
    model = onnx.load(str(path), load_external_data=False)
    if fields:
        gf.set_external(model, "w", **fields)
        path.write_bytes(model.SerializeToString())
    return model, path


def _data_size(gf) -> int:
    return (gf.folder / "model" / "w.data").stat().st_size


def _offset_of_w(model: onnx.ModelProto) -> int:
    tensor = next(t for t in model.graph.initializer if t.name == "w")
    return int({e.key: e.value for e in tensor.external_data}.get("offset", "0"))


# Each maker sets up the hostile layout; the test then expects one clear refusal.
def _dotdot(gf):
    _layout(gf, location="../outside.data")


def _absolute(gf):
    _layout(gf, location=str(gf.folder / "outside.data"))


def _dotdot_after_folder(gf):
    _layout(gf, location="sub/../../outside.data")
    (gf.folder / "model" / "sub").mkdir()


def _link_outside(gf):
    _layout(gf, location="link.data")
    os.symlink(gf.folder / "outside.data", gf.folder / "model" / "link.data")


def _missing(gf):
    _layout(gf)
    (gf.folder / "model" / "w.data").unlink()


def _truncated(gf):
    _layout(gf)
    data = gf.folder / "model" / "w.data"
    data.write_bytes(data.read_bytes()[: _data_size(gf) // 2])


def _offset_past_end(gf):
    model, path = _layout(gf)
    gf.set_external(model, "w", offset=str(_data_size(gf) + 4096))
    path.write_bytes(model.SerializeToString())


def _length_past_end(gf):
    model, path = _layout(gf)
    gf.set_external(model, "w", length=str(_data_size(gf) * 4))
    path.write_bytes(model.SerializeToString())


def _length_short(gf):
    model, path = _layout(gf)
    gf.set_external(model, "w", length="8")
    path.write_bytes(model.SerializeToString())


def _length_long(gf):
    """The length covers the whole file from the tensor's offset: more bytes than N x N x 4."""
    model, path = _layout(gf)
    gf.set_external(model, "w", length=str(_data_size(gf) - _offset_of_w(model)))
    path.write_bytes(model.SerializeToString())


def _nul(gf):
    _layout(gf, location="w.data\0../../outside.data")


def _name_max(gf):
    _layout(gf, location="x" * 300 + ".data")


def _path_max(gf):
    _layout(gf, location="/".join(["d" * 200] * 25) + "/w.data")


def _length_not_a_number(gf):
    _layout(gf, length="lots")


def _offset_not_a_number(gf):
    _layout(gf, offset="0x10")


def _negative_offset(gf):
    _layout(gf, offset="-64")


def _negative_length(gf):
    _layout(gf, length="-1")


def _data_is_a_folder(gf):
    _layout(gf, location="dir.data")
    (gf.folder / "model" / "dir.data").mkdir()


def _data_is_a_fifo(gf):
    _layout(gf, location="fifo.data")
    os.mkfifo(gf.folder / "model" / "fifo.data")


def _empty_location(gf):
    _layout(gf, location="")


HOSTILE = {
    "dotdot": _dotdot, "absolute": _absolute, "dotdot-after-folder": _dotdot_after_folder,
    "link-outside": _link_outside, "missing": _missing, "truncated": _truncated,
    "offset-past-end": _offset_past_end, "length-past-end": _length_past_end,
    "length-short": _length_short, "length-long": _length_long, "nul-byte": _nul,
    "over-name-max": _name_max, "over-path-max": _path_max,
    "length-not-a-number": _length_not_a_number, "offset-not-a-number": _offset_not_a_number,
    "negative-offset": _negative_offset, "negative-length": _negative_length,
    "data-is-a-folder": _data_is_a_folder, "data-is-a-fifo": _data_is_a_fifo,
    "empty-location": _empty_location,
}

# What the refusal must name (a regular expression), where something precise is expected.
MATCH = {
    "dotdot": "escapes", "absolute": "not a relative path|escapes",
    "dotdot-after-folder": "escapes", "link-outside": "escapes", "missing": "missing",
    "truncated": "past the end|truncated", "offset-past-end": "past the end",
    "length-past-end": "past the end", "nul-byte": "NUL",
    "length-not-a-number": "not a number", "offset-not-a-number": "not a number",
    "negative-offset": "negative", "negative-length": "negative",
    "length-short": "length", "length-long": "length",
    "data-is-a-folder": "is a directory", "data-is-a-fifo": "is a FIFO",
}

def _cases():
    for name in HOSTILE:
        for command in COMMANDS:
            yield pytest.param(name, command, id=f"{name}-{command}")


@pytest.mark.parametrize("name, command", list(_cases()))
def test_hostile_external_data_is_refused(gf, name, command):
    HOSTILE[name](gf)
    gf.refused(*_args(command), match=MATCH.get(name))


# --------------------------------------------------------------------------- hidden escapes
def _outside(gf) -> Path:
    data = gf.folder / "outside.data"
    data.write_bytes(np.arange(N * N, dtype=np.float32).tobytes())
    (gf.folder / "model").mkdir()
    return data


def _external(tensor: TensorProto, location: str, length: int) -> None:
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


def test_escape_through_a_constants_attribute(gf):
    _outside(gf)
    value = numpy_helper.from_array(np.zeros((N,), np.float32), "c")
    _external(value, "../outside.data", N * 4)
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], value=value),
         helper.make_node("Add", ["x", "c"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N])])
    gf.write(gf.folder / "model", gf.models.finish(graph))
    gf.refused("optimize", "model/m.onnx", "out.onnx", match="escapes")


def test_escape_from_a_subgraph_initializer(gf):
    _outside(gf)
    value = numpy_helper.from_array(np.zeros((N,), np.float32), "k")
    _external(value, "../outside.data", N * 4)
    branch = helper.make_graph([helper.make_node("Add", ["x", "k"], ["a"])], "then", [],
                               [helper.make_tensor_value_info("a", TensorProto.FLOAT, [N])],
                               [value])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["b"])], "else", [],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, [N])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)], "g",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N])])
    gf.write(gf.folder / "model", gf.models.finish(graph))
    gf.refused("optimize", "model/m.onnx", "out.onnx", match="escapes")


def test_escape_through_a_sparse_initializer(gf):
    """A sparse initializer's values in a file outside the folder: refused like any other."""
    _outside(gf)
    values = numpy_helper.from_array(np.zeros((4,), np.float32), "s")
    _external(values, "../outside.data", 16)
    indices = numpy_helper.from_array(np.array([0, 3, 5, 9], np.int64), "s_indices")
    sparse = helper.make_sparse_tensor(values, indices, [N])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "s"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [N])])
    graph.sparse_initializer.append(sparse)
    gf.write(gf.folder / "model", gf.models.finish(graph))
    gf.refused("optimize", "model/m.onnx", "out.onnx", match="escapes|outside")


# --------------------------------------------------------------------------- legal layouts
def test_two_tensors_sharing_one_file(gf):
    path = gf.model(gf.models.two_weights(), location="shared.data")
    model = onnx.load(str(path), load_external_data=False)
    locations = {e.value for t in model.graph.initializer for e in t.external_data
                 if e.key == "location"}
    assert locations == {"shared.data"}
    gf.succeeded("inspect", "m.onnx")
    gf.succeeded("check", "m.onnx", "m.onnx")
    gf.optimized("m.onnx", "out.onnx", produces=["out.onnx", "out.onnx.data"])


def test_data_file_in_a_subfolder(gf):
    (gf.folder / "weights").mkdir()
    gf.model(location="weights/w.data")
    gf.optimized("m.onnx", "out.onnx", produces=["out.onnx", "out.onnx.data"])


def test_data_file_that_is_a_link_inside_the_folder(gf):
    gf.model(location="real.data")
    model = onnx.load(str(gf.folder / "m.onnx"), load_external_data=False)
    for tensor in model.graph.initializer:
        gf.set_external(model, tensor.name, location="alias.data")
    (gf.folder / "m.onnx").write_bytes(model.SerializeToString())
    os.symlink("real.data", gf.folder / "alias.data")
    gf.optimized("m.onnx", "out.onnx", produces=["out.onnx", "out.onnx.data"])


def test_no_length_field(gf):
    path = gf.model(gf.models.two_weights(), location="w.data")
    model = onnx.load(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        kept = [(e.key, e.value) for e in tensor.external_data if e.key != "length"]
        del tensor.external_data[:]
        for key, value in kept:
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    path.write_bytes(model.SerializeToString())
    gf.optimized("m.onnx", "out.onnx", produces=["out.onnx", "out.onnx.data"])


def test_location_through_a_subfolder_and_back(gf):
    (gf.folder / "sub").mkdir()
    gf.model(location="w.data")
    model = onnx.load(str(gf.folder / "m.onnx"), load_external_data=False)
    for tensor in model.graph.initializer:
        gf.set_external(model, tensor.name, location="sub/../w.data")
    (gf.folder / "m.onnx").write_bytes(model.SerializeToString())
    gf.optimized("m.onnx", "out.onnx", produces=["out.onnx", "out.onnx.data"])


def test_check_two_models_sharing_one_data_file(gf):
    gf.model(name="a.onnx", location="w.data")
    (gf.folder / "b.onnx").write_bytes((gf.folder / "a.onnx").read_bytes())
    gf.succeeded("check", "a.onnx", "b.onnx")
