"""Hostile shapes and element types: sizes too large to allocate or negative, PaddlePaddle's -1,
dynamic dimensions everywhere, empty tensors, every common dtype, sequence and optional inputs,
scalars, models without inputs or whose output is an input.

Cases (43): a 2**62 size (optimize, check, and inspect, which reports it), sizes whose product
overflows int64, 16 GiB of input, a size of -5 (inspect, optimize, check), -1 sizes (optimize;
check and inspect; with --input-shape), every axis dynamic (nhwc, matmul), unknown rank, unnamed
dynamic axes, an empty dim_param, zero-size axes x2 (matmul batch, nhwc), 8 element types that
must work (string, bool, int8, uint64, float16, double, uint8, int16), 4 exotic ones (bfloat16,
int4, float8e4m3fn, complex64: a correct model or one refusal), bfloat16 with --no-verify, a
sequence input, an optional input (refused naming --no-verify, then written), a rank-0 input, a
model with no inputs, a model whose only output is its input (with -1 sizes), an output whose
declared shape is wrong (optimize refuses, naming both shapes; check and inspect warn; ONNX
Runtime warns at run time: its log must not reach the user), one whose declared type is wrong,
one whose declared shape only names a size (kept), a dynamic size no parity ladder tries
(refused naming --input-shape; then given), strings with dynamic sizes. """

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper


