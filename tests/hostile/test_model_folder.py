"""External data is found in the model's own folder, wherever graphfix runs from, in every place
a tensor can live; every model graphfix writes loads from its own folder.

Cases: weights in an external file beside the model held by a sparse initializer's values, by
its indices, by a Constant in a local function, by a Constant's sparse value, by an initializer
of an If branch, by a Constant in a Loop body, by an initializer in a subfolder; each optimized
from the model's folder into another one (``cd src && graphfix optimize m.onnx ../dst/o.onnx``),
from the parent folder, and from an unrelated folder with absolute paths, with and without
parity; each inspected and checked from another folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def _external(tensor: onnx.TensorProto, folder: Path, location: str) -> None:
    """Move ``tensor``'s data to ``folder/location``."""
    (folder / location).parent.mkdir(parents=True, exist_ok=True)
    (folder / location).write_bytes(tensor.raw_data)
    length = len(tensor.raw_data)
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value


def _finish(graph: onnx.GraphProto, functions=(), extra_opsets=()) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    *extra_opsets], functions=list(functions))
    model.ir_version = 8
    return model


_N = 600
_VALUES = np.linspace(-2, 2, 300).astype(np.float32)


def _sparse_values(folder: Path) -> onnx.ModelProto:
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(_VALUES, "w"),
        numpy_helper.from_array(np.arange(0, _N, 2, dtype=np.int64), "w_idx"), [_N])
    _external(sparse.values, folder, "w.bin")
    return _finish(helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [_N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [_N])],
        sparse_initializer=[sparse]))


def _sparse_indices(folder: Path) -> onnx.ModelProto:
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(_VALUES, "w"),
        numpy_helper.from_array(np.arange(0, _N, 2, dtype=np.int64), "w_idx"), [_N])
    _external(sparse.indices, folder, "idx.bin")
    return _finish(helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [_N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [_N])],
        sparse_initializer=[sparse]))


def _function_constant(folder: Path) -> onnx.ModelProto:
    value = numpy_helper.from_array(np.linspace(0, 1, 512).astype(np.float32), "c")
    function = helper.make_function(
        "local", "AddC", ["a"], ["b"],
        [helper.make_node("Constant", [], ["k"], value=value),
         helper.make_node("Add", ["a", "k"], ["b"])], [helper.make_opsetid("", 17)])
    _external(function.node[0].attribute[0].t, folder, "c.bin")
    return _finish(helper.make_graph(
        [helper.make_node("AddC", ["x"], ["y"], domain="local")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512])]),
        functions=[function], extra_opsets=[helper.make_opsetid("local", 1)])


def _constant_sparse_value(folder: Path) -> onnx.ModelProto:
    sparse = helper.make_sparse_tensor(
        numpy_helper.from_array(_VALUES, "s"),
        numpy_helper.from_array(np.arange(1, _N, 2, dtype=np.int64), "s_idx"), [_N])
    _external(sparse.values, folder, "s.bin")
    return _finish(helper.make_graph(
        [helper.make_node("Constant", [], ["k"], sparse_value=sparse),
         helper.make_node("Sub", ["x", "k"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [_N])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [_N])]))


def _if_branch(folder: Path) -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.linspace(1, 2, 512).astype(np.float32), "bw")
    _external(weight, folder, "branch.bin")
    then_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "bw"], ["t"])], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [512])], [weight])
    else_branch = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [512])])
    return _finish(helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Constant", [], ["zero"], value_float=0.0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_branch,
                          else_branch=else_branch)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512])]))


def _loop_body(folder: Path) -> onnx.ModelProto:
    value = numpy_helper.from_array(np.linspace(0, 1, 512).astype(np.float32), "lv")
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["k"], value=value),
         helper.make_node("Add", ["acc", "k"], ["acc_out"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, [512])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [512])])
    _external(body.node[0].attribute[0].t, folder, "loop.bin")
    trips = numpy_helper.from_array(np.array(3, np.int64), "trips")
    go = numpy_helper.from_array(np.array(True), "go")
    return _finish(helper.make_graph(
        [helper.make_node("Loop", ["trips", "go", "x"], ["y"], body=body)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [512])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [512])], [trips, go]))


def _subfolder(folder: Path) -> onnx.ModelProto:
    rng = np.random.default_rng(5)
    weight = numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w")
    _external(weight, folder, "weights/w.bin")
    return _finish(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], [weight]))


LAYOUTS = {"sparse-values": _sparse_values, "sparse-indices": _sparse_indices,
           "function-constant": _function_constant,
           "constant-sparse-value": _constant_sparse_value, "if-branch": _if_branch,
           "loop-body": _loop_body, "subfolder": _subfolder}


def _layout(gf, name: str) -> Path:
    """src/m.onnx with its external data in src/, an empty dst/ and an unrelated elsewhere/."""
    src = gf.folder / "src"
    for folder in ("src", "dst", "elsewhere"):
        (gf.folder / folder).mkdir()
    model = LAYOUTS[name](src)
    (src / "m.onnx").write_bytes(model.SerializeToString())
    gf.ort_session(src / "m.onnx")  # ONNX Runtime loads it from its path
    return src / "m.onnx"


def _written_loads_from_its_folder(gf, src: Path, dst: Path) -> None:
    """``dst`` loads in ONNX Runtime from its own folder (the working folder elsewhere, with no
    file of the source's beside it) and computes what ``src`` computes."""
    previous = os.getcwd()
    os.chdir(gf.folder / "elsewhere")
    try:
        gf.assert_same_function(src, dst, full_check=None)
    finally:
        os.chdir(previous)
    written = onnx.load(str(dst), load_external_data=False)
    from graphfix.model_io import iter_tensors

    for tensor in iter_tensors(written):
        for entry in tensor.external_data:
            if entry.key == "location":
                assert (dst.parent / entry.value).is_file(), entry.value


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("where", ["model-folder", "parent", "elsewhere-absolute"])
@pytest.mark.parametrize("verify", [True, False], ids=["verify", "no-verify"])
def test_optimize_finds_external_data_in_the_models_folder(gf, layout, where, verify):
    src = _layout(gf, layout)
    dst = gf.folder / "dst" / "o.onnx"
    extra = [] if verify else ["--no-verify"]
    if where == "model-folder":
        args, cwd = ["optimize", "m.onnx", "../dst/o.onnx", *extra], gf.folder / "src"
    elif where == "parent":
        args, cwd = ["optimize", "src/m.onnx", "dst/o.onnx", *extra], gf.folder
    else:
        args, cwd = ["optimize", str(src), str(dst), *extra], gf.folder / "elsewhere"
    outcome = gf.invoke(*args, cwd=cwd)
    text = outcome.describe()
    assert outcome.code == 0 and outcome.error_lines == [], text
    assert outcome.removed == outcome.changed == [], text
    assert set(outcome.added) <= {str(dst), str(dst) + ".data"}, text
    _written_loads_from_its_folder(gf, src, dst)


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("command", ["inspect", "check"])
def test_inspect_and_check_find_external_data_from_another_folder(gf, layout, command):
    src = _layout(gf, layout)
    args = ["inspect", str(src)] if command == "inspect" else ["check", str(src), str(src)]
    outcome = gf.succeeded(*args, cwd=gf.folder / "elsewhere")
    if command == "inspect":  # onnx's checker cannot read external sparse tensors: it may say so
        assert "cannot load" not in outcome.stdout and "regular file" not in outcome.stdout, (
            outcome.describe())
