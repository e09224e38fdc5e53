"""fold-shapes: shape arithmetic proven by symbolic dimensions becomes constants."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from graphfix.passes.fold_shapes import FoldShapes

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def parse(body: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(HEADER + body)


def ops(model: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in model.graph.node]


def run(model: onnx.ModelProto, ort_run, sizes: list[dict[str, int]]):
    """Fold a copy; check validity, an unchanged signature, and equal outputs at every size."""
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = FoldShapes()(model)
    onnx.checker.check_model(result.model, full_check=True)
    assert [(v.name, v.type) for v in result.model.graph.input] == [
        (v.name, v.type) for v in original.graph.input]
    assert [(v.name, v.type) for v in result.model.graph.output] == [
        (v.name, v.type) for v in original.graph.output]
    rng = np.random.default_rng(0)
    for dims in sizes:
        feeds = {}
        for value in original.graph.input:
            shape = [d.dim_value if d.HasField("dim_value") else dims[d.dim_param]
                     for d in value.type.tensor_type.shape.dim]
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
        expected, actual = ort_run(original, feeds), ort_run(result.model, feeds)
        for name, value in expected.items():
            np.testing.assert_array_equal(actual[name], value, err_msg=name)
    assert not FoldShapes()(result.model).modified  # idempotent
    return result


def targets(model: onnx.ModelProto) -> dict[str, list[int]]:
    values = {t.name: numpy_helper.to_array(t).tolist() for t in model.graph.initializer}
    return {n.output[0]: values.get(n.input[1]) for n in model.graph.node
            if n.op_type in ("Reshape", "Expand")}


SIZES = [{"B": 1, "S": 5}, {"B": 3, "S": 7}]

# PyTorch's legacy exporter: the head split reads batch and sequence off the tensor.
HEAD_SPLIT = """
g (float[B,S,8] x) => (float[B,S,2,4] y) {
    shape = Shape (x)
    zero = Constant <value = int64 {0}> ()
    one = Constant <value = int64 {1}> ()
    b = Gather <axis = 0> (shape, zero)
    s = Gather <axis = 0> (shape, one)
    axes = Constant <value = int64[1] {0}> ()
    b1 = Unsqueeze (b, axes)
    s1 = Unsqueeze (s, axes)
    heads = Constant <value = int64[2] {2, 4}> ()
    target = Concat <axis = 0> (b1, s1, heads)
    y = Reshape (x, target)
}"""


def test_reshape_target_computed_from_shape_becomes_a_constant(ort_run):
    result = run(parse(HEAD_SPLIT), ort_run, SIZES)
    assert ops(result.model) == ["Reshape"]
    assert targets(result.model) == {"y": [0, 0, 2, 4]}
    assert result.stats["targets_folded"] == 1


def test_a_size_is_never_minus_one(ort_run):
    # Where(Equal(shape, -1), 1, shape): the legacy exporter's guard before an Expand.
    model = parse("""
    g (float[B,1,S] x) => (float[B,4,S] y) {
        shape = Shape (x)
        idx = Constant <value = int64[3] {0, 1, 2}> ()
        four = Constant <value = int64[3] {1, 4, 1}> ()
        dims = Mul (shape, four)
        minus = Constant <value = int64[3] {-1, -1, -1}> ()
        eq = Equal (dims, minus)
        ones = Constant <value = int64[3] {1, 1, 1}> ()
        target = Where (eq, ones, dims)
        y = Expand (x, target)
    }""")
    result = run(model, ort_run, SIZES)
    assert ops(result.model) == ["Expand"]
    assert targets(result.model) == {"y": [1, 4, 1]}


def test_expand_to_its_own_shape_goes(ort_run):
    model = parse("""
    g (float[B,S] x) => (float[B,S] y) {
        shape = Shape (x)
        e = Expand (x, shape)
        y = Relu (e)
    }""")
    result = run(model, ort_run, SIZES)
    assert ops(result.model) == ["Relu"]
    assert result.stats["nodes_dropped"] == 1


def test_reshape_of_a_reshape_reads_the_first_input(ort_run):
    model = parse("""
    g (float[B,S,8] x) => (float[B,S,8] y) {
        flat_shape = Constant <value = int64[1] {-1}> ()
        flat = Reshape (x, flat_shape)
        shape = Shape (x)
        back = Reshape (flat, shape)
        y = Relu (back)
    }""")
    result = run(model, ort_run, SIZES)
    assert ops(result.model) == ["Relu"]


def test_each_layer_reuses_the_first_size_computation(ort_run):
    model = parse("""
    g (float[B,S,8] x) => (float[B,S,2,4] y, float[B,S,2,4] z) {
        s1 = Shape (x)
        s2 = Shape (x)
        r = Relu (x)
        s3 = Shape (r)
        idx = Constant <value = int64[2] {0, 1}> ()
        g1 = Gather <axis = 0> (s1, idx)
        g3 = Gather <axis = 0> (s3, idx)
        heads = Constant <value = int64[2] {2, 4}> ()
        t1 = Concat <axis = 0> (g1, heads)
        t3 = Concat <axis = 0> (g3, heads)
        y = Reshape (x, t1)
        z = Reshape (r, t3)
    }""")
    result = run(model, ort_run, SIZES)
    assert sorted(ops(result.model)) == ["Relu", "Reshape", "Reshape"]


def test_sizes_that_cannot_be_told_apart_stay_computed(ort_run):
    # Two unknown sizes in the target: neither a copy (0) nor the one inferred size (-1).
    model = parse("""
    g (float[B,S] x, float[T,U] w) => (float[T,U] y) {
        shape = Shape (w)
        y = Reshape (x, shape)
    }""")
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "T"
    result = FoldShapes()(model)
    assert ops(result.model) == ["Shape", "Reshape"]
    assert not result.modified


def test_dynamic_dimensions_stay_dynamic(ort_run):
    result = run(parse(HEAD_SPLIT), ort_run, SIZES)
    dims = result.model.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in dims[:2]] == ["B", "S"]


@pytest.mark.parametrize("graph_output", [True, False])
def test_graph_output_keeps_its_producer(graph_output, ort_run):
    body = """
    g (float[B,S] x) => (float[B,S] y, int64[2] shape) {
        shape = Shape (x)
        y = Expand (x, shape)
    }""" if graph_output else """
    g (float[B,S] x) => (float[B,S] y) {
        shape = Shape (x)
        y = Expand (x, shape)
    }"""
    result = run(parse(body), ort_run, SIZES)
    assert "Expand" in ops(result.model)  # y is a graph output: its producer stays


def test_if_bodies_are_left_alone(ort_run):
    model = parse("""
    g (float[B,S] x, bool c) => (float[B,S] y) {
        y = If (c) <
            then_branch = t () => (float[B,S] a) { s = Shape (x)  a = Reshape (x, s) },
            else_branch = e () => (float[B,S] b) { b = Relu (x) }
        >
    }""")
    result = FoldShapes()(model)
    assert not result.modified


# GPT-2's legacy export: q, k, v come from one Split, and v's head split reads k's shape.
SPLIT_HEADS = """
g (float[B,S,24] x, float[8,8] w) => (float[B,S,2,4] y) {
    q, k, v = Split <axis = 2> (x)
    shape = Shape (k)
    zero = Constant <value = int64 {0}> ()
    one = Constant <value = int64 {1}> ()
    b = Gather <axis = 0> (shape, zero)
    s = Gather <axis = 0> (shape, one)
    axes = Constant <value = int64[1] {0}> ()
    b1 = Unsqueeze (b, axes)
    s1 = Unsqueeze (s, axes)
    heads = Constant <value = int64[2] {2, 4}> ()
    target = Concat <axis = 0> (b1, s1, heads)
    y = Reshape (v, target)
}"""

# A Gemm's rows are its input's: the flatten-project-unflatten of legacy exports.
GEMM_ROWS = """
g (float[B,8] x, float[8,6] w) => (float[B,2,3] y) {
    g = Gemm (x, w)
    shape = Shape (g)
    zero = Constant <value = int64[1] {0}> ()
    one = Constant <value = int64[1] {1}> ()
    b = Slice (shape, zero, one)
    rest = Constant <value = int64[2] {2, 3}> ()
    target = Concat <axis = 0> (b, rest)
    y = Reshape (g, target)
}"""


@pytest.mark.parametrize("text, target", [(SPLIT_HEADS, [0, 0, 2, 4]), (GEMM_ROWS, [0, 2, 3])],
                         ids=["equal-split-parts", "gemm-rows"])
def test_sizes_through_split_and_gemm(text: str, target: list[int], ort_run):
    result = run(parse(text), ort_run, SIZES)
    assert targets(result.model) == {"y": target}
    assert ops(result.model).count("Shape") == 0


def test_a_folded_value_reads_the_initializer_that_holds_it(ort_run):
    # The folded target equals an initializer the graph has: no copy of it is added (onnxsim
    # would merge the copy, so a second run of the pipeline would change the model).
    model = parse(HEAD_SPLIT)
    model.graph.initializer.append(
        onnx.numpy_helper.from_array(np.array([0, 0, 2, 4], np.int64), "existing"))
    model.graph.node.append(onnx.helper.make_node("Reshape", ["x", "existing"], ["z"]))
    model.graph.output.append(onnx.helper.make_tensor_value_info(
        "z", onnx.TensorProto.FLOAT, ["B", "S", 2, 4]))
    result = run(model, ort_run, SIZES)
    assert targets(result.model) == {"y": [0, 0, 2, 4], "z": [0, 0, 2, 4]}
    assert [t.name for t in result.model.graph.initializer] == ["existing"]


def test_a_declared_shape_is_not_a_fact():
    """Rule 8: the output declares [1, 3, 3], but the Expand's target is an input's value: the
    declaration does not make it a constant (the onnx package's expand_shape_model2 declares
    the shape of its own test data; other data gives [1, 3, 1])."""
    model = parse("""
    g (float[1,3,1] x, int64[2] shape) => (float[1,3,3] y) {
        y = Expand (x, shape)
    }""")
    model.graph.value_info.extend([onnx.helper.make_tensor_value_info(
        "y", onnx.TensorProto.FLOAT, [1, 3, 3])])
    result = FoldShapes()(model)
    assert not result.modified
    assert list(result.model.graph.node[0].input) == ["x", "shape"]


# --------------------------------------------------------------- rule 9: CastLike
def test_cast_like_of_a_constant_becomes_a_constant_of_the_type(ort_run, rng) -> None:
    # The dynamo exporter writes a float16 model's constants as CastLike(c, x).
    text = """
    <ir_version: 8, opset_import: ["" : 18]>
    g (float16[N, 3] x) => (float16[N, 3] y, float16[N, 3] z) {
        tenth = Constant <value = float {0.1}> ()
        c = CastLike (tenth, x)
        y = Add (x, c)
        d = CastLike (x, x)
        z = Mul (d, c)
    }"""
    result = FoldShapes()(onnx.parser.parse_model(text))
    assert [n.op_type for n in result.model.graph.node] == ["Add", "CastLike", "Mul"]
    [folded] = result.model.graph.initializer
    assert folded.data_type == onnx.TensorProto.FLOAT16 and list(folded.dims) == []
    assert numpy_helper.to_array(folded) == np.float16(0.1)  # rounded once, to nearest
    x = rng.standard_normal((2, 3)).astype(np.float16)
    got, want = ort_run(result.model, {"x": x}), ort_run(onnx.parser.parse_model(text), {"x": x})
    for name in ("y", "z"):  # ORT's own float16 kernels round within one ulp of each other
        np.testing.assert_allclose(got[name], want[name], rtol=2e-3, atol=1e-3)
    assert not FoldShapes()(result.model).modified


def test_cast_like_to_a_type_numpy_cannot_cast_to_stays() -> None:
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 18]>
    g (bfloat16[3] x) => (bfloat16[3] y) {
        one = Constant <value = float {1.0}> ()
        c = CastLike (one, x)
        y = Add (x, c)
    }""")
    assert not FoldShapes()(model).modified