def _big(dims) -> onnx.ModelProto:
    return onnx.parser.parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[{dims}] x) => (float[{dims}] y) {{ y = Relu (x) }}""")


# --------------------------------------------------------------------------- impossible sizes
@pytest.mark.parametrize("command", ["optimize", "check"])
def test_a_size_of_two_to_the_62(gf, command):
    gf.model(_big(f"{2**62}"))
    args = ["optimize", "m.onnx", "out.onnx"] if command == "optimize" else [
        "check", "m.onnx", "m.onnx"]
    gf.refused(*args)


def test_sizes_whose_product_overflows(gf):
    gf.model(_big(f"{2**40},{2**40}"))
    gf.refused("optimize", "m.onnx", "out.onnx")


def test_sixteen_gibibytes_of_input(gf):
    gf.model(_big("65536,65536"))  # 16 GiB of float32
    gf.refused("optimize", "m.onnx", "out.onnx", match="x")


@pytest.mark.parametrize("command", ["inspect", "optimize", "check"])
def test_a_negative_size(gf, command):
    model = _big("2,3")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -5
    gf.model(model)
    args = {"inspect": ["inspect", "m.onnx"], "optimize": ["optimize", "m.onnx", "out.onnx"],
            "check": ["check", "m.onnx", "m.onnx"]}[command]
    gf.refused(*args, match="-5")


# --------------------------------------------------------------------------- dynamic sizes
def _paddle() -> onnx.ModelProto:
    """PaddlePaddle writes unknown sizes as -1 (in inputs, outputs and value_info)."""
    model = gf_nhwc(dims=(1, 4, 4, 3))
    for value in (*model.graph.input, *model.graph.output):
        for index in (0, 1, 2):
            value.type.tensor_type.shape.dim[index].dim_value = -1
    return model


def gf_nhwc(dims=(1, 4, 4, 3)) -> onnx.ModelProto:
    """Transpose -> Relu -> Transpose back on a float [N, H, W, C] input (sizes: ``dims``)."""
    perm_in, perm_out = [0, 3, 1, 2], [0, 2, 3, 1]
    dims = list(dims)
    graph = helper.make_graph(
        [helper.make_node("Transpose", ["x"], ["t"], perm=perm_in),
         helper.make_node("Relu", ["t"], ["r"]),
         helper.make_node("Transpose", ["r"], ["y"], perm=perm_out)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_minus_one_sizes_work(gf):
    gf.model(_paddle())
    gf.optimized("m.onnx", "out.onnx")
    written = onnx.load(str(gf.folder / "out.onnx"))
    assert "Transpose" not in [n.op_type for n in written.graph.node]


def test_minus_one_sizes_check_and_inspect(gf):
    gf.model(_paddle())
    gf.succeeded("check", "m.onnx", "m.onnx")
    gf.succeeded("inspect", "m.onnx")


def test_minus_one_sizes_with_input_shape(gf):
    gf.model(_paddle())
    gf.optimized("m.onnx", "out.onnx", "--input-shape", "x:2x5x6x3")


def test_every_axis_dynamic(gf):
    gf.model(gf_nhwc(dims=("N", "H", "W", "C")))
    gf.optimized("m.onnx", "out.onnx")


def test_every_axis_of_a_matmul_dynamic(gf):
    """The contracted axis must be 16 (the weights'): the parity ladder has to find it."""
    gf.model(gf.models.matmul(dims=["batch", "features"]))
    outcome = gf.invoke("optimize", "m.onnx", "out.onnx")
    if outcome.code == 0:
        gf.assert_same_function(gf.folder / "m.onnx", gf.folder / "out.onnx", sizes=(16,))
    else:
        gf.refused("optimize", "m.onnx", "out.onnx", match="input-shape")


def test_unknown_rank(gf):
    model = gf_nhwc()
    model.graph.input[0].type.tensor_type.ClearField("shape")
    model.graph.output[0].type.tensor_type.ClearField("shape")
    gf.model(model)
    gf.refused_or_correct("optimize", "m.onnx", "out.onnx")


def test_unnamed_dynamic_axes(gf):
    model = gf_nhwc()
    for value in (*model.graph.input, *model.graph.output):
        for dim in value.type.tensor_type.shape.dim:
            dim.Clear()
    gf.model(model)
    gf.optimized("m.onnx", "out.onnx")


def test_an_empty_dim_param(gf):
    model = gf_nhwc()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = ""
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "   "
    gf.model(model)
    gf.refused_or_correct("optimize", "m.onnx", "out.onnx")


@pytest.mark.parametrize("model", ["matmul", "nhwc"])
def test_zero_size_axes(gf, model):
    built = gf.models.matmul(dims=[0, 16]) if model == "matmul" else gf_nhwc(dims=(2, 0, 4, 3))
    gf.model(built)
    gf.optimized("m.onnx", "out.onnx")


# --------------------------------------------------------------------------- dtypes
MUST_WORK = {
    "string": TensorProto.STRING, "bool": TensorProto.BOOL, "int8": TensorProto.INT8,
    "uint64": TensorProto.UINT64, "float16": TensorProto.FLOAT16,
    "double": TensorProto.DOUBLE, "uint8": TensorProto.UINT8, "int16": TensorProto.INT16,
}
EXOTIC = {
    "bfloat16": TensorProto.BFLOAT16, "int4": TensorProto.INT4,
    "float8e4m3fn": TensorProto.FLOAT8E4M3FN, "complex64": TensorProto.COMPLEX64,
}


@pytest.mark.parametrize("dtype", list(MUST_WORK))
def test_element_types(gf, dtype):
    gf.model(gf.models.nhwc(MUST_WORK[dtype], middle="Identity"))
    gf.optimized("m.onnx", "out.onnx")
    written = onnx.load(str(gf.folder / "out.onnx"))
    assert written.graph.input[0].type.tensor_type.elem_type == MUST_WORK[dtype]


@pytest.mark.parametrize("dtype", list(EXOTIC))
def test_exotic_element_types(gf, dtype):
    """Types ONNX Runtime's CPU provider may not run: a correct model, or one clear refusal."""
    gf.model(gf.models.nhwc(EXOTIC[dtype], middle="Identity", opset=21))
    outcome = gf.refused_or_correct("optimize", "m.onnx", "out.onnx")
    if outcome.code == 1:
        assert "--no-verify" in outcome.error_lines[0] or dtype in outcome.error_lines[0], (
            outcome.describe())


def test_a_sequence_input(gf):
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (seq(int64[2,3,4,5]) s) => (int64[2,3,4,5] y) {
        zero = Constant <value = int64 {0}> ()
        a = SequenceAt (s, zero)
        t = Transpose <perm = [0, 3, 1, 2]> (a)
        y = Transpose <perm = [0, 2, 3, 1]> (t)
    }""")
    gf.model(model)
    gf.optimized("m.onnx", "out.onnx")


def test_an_optional_input(gf):
    x = helper.make_value_info("x", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, [2, 3])))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(
        [helper.make_node("OptionalGetElement", ["x"], ["e"]),
         helper.make_node("Relu", ["e"], ["y"])], "g", [x], [y])
    gf.model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)],
                               ir_version=8))
    # fed present (a value of its element's type), so the check runs
    gf.succeeded("optimize", "m.onnx", "out.onnx", produces=["out.onnx"])
    onnx.checker.check_model(str(gf.folder / "out.onnx"), full_check=True)


def test_a_rank_zero_input(gf):
    gf.model(onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float x) => (float y) { s = Mul (x, x)  y = Relu (s) }"""))
    gf.optimized("m.onnx", "out.onnx")


