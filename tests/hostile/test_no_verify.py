"""What the passes write without parity (``--no-verify``) is right too: checked here the way
parity would check it (both models on ONNX Runtime with its optimizations off, seeded inputs).

Cases: constants equal as numbers but not in bytes (0.0 and -0.0) as Constant nodes, as
initializers, as value_float attributes, inside vectors, in float16 and float64, mixed
Constant and initializer, reached through Mul, Where and an Add of 0.0 (which is no no-op for
-0.0), inside an If branch; shapes a model only declares and declares wrongly (value_info) read
by Shape, Size, a Reshape target, an Expand, a ConstantOfShape, one dimension gathered into a
Reshape target, a declared rank, inside an If branch; each
through the default pipeline, simplify alone and ort-offline alone.
"""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

_HEAD = '<ir_version: 8, opset_import: ["" : 17]>'

SIGNED_ZEROS = {
    "constant-nodes": """
    g (float[4] x) => (float[4] y) {
        z = Constant <value = float {0.0}> ()
        nz = Constant <value = float {-0.0}> ()
        a = Div (x, z)
        b = Div (x, nz)
        y = Sub (a, b)
    }""",
    "initializers": """
    g (float[4] x) => (float[4] y) <float z = {0.0}, float nz = {-0.0}> {
        a = Div (x, z)
        b = Div (x, nz)
        y = Sub (a, b)
    }""",
    "value-float": """
    g (float[4] x) => (float[4] y) {
        z = Constant <value_float = 0.0> ()
        nz = Constant <value_float = -0.0> ()
        a = Div (x, z)
        b = Div (x, nz)
        y = Add (a, b)
    }""",
    "vectors": """
    g (float[3] x) => (float[3] y) <float[3] z = {0.0, -0.0, 1.0}, float[3] nz = {-0.0, 0.0, 1.0}> {
        a = Div (x, z)
        b = Div (x, nz)
        y = Sub (a, b)
    }""",
    "float64": """
    g (double[4] x) => (double[4] y) <double z = {0.0}, double nz = {-0.0}> {
        a = Div (x, z)
        b = Div (x, nz)
        y = Sub (a, b)
    }""",
    "mixed": """
    g (float[4] x) => (float[4] y) <float nz = {-0.0}> {
        z = Constant <value = float {0.0}> ()
        a = Div (x, z)
        b = Div (x, nz)
        y = Sub (a, b)
    }""",
    "through-mul": """
    g (float[4] x) => (float[4] y) <float z = {0.0}, float nz = {-0.0}, float one = {1.0}> {
        p = Mul (x, z)
        q = Mul (x, nz)
        a = Div (one, p)
        b = Div (one, q)
        y = Sub (a, b)
    }""",
    "through-add": """
    g (float[4] x) => (float[4] y) <float z = {0.0}, float nz = {-0.0}, float one = {1.0}> {
        p = Mul (x, z)
        s = Add (p, nz)
        t = Add (p, z)
        a = Div (one, s)
        b = Div (one, t)
        y = Sub (a, b)
    }""",
    "through-where": """
    g (float[4] x) => (float[4] y) <float z = {0.0}, float nz = {-0.0}, float one = {1.0}> {
        zero = Constant <value = float {0.0}> ()
        c = Greater (x, zero)
        w = Where (c, z, nz)
        v = Where (c, nz, z)
        a = Div (one, w)
        b = Div (one, v)
        y = Sub (a, b)
    }""",
}


