"""``x + 0.0`` is no no-op when ``x`` is -0.0, yet the two results are equal as numbers: the
passes that hand a model to onnxsim or ONNX Runtime let them drop such an Add only where the
sign of a zero cannot decide a value further on (a divisor, a Pow's base, what graphfix cannot
see into). Each case runs with ``x`` = 0, so that ``Neg(x)`` is -0.0 and a wrongly dropped Add
shows as an infinity of the other sign."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnxruntime as ort
import pytest

from graphfix.passes._zeros import inexact_zero_nops
from graphfix.passes.ort_offline import ort_offline
from graphfix.passes.simplify import simplify

_HEAD = '<ir_version: 8, opset_import: ["" : 17]>\n'


def _model(body: str, constants: str = "") -> onnx.ModelProto:
    return onnx.parser.parse_model(_HEAD + f"""
    g (float[4] x) => (float[4] y) <float zero = {{0.0}}, float one = {{1.0}},
                                     float eps = {{0.001}}, float two = {{2.0}}{constants}> {{
        n = Neg (x)
        s = Add (n, zero)
        {body}
    }}""")


# The sign of s's zeros decides y: the Add stays.
DECIDED = {
    "divisor": "y = Div (one, s)",
    "reciprocal": "y = Reciprocal (s)",
    "through-relu-into-a-divisor": "r = Relu (s)\n y = Div (one, r)",
    "through-a-cast": "c = Cast <to = 11> (s)\n d = Reciprocal (c)\n y = Cast <to = 1> (d)",
    "pow-base-negative-exponent": "y = Pow (s, m)",
    "pow-base-computed-exponent": "e = Add (x, two)\n y = Pow (s, e)",
    "into-an-if": """c = ReduceSum <keepdims = 0> (x)
        k = Greater (c, one)
        y = If (k) <then_branch = t () => (float[4] a) { a = Div (one, s) },
                    else_branch = f () => (float[4] b) { b = Reciprocal (s) }>""",
}

# The sign of s's zeros decides nothing: the Add may go.
UNDECIDED = {
    "relu": "y = Relu (s)",
    "dividend": "y = Div (s, two)",
    "eps-then-divisor": "t = Add (s, eps)\n y = Div (one, t)",
    "exp-then-divisor": "t = Exp (s)\n y = Div (one, t)",
    "square-then-pow-base": "t = Pow (s, two)\n u = Add (t, eps)\n y = Div (one, u)",
    "comparison": "c = Less (s, one)\n y = Where (c, one, two)",
}


def _run(model: onnx.ModelProto) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": np.zeros(4, np.float32)})[0]


def _adds(model: onnx.ModelProto) -> int:
    return sum(1 for g in [model.graph] for n in g.node if n.op_type == "Add"
               and n.input[1] == "zero")


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


PASSES = {"simplify": simplify, "ort-offline": ort_offline}


@pytest.mark.parametrize("pass_name", PASSES)
@pytest.mark.parametrize("case", DECIDED)
def test_an_add_of_zero_whose_sign_decides_a_value_stays(case, pass_name) -> None:
    model = _model(DECIDED[case], ", float m = {-1.0}")
    expected = _run(model)
    result = PASSES[pass_name](_copy(model))
    got = _run(result)
    assert np.array_equal(np.signbit(got), np.signbit(expected)), (got, expected)
    np.testing.assert_array_equal(got, expected)
    assert _adds(result) == 1


@pytest.mark.parametrize("pass_name", PASSES)
@pytest.mark.parametrize("case", UNDECIDED)
def test_an_add_of_zero_whose_sign_decides_nothing_is_dropped(case, pass_name) -> None:
    model = _model(UNDECIDED[case])
    expected = _run(model)
    result = PASSES[pass_name](_copy(model))
    np.testing.assert_array_equal(_run(result), expected)  # equal as numbers
    assert _adds(result) == 0


def _branch_model(then_body: str, after: str = "y = Identity (r)") -> onnx.ModelProto:
    """The Add of zero inside an If's then-branch (taken: x is all zeros), its zero a Constant
    of the branch, reading the outer graph's Neg(x); the else-branch gives twos."""
    return onnx.parser.parse_model(_HEAD + f"""
    g (float[4] x) => (float[4] y) <float one = {{1.0}}, float two = {{2.0}},
                                     int64[1] four = {{4}}> {{
        n = Neg (x)
        c = ReduceSum <keepdims = 0> (x)
        k = LessOrEqual (c, one)
        r = If (k) <then_branch = t () => (float[4] a) {{
                        z = Constant <value = float {{0.0}}> ()
                        s = Add (n, z)
                        {then_body} }},
                    else_branch = f () => (float[4] b) {{ b = Expand (two, four) }}>
        {after}
    }}""")