@pytest.mark.parametrize("narrow, wraps_at", [("3", 128), ("2", 256), ("5", 32768)])
def test_a_size_cast_to_a_narrow_integer_is_not_the_size(narrow: str, wraps_at: int, ort_run):
    """Cast(Cast(n, int8), int64) is n wrapped into int8: rewiring a Slice's end to n wrote a
    model that kept 300 columns where the original keeps 44 (parity's sizes stop at 37)."""
    text = f"""
    g (float[B,N] x) => (float[B,M] y) {{
        shape = Shape (x)
        one = Constant <value = int64 {{1}}> ()
        n = Gather <axis = 0> (shape, one)
        small = Cast <to = {narrow}> (n)
        e = Cast <to = 7> (small)
        z = Constant <value = int64[1] {{0}}> ()
        axes = Constant <value = int64[1] {{1}}> ()
        ends = Unsqueeze (e, z)
        sliced = Slice (x, z, ends, axes)
        y = Relu (sliced)
    }}"""
    result = FoldShapes()(parse(text))
    rng = np.random.default_rng(0)
    for n in (8, wraps_at + 44):
        feeds = {"x": rng.standard_normal((2, n)).astype(np.float32)}
        expected, actual = ort_run(parse(text), feeds), ort_run(result.model, feeds)
        assert actual["y"].shape == expected["y"].shape