def test_a_model_without_inputs(gf):
    gf.model(onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g () => (float[3] y) {
        c = Constant <value = float[3] {-1.0, 0.5, 2.0}> ()
        y = Relu (c)
    }"""))
    gf.optimized("m.onnx", "out.onnx")


def test_the_only_output_is_the_input(gf):
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x) => (float[2,3] x) { }""")
    for value in (*model.graph.input, *model.graph.output):
        value.type.tensor_type.shape.dim[0].dim_value = -1
    gf.model(model)
    gf.optimized("m.onnx", "out.onnx")


def _wrong_output_shape() -> onnx.ModelProto:
    """The output says [2, 5], the model computes [2, 3]: ONNX Runtime logs a warning when it
    runs it; that log line must not reach the user (only with -vv)."""
    return onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x) => (float[2,5] y) { t = Relu (x)  y = Neg (t) }""")


def test_a_wrongly_declared_output_shape_optimize(gf):
    """ONNX Runtime runs it (PaddlePaddle's exporter declares some outputs rank 0): optimize
    writes it, the output declaring what the graph computes, and says what was declared."""
    gf.model(_wrong_output_shape())
    gf.refused_or_correct("optimize", "m.onnx", "out.onnx")
    outcome = gf.optimized("m.onnx", "out2.onnx")
    assert re.search(r"output 'y' is declared \[2, 5\] but the graph computes \[2, 3\]: the "
                     r"output now declares what the graph computes", outcome.stdout + outcome.stderr)
    written = onnx.load(gf.folder / "out2.onnx")
    assert [d.dim_value for d in written.graph.output[0].type.tensor_type.shape.dim] == [2, 3]
    onnx.checker.check_model(written, full_check=True)
    assert "warning" in gf.succeeded("inspect", "m.onnx").stdout


def test_an_output_size_the_original_does_not_compute_is_declared_dynamic(gf):
    """An exporter's traced constant in an output's declaration ([N, 54] where the model gives
    as many rows as its input has): inference cannot prove it wrong, the original's runs on
    parity's inputs do; the written output declares that size dynamic, saying so, and ONNX
    Runtime no longer warns on every call."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,4] x) => (float[N,4] y) { t = Relu (x)  y = Neg (t) }""")
    dims = model.graph.output[0].type.tensor_type.shape.dim
    dims[0].Clear()
    dims[0].dim_value = 54
    gf.model(model)
    outcome = gf.optimized("m.onnx", "out.onnx")
    assert re.search(r"output 'y' declared sizes the original does not compute on parity's "
                     r"inputs \(axis 0: 54, computed \d", outcome.stdout + outcome.stderr)
    written = onnx.load(gf.folder / "out.onnx")
    declared = written.graph.output[0].type.tensor_type.shape.dim
    # unnamed, as an unknown size is: a name would make the file larger than the size did
    assert not declared[0].HasField("dim_value") and not declared[0].dim_param
    assert written.ByteSize() <= model.ByteSize()
    assert declared[1].dim_value == 4
    again = gf.optimized("out.onnx", "out2.onnx")  # nothing more to declare
    assert "declared sizes" not in again.stdout + again.stderr


def test_an_output_declared_rank_0_optimize(gf):
    """PaddlePaddle's exporter declares some outputs rank 0 ([]) that compute [N, 2]: written,
    the unknown size left unnamed, the input's name for a size it keeps."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,2] x) => (float y, float z) {
        t = Relu (x)
        y = Neg (t)
        f = Flatten <axis = 0> (t)
        z = Softmax (f)
    }""")
    for value in model.graph.output:
        value.type.tensor_type.shape.Clear()  # declared, with no dimension: rank 0
        assert value.type.tensor_type.HasField("shape")
    gf.model(model)
    gf.optimized("m.onnx", "out.onnx")
    written = onnx.load(gf.folder / "out.onnx")
    y, z = (value.type.tensor_type.shape.dim for value in written.graph.output)
    assert [(d.dim_param, d.dim_value) for d in y] == [("N", 0), ("", 2)]
    assert len(z) == 2 and z[0].dim_value == 1 and not z[1].dim_param