# In a subgraph: decided inside the body, or leaving it (its readers outside are not followed).
DECIDED_IN_A_BRANCH = {
    "divisor-in-the-body": ("a = Div (one, s)", "y = Identity (r)"),
    "leaves-the-body-into-a-divisor": ("a = Identity (s)", "y = Div (one, r)"),
}


@pytest.mark.parametrize("pass_name", PASSES)
@pytest.mark.parametrize("case", DECIDED_IN_A_BRANCH)
def test_in_a_subgraph_an_add_of_zero_whose_sign_decides_a_value_stays(case, pass_name) -> None:
    model = _branch_model(*DECIDED_IN_A_BRANCH[case])
    expected = _run(model)
    assert np.isinf(expected).all()
    got = _run(PASSES[pass_name](_copy(model)))
    assert np.array_equal(np.signbit(got), np.signbit(expected)), (got, expected)
    np.testing.assert_array_equal(got, expected)


def test_in_a_subgraph_an_add_of_zero_whose_sign_decides_nothing_is_not_protected() -> None:
    decided = _branch_model("a = Div (one, s)")
    undecided = _branch_model("e = Exp (s)\n a = Div (one, e)")
    assert inexact_zero_nops(decided) and not inexact_zero_nops(undecided)
    for run in PASSES.values():
        np.testing.assert_array_equal(_run(run(_copy(undecided))), _run(undecided))


def _loop_model(body: str, after: str) -> onnx.ModelProto:
    """Two iterations of a Loop carrying v (from Neg(x), -0.0 for x = 0) through an Add of a
    zero constant of the body; ``after`` reads the final v (and the scan output d, when the
    body makes one)."""
    scan = ", float[4] d" if "d = " in body else ""
    return onnx.parser.parse_model(_HEAD + f"""
    g (float[4] x) => (float[4] y) <float one = {{1.0}}, int64 two = {{2}}, bool yes = {{1}}> {{
        n = Neg (x)
        {"v, ds" if scan else "v"} = Loop (two, yes, n) <body = b (int64 i, bool c, float[4] w)
                                 => (bool co, float[4] wo{scan}) {{
            z = Constant <value = float {{0.0}}> ()
            co = Identity (c)
            {body}
        }}>
        {after}
    }}""")


LOOPS = {
    # decided past the loop: its final value is a divisor
    "carried-into-a-divisor": ("wo = Add (w, z)", "y = Div (one, v)", True),
    # decided in the next iteration: the carried sum is a divisor there
    "divisor-next-iteration": ("wo = Add (w, z)\n d = Div (one, w)",
                               "t = Gather <axis = 0> (ds, one_index)\n y = Identity (t)", True),
    # not decided: what leaves the loop goes through Exp
    "carried-into-exp": ("wo = Add (w, z)", "e = Exp (v)\n y = Div (one, e)", False),
}


@pytest.mark.parametrize("case", LOOPS)
def test_a_loop_is_followed_into_its_next_iteration_and_past_it(case) -> None:
    body, after, decided = LOOPS[case]
    model = _loop_model(body, after)
    if "one_index" in after:
        model.graph.initializer.append(onnx.helper.make_tensor(
            "one_index", onnx.TensorProto.INT64, [], [1]))
    onnx.checker.check_model(model, full_check=True)
    assert inexact_zero_nops(model) is decided
    expected = _run(model)
    for run in PASSES.values():
        got = _run(run(_copy(model)))
        assert np.array_equal(np.signbit(got), np.signbit(expected)), (case, got, expected)
        np.testing.assert_array_equal(got, expected)