@pytest.mark.parametrize("body, value", [
    # a constant past int8: ONNX Runtime wraps it (300 -> 44)
    ("""c = Constant <value = int64 {300}> ()
        small = Cast <to = 3> (c)
        e = Cast <to = 7> (small)""", 44),
    # int32 arithmetic wraps: 65536 * 65537 is 65536 in int32 (fold-shapes raised an
    # OverflowError writing 4295032832 into an int32 tensor, and was left out)
    ("""a = Constant <value = int32 {65536}> ()
        b = Constant <value = int32 {65537}> ()
        p = Mul (a, b)
        e = Cast <to = 7> (p)""", 65536),
    # integer division truncates toward zero, exactly past 2**53
    ("""a = Constant <value = int64 {-9007199254740993}> ()
        b = Constant <value = int64 {2}> ()
        e = Div (a, b)""", -4503599627370496),
])
def test_integer_constants_fold_to_what_onnx_runtime_computes(body: str, value: int, ort_run):
    model = parse(f"""
    g (float[B,N] x) => (float[B,M] y) {{
        {body}
        z = Constant <value = int64[1] {{0}}> ()
        axes = Constant <value = int64[1] {{1}}> ()
        ends = Unsqueeze (e, z)
        sliced = Slice (x, z, ends, axes)
        y = Relu (sliced)
    }}""")
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = FoldShapes()(model)
    assert "OverflowError" not in str(result.skipped)
    folded = {t.name: numpy_helper.to_array(t).reshape(-1).tolist()
              for t in result.model.graph.initializer}
    [slice_node] = [n for n in result.model.graph.node if n.op_type == "Slice"]
    if slice_node.input[2] in folded:
        assert folded[slice_node.input[2]] == [value]
    feeds = {"x": np.ones((1, 70000), np.float32)}
    expected, actual = ort_run(original, feeds), ort_run(result.model, feeds)
    assert actual["y"].shape == expected["y"].shape