def test_a_wrongly_declared_output_type_optimize(gf):
    gf.model(onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x) => (int64[2,3] y) { t = Relu (x)  y = Neg (t) }"""))
    gf.refused_or_correct("optimize", "m.onnx", "out.onnx")


def test_a_declared_output_that_only_names_a_size_is_kept(gf):
    """A name or an unknown size where the graph computes a static one is no contradiction."""
    gf.model(onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2,3] x) => (float[N,?] y) { t = Relu (x)  y = Neg (t) }"""))
    gf.optimized("m.onnx", "out.onnx")


def test_a_wrongly_declared_output_shape_check(gf):
    gf.model(_wrong_output_shape())
    gf.refused_or_correct("check", "m.onnx", "m.onnx")


def test_a_size_of_two_to_the_62_inspect(gf):
    """inspect only reads the signature: it reports the size."""
    gf.model(_big(f"{2**62}"))
    assert str(2**62) in gf.succeeded("inspect", "m.onnx").stdout


def test_bfloat16_without_verification(gf):
    gf.model(gf.models.nhwc(TensorProto.BFLOAT16, middle="Identity"))
    gf.succeeded("optimize", "m.onnx", "out.onnx", "--no-verify", produces=["out.onnx"])
    onnx.checker.check_model(str(gf.folder / "out.onnx"), full_check=True)
    gf.ort_session(gf.folder / "out.onnx")


def _needs_seven(first: int = 3, second: int = 4) -> onnx.ModelProto:
    """x [N] split into 3 and 4: only N = 7 runs, a size no parity ladder tries, nor any
    Reshape's target holds."""
    return onnx.parser.parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N] x) => (float[{first}] a, float[{second}] b) {{
        sizes = Constant <value = int64[2] {{{first}, {second}}}> ()
        a, b = Split (x, sizes)
    }}""")


def test_a_dynamic_size_no_ladder_tries(gf):
    # found by the size search's last resort (every size of the dimension), and said
    gf.model(_needs_seven())
    outcome = gf.optimized("m.onnx", "out.onnx", compare=False)
    assert "it ran at 7" in outcome.stdout, outcome.stdout
    x = {"x": np.linspace(-1, 1, 7, dtype=np.float32)}
    want = gf.ort_session(gf.folder / "m.onnx").run(None, x)
    got = gf.ort_session(gf.folder / "out.onnx").run(None, x)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)


def test_a_dynamic_size_no_search_tries(gf):
    # past the sweep's sizes: refused, with the options that give the size
    gf.model(_needs_seven(300, 400))
    gf.refused("optimize", "m.onnx", "out.onnx", match="--input-shape")


def test_a_dynamic_size_baked_into_a_reshape(gf):
    # x [N] reshaped to [1, 7]: only N = 7 runs, the size the Reshape's target holds
    gf.model(onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N] x) => (float[1,7] y) {
        shape = Constant <value = int64[2] {1, 7}> ()
        r = Reshape (x, shape)
        y = Relu (r)
    }"""))
    gf.optimized("m.onnx", "out.onnx", compare=False)  # the comparison's own sizes miss 7
    x = {"x": np.linspace(-1, 1, 7, dtype=np.float32)}
    [want] = gf.ort_session(gf.folder / "m.onnx").run(None, x)
    [got] = gf.ort_session(gf.folder / "out.onnx").run(None, x)
    np.testing.assert_array_equal(got, want)


def test_a_dynamic_size_no_ladder_tries_given(gf):
    gf.model(_needs_seven())
    gf.optimized("m.onnx", "out.onnx", "--input-shape", "x:7")


def test_strings_with_dynamic_sizes(gf):
    gf.model(gf.models.nhwc(TensorProto.STRING, dims=("N", "H", 4, 3), middle="Identity"))
    gf.optimized("m.onnx", "out.onnx")