def _if_signed_zeros() -> onnx.ModelProto:
    def branch(name: str, sign: float) -> onnx.GraphProto:
        return helper.make_graph(
            [helper.make_node("Constant", [], ["z"], value_float=0.0),
             helper.make_node("Constant", [], ["nz"], value_float=sign * 0.0),
             helper.make_node("Div", ["x", "z"], ["a"]),
             helper.make_node("Div", ["x", "nz"], [f"{name}_out_pre"]),
             helper.make_node("Sub", ["a", f"{name}_out_pre"], [f"{name}_out"])], name, [],
            [helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, [4])])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Constant", [], ["zero"], value_float=0.0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=branch("then", -1.0),
                          else_branch=branch("else", -1.0))], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _float16_zeros() -> onnx.ModelProto:
    import numpy as np
    from onnx import numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Div", ["x", "z"], ["a"]), helper.make_node("Div", ["x", "nz"], ["b"]),
         helper.make_node("Sub", ["a", "b"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4])],
        [numpy_helper.from_array(np.array(0.0, np.float16), "z"),
         numpy_helper.from_array(np.array(-0.0, np.float16), "nz")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _stale(text: str, declared: dict[str, tuple[int, list]]) -> onnx.ModelProto:
    model = onnx.parser.parse_model(f"{_HEAD}\n{text}")
    for name, (elem_type, dims) in declared.items():
        model.graph.value_info.append(helper.make_tensor_value_info(name, elem_type, dims))
    return model


STALE = {
    "shape": lambda: _stale("""
    g (float[N,4] x) => (int64[2] y) {
        r = Relu (x)
        y = Shape (r)
    }""", {"r": (TensorProto.FLOAT, [7, 4])}),
    "size": lambda: _stale("""
    g (float[N,4] x) => (int64 y) {
        r = Relu (x)
        y = Size (r)
    }""", {"r": (TensorProto.FLOAT, [7, 4])}),
    "rank": lambda: _stale("""
    g (float[N,4] x) => (int64[M] y) {
        r = Relu (x)
        y = Shape (r)
    }""", {"r": (TensorProto.FLOAT, [7, 4, 1])}),
    "reshape-target": lambda: _stale("""
    g (float[N,4] x) => (float[A,B] y) {
        r = Relu (x)
        s = Shape (r)
        y = Reshape (x, s)
    }""", {"r": (TensorProto.FLOAT, [2, 4])}),
    "expand": lambda: _stale("""
    g (float[N,4] x) => (float[A,B] y) {
        r = Relu (x)
        s = Shape (r)
        one = Constant <value = float {1.0}> ()
        y = Expand (one, s)
    }""", {"r": (TensorProto.FLOAT, [5, 4])}),
    "constant-of-shape": lambda: _stale("""
    g (float[N,4] x) => (float[A,B] y) {
        r = Relu (x)
        s = Shape (r)
        y = ConstantOfShape <value = float[1] {2.0}> (s)
    }""", {"r": (TensorProto.FLOAT, [6, 4])}),
    "gathered-dim": lambda: _stale("""
    g (float[N,4] x) => (float[A,B] y) {
        r = Relu (x)
        s = Shape (r)
        i = Constant <value = int64[1] {0}> ()
        n = Gather <axis = 0> (s, i)
        four = Constant <value = int64[1] {4}> ()
        t = Concat <axis = 0> (n, four)
        y = Reshape (x, t)
    }""", {"r": (TensorProto.FLOAT, [7, 4])}),
}


def _if_stale() -> onnx.ModelProto:
    then_branch = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["r"], ["t"])],
        "then", [], [helper.make_tensor_value_info("t", TensorProto.INT64, [2])],
        value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT, [9, 4])])
    else_branch = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.INT64, [2])])
    graph = helper.make_graph(
        [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
         helper.make_node("Constant", [], ["zero"], value_float=0.0),
         helper.make_node("Greater", ["s", "zero"], ["c"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_branch,
                          else_branch=else_branch)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


MODELS = {**{f"signed-zero-{k}": (lambda t=t: onnx.parser.parse_model(f"{_HEAD}\n{t}"))
             for k, t in SIGNED_ZEROS.items()},
          "signed-zero-if-branch": _if_signed_zeros,
          "signed-zero-float16": _float16_zeros,
          **{f"stale-{k}": v for k, v in STALE.items()},
          "stale-if-branch": _if_stale}
PIPELINES = {"default": [], "simplify": ["--passes", "simplify"],
             "ort-offline": ["--passes", "ort-offline"]}


@pytest.mark.parametrize("model", list(MODELS))
@pytest.mark.parametrize("pipeline", list(PIPELINES))
def test_no_verify_output_computes_what_the_input_computes(gf, model, pipeline):
    src = gf.model(MODELS[model]())
    outcome = gf.invoke("optimize", "m.onnx", "out.onnx", "--no-verify", *PIPELINES[pipeline])
    text = outcome.describe()
    gf._common(outcome)
    assert outcome.code == 0 and outcome.error_lines == [], text
    assert outcome.added == [str(gf.folder / "out.onnx")], text
    gf.assert_same_function(src, gf.folder / "out.onnx", seeds=(0, 1, 2), sizes=(3, 5),
                            full_check=None)


# IEEE identities a rewrite must not assume: fed infinities, NaN and zeros of both signs.
SPECIAL = {
    "mul-zero": "p = Mul (x, z)\n a = Div (one, p)\n y = Identity (a)",
    "sub-self": "p = Sub (x, x)\n y = Identity (p)",
    "div-self": "p = Div (x, x)\n y = Identity (p)",
    "double-negation": "p = Mul (x, mone)\n q = Mul (p, mone)\n y = Div (one, q)",
    "sub-zero": "p = Mul (x, z)\n q = Sub (p, z)\n y = Div (one, q)",
    "sub-negative-zero": "p = Mul (x, z)\n q = Sub (p, nz)\n y = Div (one, q)",
    "add-negative-zero": "p = Mul (x, z)\n q = Add (p, nz)\n y = Div (one, q)",
    "add-zero-first": "p = Mul (x, z)\n q = Add (z, p)\n y = Div (one, q)",
    "max-zero": "p = Mul (x, z)\n q = Max (p, z)\n y = Div (one, q)",
    "relu-of-negative-zero": "p = Mul (x, z)\n q = Relu (p)\n y = Div (one, q)",
}


@pytest.mark.parametrize("case", list(SPECIAL))
def test_no_verify_keeps_ieee_special_values(gf, case):
    import numpy as np

    src = gf.model(onnx.parser.parse_model(f"""{_HEAD}
    g (float[7] x) => (float[7] y)
        <float z = {{0.0}}, float nz = {{-0.0}}, float one = {{1.0}}, float mone = {{-1.0}}> {{
        {SPECIAL[case]}
    }}"""))
    gf.optimized("m.onnx", "out.onnx", "--no-verify")
    x = np.array([1, -1, np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    want = gf.ort_outputs(src, {"x": x})["y"]
    got = gf.ort_outputs(gf.folder / "out.onnx", {"x": x})["y"]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


# Random ops (found by a hostile round): two draws with the same inputs are two values. A
# Dropout in training mode draws a mask; x - x with two masks is not 0.
RANDOM = {
    "dropout-training": """
    g (float[64] x) => (float[64] y) <float r = {0.5}, bool t = {1}> {
        a = Dropout (x, r, t)
        b = Dropout (x, r, t)
        y = Sub (a, b)
    }""",
    "random-normal-like": """
    g (float[64] x) => (float[64] y) {
        a = RandomNormalLike (x)
        b = RandomNormalLike (x)
        y = Sub (a, b)
    }""",
}


@pytest.mark.parametrize("pipeline", list(PIPELINES))
@pytest.mark.parametrize("case", list(RANDOM))
def test_no_verify_keeps_every_random_draw(gf, case, pipeline):
    import numpy as np

    gf.model(onnx.parser.parse_model(f"{_HEAD}\n{RANDOM[case]}"))
    outcome = gf.invoke("optimize", "m.onnx", "out.onnx", "--no-verify", *PIPELINES[pipeline])
    gf._common(outcome)
    assert outcome.code == 0, outcome.describe()
    written = onnx.load(gf.folder / "out.onnx")
    draws = [n for n in written.graph.node if n.op_type in ("Dropout", "RandomNormalLike")]
    assert len(draws) == 2, outcome.describe()
    y = gf.ort_outputs(gf.folder / "out.onnx", {"x": np.ones(64, np.float32)})["y"]
    assert np.any(y != 0)


def test_parity_refuses_a_model_that_does_not_repeat_itself(gf):
    # a Dropout's draw is computed from its input's values: its output cannot be fed to both
    gf.model(onnx.parser.parse_model(f"{_HEAD}\n{RANDOM['dropout-training']}"))
    gf.refused("optimize", "m.onnx", "out.onnx", match="change from run to run")


def test_parity_gives_both_models_the_same_draws(gf):
    # a draw that depends only on a shape (a VITS voice's RandomNormalLike) is fed to both
    # models: the model is written, and two draws stay two (merged, y would be 0)
    import numpy as np

    gf.model(onnx.parser.parse_model(f"{_HEAD}\n{RANDOM['random-normal-like']}"))
    outcome = gf.invoke("optimize", "m.onnx", "out.onnx")
    gf._common(outcome)
    assert outcome.code == 0, outcome.describe()
    assert "both models were given its draws" in outcome.stdout + outcome.stderr
    written = onnx.load(gf.folder / "out.onnx")
    assert [n.op_type for n in written.graph.node].count("RandomNormalLike") == 2
    y = gf.ort_outputs(gf.folder / "out.onnx", {"x": np.ones(64, np.float32)})["y"]
    assert np.any(y != 0)