def test_a_slice_going_back_from_before_the_start_takes_the_first_element(ort_run):
    """ONNX clamps a start before the first element to it going back (Slice(v, -100, -1000,
    -1) is v[0:1]); Python's slice takes nothing there, which folded a Slice end to the axis's
    whole size."""
    model = parse("""
    g (float[B,N] x) => (float[B,M] y) {
        v = Constant <value = int64[3] {40, 20, 30}> ()
        s = Constant <value = int64[1] {-100}> ()
        e = Constant <value = int64[1] {-1000}> ()
        a = Constant <value = int64[1] {0}> ()
        t = Constant <value = int64[1] {-1}> ()
        r = Slice (v, s, e, a, t)
        big = Constant <value = int64[1] {300}> ()
        both = Concat <axis = 0> (big, r)
        last = Constant <value = int64[1] {-1}> ()
        ends = Gather <axis = 0> (both, last)
        z = Constant <value = int64[1] {0}> ()
        axes = Constant <value = int64[1] {1}> ()
        sliced = Slice (x, z, ends, axes)
        y = Relu (sliced)
    }""")
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = FoldShapes()(model)
    for n in (41, 50):
        feeds = {"x": np.ones((2, n), np.float32)}
        assert ort_run(result.model, feeds)["y"].shape == ort_run(original, feeds)["y"].shape



@pytest.mark.parametrize("body", [
    # a Slice step chosen at run time (1 or 2) is not the default step 1
    """big = ReduceMax <keepdims = 0> (x)
        two = Constant <value = float {2}> ()
        wide = Greater (big, two)
        s2 = Constant <value = int64[1] {2}> ()
        s1 = Constant <value = int64[1] {1}> ()
        step = Where (wide, s2, s1)
        z = Constant <value = int64[1] {0}> ()
        e = Constant <value = int64[1] {100}> ()
        y = Slice (x, z, e, z, step)""",
    # Squeeze axes computed at run time are not "every axis of size 1"
    """big = ReduceMax <keepdims = 0> (x)
        two = Constant <value = float {2}> ()
        wide = Greater (big, two)
        one = Constant <value = int64[1] {1}> ()
        k2 = Constant <value = int64[1] {2}> ()
        k = Where (wide, one, k2)
        all = Constant <value = int64[2] {0, 3}> ()
        z = Constant <value = int64[1] {0}> ()
        axes = Slice (all, z, k)
        u = Unsqueeze (x, all)
        y = Squeeze (u, axes)""",
])
def test_axes_and_steps_computed_at_run_time_are_not_the_defaults(body: str, ort_run):
    text = f"""
    g (float[6,4] x) => (float[2] out) {{
        {body}
        shape = Shape (y)
        sizes = Cast <to = 1> (shape)
        total = ReduceSum <keepdims = 0> (y)
        n = ReduceSum <keepdims = 0> (sizes)
        out1 = Mul (n, total)
        a = Constant <value = int64[1] {{0}}> ()
        o = Unsqueeze (out1, a)
        out = Concat <axis = 0> (o, o)
    }}"""
    result = FoldShapes()(parse(text))
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    for scale in (0.01, 3.0):
        feeds = {"x": x * scale}
        np.testing.assert_allclose(ort_run(result.model, feeds)["out"],
                                   ort_run(parse(text), feeds)["out"], rtol=1e-6)


def test_an_input_with_a_default_is_not_its_default(ort_run):
    """From IR 4 an initializer that is also an input is a default the caller may override:
    folding it wrote a model that ignored the value fed."""
    model = parse("""
    g (float[N,4] x, int64[1] scale) => (float[N,4] y) {
        zero = Constant <value = int64[1] {0}> ()
        s = Add (scale, zero)
        f = Cast <to = 1> (s)
        y = Mul (x, f)
    }""")
    model.graph.initializer.append(numpy_helper.from_array(np.array([3], np.int64), "scale"))
    result = FoldShapes()(model)
    feeds = {"x": np.ones((2, 4), np.float32), "scale": np.array([5], np.int64)}
    np.testing.assert_array_equal(ort_run(result.model, feeds)["y"], np.full((2, 4), 5.0))


# Rule 10: in a body, a Squeeze of an Unsqueeze over the same axes is its input.
def _branch(opset: int, outputs: str, then: str) -> onnx.ModelProto:
    """``then`` as the then-branch of an If whose condition is true on the inputs generated, and
    computed at run time (the else-branch gives the outputs from Relu(x)), outputs
    ``outputs`` ("float[B,S] y, ...")."""
    declared = re.findall(r"(\w+\[[^\]]*\])\s+(\w+)", outputs)
    names = [name for _, name in declared]
    shapes = [shape for shape, _ in declared]
    branch_outputs = ", ".join(f"{shape} {name}_" for shape, name in declared)
    other = []
    for name, shape in zip(names, shapes):
        rank = shape.count(",") + 1
        other.append(f"r_{name} = Relu (x)" if rank == 2 else
                     f"r_{name} = Unsqueeze (x, z0)")
    else_nodes = " ".join(other)
    else_outputs = ", ".join(f"{shape} r_{name}" for name, shape in zip(names, shapes))
    for name in names:
        then = then.replace(f" {name} = ", f" {name}_ = ")
    return onnx.parser.parse_model(f'<ir_version: 7, opset_import: ["" : {opset}]>' + f"""
    g (float[B,S] x) => ({outputs}) {{
        top = ReduceMax <keepdims = 0> (x)
        nan = IsNaN (top)
        c = Not (nan)
        z0 = Constant <value = int64[1] {{0}}> ()
        {", ".join(names)} = If (c) <
            then_branch = t () => ({branch_outputs}) {{ {then} }},
            else_branch = e () => ({else_outputs}) {{ {else_nodes} }}
        >
    }}""")


def _then(model: onnx.ModelProto) -> onnx.GraphProto:
    return next(n for n in model.graph.node if n.op_type == "If").attribute[0].g


@pytest.mark.parametrize("opset, pair", [
    (17, """a = Constant <value = int64[1] {1}> ()
            u = Unsqueeze (r, a)
            y = Squeeze (u, a)"""),
    (17, """a = Constant <value = int64[2] {-1, 0}> ()
            b = Constant <value = int64[2] {0, -1}> ()
            u = Unsqueeze (r, a)
            y = Squeeze (u, b)"""),
    (11, """u = Unsqueeze <axes = [0, 2]> (r)
            y = Squeeze <axes = [2, 0]> (u)"""),
])
def test_a_squeeze_of_an_unsqueeze_over_the_same_axes_is_its_input(opset, pair, ort_run):
    model = _branch(opset, "float[B,S] y", f"r = Relu (x) {pair}")
    if opset == 11:
        del model.graph.node[3]  # z0: nothing reads it here
    result = run(model, ort_run, SIZES)
    then = _then(result.model)
    assert [n.op_type for n in then.node] == ["Relu"]  # the branch's output keeps its name
    assert then.node[0].output[0] == "y_"
    assert result.stats["squeezes_cancelled"] == 1


def test_a_squeeze_over_other_axes_or_an_unsqueeze_read_elsewhere_stays(ort_run):
    model = _branch(17, "float[1,B,S] y, float[B,S] z, float[1,B,S] w", """
        a = Constant <value = int64[1] {0}> ()
        b = Constant <value = int64[1] {1}> ()
        r = Relu (x)
        u = Unsqueeze (r, a)
        v = Unsqueeze (u, b)
        w = Squeeze (v, a)
        y = Identity (u)
        z = Squeeze (u, a)""")
    result = run(model, ort_run, SIZES)
    kinds = [n.op_type for n in _then(result.model).node]
    # z's pair cancels (Relu writes z); u stays, y reads it; v's axes differ from w's
    assert kinds.count("Unsqueeze") == 2 and kinds.count("Squeeze") == 1
    assert next(n for n in _then(result.model).node if n.op_type == "Relu").output[0] == "z_"
    assert result.stats["squeezes_cancelled"] == 1


def test_the_main_graph_is_left_to_onnxsim() -> None:
    model = parse("""
    g (float[B,S] x) => (float[B,S] y) {
        a = Constant <value = int64[1] {0}> ()
        r = Relu (x)
        u = Unsqueeze (r, a)
        y = Squeeze (u, a)
    }""")
    assert not FoldShapes()(model).modified


def test_an_outer_value_keeps_its_name_and_its_pair_becomes_an_identity(ort_run):
    model = _branch(17, "float[B,S] y, float[1,B,S] z", """
        a = Constant <value = int64[1] {0}> ()
        u = Unsqueeze (x, a)
        y = Squeeze (u, a)
        v = Unsqueeze (x, a)
        w = Squeeze (v, a)
        z = Unsqueeze (w, a)""")
    result = run(model, ort_run, SIZES)
    then = _then(result.model)
    assert [n.op_type for n in then.node] == ["Constant", "Identity", "Unsqueeze"]
    assert [list(n.input) for n in then.node[1:]] == [["x"], ["x", "a"]]


def _loop_with_pairs() -> onnx.ModelProto:
    """A PaddlePaddle-style loop body: every value it carries out goes through Unsqueeze, an
    Add of zero and a Squeeze (the Add is what ONNX Runtime's offline optimization removes),
    its sizes undeclared."""
    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17]>' + """
    g (float[N,4] x, int64 trips) => (float[N,4] y, float[N,4] c) {
        go = Constant <value = bool {1}> ()
        y, c = Loop (trips, go, x, x) <body = b (int64 i, bool cond, float[N,4] h,
                                                 float[N,4] kept)
                => (bool cond_out, float[N,4] h_out, float[N,4] kept_out) {
            cond_out = Identity (cond)
            t = Tanh (h)
            a0 = Constant <value = int64[1] {0}> ()
            zero = Constant <value = float[1] {0}> ()
            u = Unsqueeze (t, a0)
            s = Add (u, zero)
            h_out = Squeeze (s, a0)
            v = Unsqueeze (kept, a0)
            p = Add (v, zero)
            kept_out = Squeeze (p, a0)
        }>
    }""")
    body = model.graph.node[1].attribute[0].g
    for value in [*body.input[2:], *body.output[1:]]:
        for dim in value.type.tensor_type.shape.dim:
            dim.Clear()
    return model


def test_pairs_in_a_loop_body_cancel_where_the_value_is_computed_there(ort_run):
    model = _loop_with_pairs()
    feeds = {"x": np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4),
             "trips": np.array(3, np.int64)}
    expected = ort_run(model, feeds)
    # the Adds of zero gone, as ONNX Runtime's offline optimization leaves the body
    body = model.graph.node[1].attribute[0].g
    for node in body.node:
        if node.op_type == "Squeeze":
            source = next(n for n in body.node if n.output[0] == node.input[0])
            node.input[0] = source.input[0]
    adds = [i for i, n in enumerate(body.node) if n.op_type == "Add"]
    for position in reversed(adds):
        del body.node[position]
    result = FoldShapes()(model)
    onnx.checker.check_model(result.model, full_check=True)
    body = result.model.graph.node[1].attribute[0].g
    kinds = [n.op_type for n in body.node]
    # h_out is computed in the body: its pair goes, Tanh writes h_out; kept_out is the carried
    # input itself, which cannot take the output's name: its pair becomes an Identity
    assert kinds.count("Squeeze") == 0 and kinds.count("Unsqueeze") == 0
    assert ["kept"] in [list(n.input) for n in body.node if n.op_type == "Identity"]
    assert next(n for n in body.node if n.op_type == "Tanh").output[0] == "h_out"
    assert [o.name for o in body.output] == ["cond_out", "h_out", "kept_out"]
    actual = ort_run(result.model, feeds)
    for name, value in expected.items():
        np.testing.assert_array_equal(actual[name], value, err_msg=name)
    assert not FoldShapes()(result.model).modified


def test_the_pipeline_is_a_fixed_point_where_onnx_runtime_leaves_pairs(tmp_path):
    import graphfix

    source = tmp_path / "loop.onnx"
    onnx.save(_loop_with_pairs(), source)
    first, second = tmp_path / "first.onnx", tmp_path / "second.onnx"
    result = graphfix.optimize_file(source, first)
    assert result.report.parity["passed"]
    graphfix.optimize_file(first, second)
    assert first.read_bytes() == second.read_bytes()
    body = onnx.load(first).graph.node[-1].attribute[0].g
    assert sorted(n.op_type for n in body.node) == ["Identity", "Identity", "Tanh"]


def test_nodes_nothing_reads_go_from_bodies_too(ort_run):
    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17]>' + """
    g (float[4] x, bool c) => (float[4] y) {
        y = If (c) <
            then_branch = t () => (float[4] a) { d = Exp (x)  e = Neg (d)  a = Relu (x) },
            else_branch = e () => (float[4] b) { b = Tanh (x) }
        >
    }""")
    result = FoldShapes()(model)
    branch = result.model.graph.node[0].attribute[0].g
    assert [n.op_type for n in branch.node] == ["Relu"]
    assert result.stats["dead_in_bodies"] == 2


def test_a_concat_of_a_concat_over_the_same_axis_is_one(ort_run):
    model = _branch(17, "float[B,S] y, float[B,S] w", """
        z = Neg (x)
        r = Relu (x)
        inner = Concat <axis = 1> (r, x)
        deeper = Concat <axis = 1> (inner, z)
        y = Concat <axis = 1> (r, deeper)
        across = Concat <axis = 0> (r, x)
        zz = Concat <axis = 0> (z, z)
        w = Concat <axis = 1> (across, zz)""")
    then = _then(model)
    then.output[0].type.tensor_type.shape.dim[1].dim_param = "S4"
    then.output[1].type.tensor_type.shape.dim[0].dim_param = "B2"
    then.output[1].type.tensor_type.shape.dim[1].dim_param = "S2"
    # the else-branch computes as much
    other = next(n for n in model.graph.node if n.op_type == "If").attribute[1].g
    del other.node[:]
    other.node.extend([
        onnx.helper.make_node("Concat", ["x", "x", "x", "x"], ["r_y"], axis=1),
        onnx.helper.make_node("Concat", ["x", "x"], ["xx"], axis=0),
        onnx.helper.make_node("Concat", ["xx", "xx"], ["r_w"], axis=1)])
    for index, value in enumerate(model.graph.output):
        value.type.CopyFrom(then.output[index].type)
        other.output[index].type.CopyFrom(then.output[index].type)
    result = run(model, ort_run, SIZES)
    concats = [list(n.input) for n in _then(result.model).node if n.op_type == "Concat"]
    assert ["r", "r", "x", "z"] in concats  # two levels in one
    assert ["across", "zz"] in concats  # another axis: stays
    assert result.stats["concats_flattened"] == 2


# Rule 12: an If whose condition is a constant is the branch it takes.
IF_CONSTANT = """
g (float[B,S] x) => (float[B,S] y, float[B,S] z, float[2] w) {
    %s
    y, z, w = If (c) <
        then_branch = t () => (float[B,S] a, float[B,S] b, float[2] k) {
            n = Neg (x)
            a = Relu (n)
            b = Identity (x)
            k = Constant <value = float[2] {1, 2}> ()
        },
        else_branch = e () => (float[B,S] a, float[B,S] b, float[2] k) {
            n = Exp (x)
            a = Tanh (n)
            b = Sigmoid (n)
            k = Constant <value = float[2] {3, 4}> ()
        }
    >
}"""


@pytest.mark.parametrize("condition, taken", [
    ("c = Constant <value = bool {1}> ()", ["Neg", "Relu", "Identity", "Constant"]),
    ("c = Constant <value = bool {0}> ()", ["Exp", "Tanh", "Sigmoid", "Constant"]),
    # a batch size compared with one, folded, then cast: Silero VAD's decoder
    ("i = Constant <value = int64 {0}> ()  c = Cast <to = 9> (i)",
     ["Exp", "Tanh", "Sigmoid", "Constant"]),
])
def test_an_if_on_a_constant_is_the_branch_it_takes(condition, taken, ort_run):
    model = parse(IF_CONSTANT % condition)
    result = run(model, ort_run, SIZES)
    kinds = [k for k in ops(result.model) if k not in ("Cast",)]
    assert "If" not in kinds and [k for k in kinds if k != "Constant"] == [
        k for k in taken if k != "Constant"]
    assert result.stats["ifs_inlined"] == 1
    # the branch's outputs are written under the If's names; its own names are fresh
    written = {o for n in result.model.graph.node for o in n.output}
    assert {"y", "z", "w"} <= written and len(written) == len(
        [o for n in result.model.graph.node for o in n.output])


def test_an_if_on_a_constant_in_a_loop_body_is_inlined_there(ort_run):
    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17]>' + """
    g (float[4] x, int64 trips) => (float[4] y) {
        go = Constant <value = bool {1}> ()
        y = Loop (trips, go, x) <body = b (int64 i, bool cond, float[4] h) => (bool c2,
                                                                                float[4] h2) {
            c2 = Identity (cond)
            yes = Constant <value = bool {1}> ()
            h2 = If (yes) <
                then_branch = t () => (float[4] a) { a = Tanh (h) },
                else_branch = e () => (float[4] a) { a = Relu (h) }
            >
        }>
    }""")
    feeds = {"x": np.linspace(-2, 2, 4, dtype=np.float32), "trips": np.array(3, np.int64)}
    expected = ort_run(model, feeds)
    result = FoldShapes()(model)
    onnx.checker.check_model(result.model, full_check=True)
    body = result.model.graph.node[-1].attribute[0].g
    assert "If" not in [n.op_type for n in body.node]
    np.testing.assert_array_equal(ort_run(result.model, feeds)["y"], expected["y"])


def test_an_if_on_a_default_a_caller_may_feed_stays(ort_run):
    # an initializer the graph also lists as an input is a default, not a constant (a hostile
    # round: the If was the branch of the default, and fed False computed the other)
    model = onnx.parser.parse_model('<ir_version: 8, opset_import: ["" : 17]>' + """
    g (float[4] x, bool flag) => (float[4] y) <bool flag = {1}> {
        y = If (flag) <
            then_branch = t () => (float[4] a) { a = Relu (x) },
            else_branch = e () => (float[4] b) { b = Neg (x) }
        >
    }""")
    result = FoldShapes()(model)
    assert "If" in ops(result.model)


def test_a_constant_of_an_empty_shape_folds_to_a_scalar() -> None:
    # torch.zeros((), dtype=torch.long) as the TorchScript exporter writes it: ConstantOfShape
    # of an empty shape is one value of rank 0. Folded as a 1-D tensor of one, the output
    # changed rank (and a scripted while loop's counter broke ONNX Runtime's run).
    from onnx import helper

    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["shape"],
                          value=numpy_helper.from_array(np.zeros((0,), np.int64))),
         helper.make_node("ConstantOfShape", ["shape"], ["zero"],
                          value=numpy_helper.from_array(np.array([0], np.int64))),
         helper.make_node("Add", ["zero", "n"], ["steps"])],
        "g", [helper.make_tensor_value_info("n", onnx.TensorProto.INT64, [])],
        [helper.make_tensor_value_info("steps", onnx.TensorProto.INT64, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result = FoldShapes()(model)
    assert result.modified
    [folded] = [t for t in result.model.graph.initializer]
    assert list(folded.dims) == [] and numpy_helper.to_array(folded) == 0
