"""Rule 8 and subgraphs: a Transpose on a scan output of a Loop or Scan body moves out of the loop
(:mod:`graphfix.passes.eliminate_transposes.loops`); If/Loop bodies are optimized as graphs of
their own and never rewire a value of an enclosing scope. A row is ``pytest.param(onnx_text,
expected, id)`` (:mod:`tests.passes.transposes_support`)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from graphfix.passes.eliminate_transposes import EliminateTransposes
from tests.passes.transposes_support import all_ops, check_row, copy, expect, ops, parse

N = {"n": np.array(3, np.int64)}  # the trip count of every Loop row

LOOP = """
g (int64 n, float[2,3] x) => (float[N,2,3] y) {{
    c = Constant <value = bool {{1}}> ()
    s = Loop (n, c) <
        body = b (int64 i, bool ci) => (bool co, float[3,2] out) {{
            co = Identity (ci)
{body}
        }}
    >
    y = Transpose <perm = [0, 2, 1]> (s)
}}"""


def loop(row_id: str, body: str, expected, **how):
    text = LOOP.format(body="\n".join(f"            {line}" for line in body.split("\n")))
    return pytest.param(text, expect(expected, pinned=N, **how), id=row_id)


def _body_ops(expected: list[str]):
    def check(result) -> None:
        (node,) = [n for n in result.model.graph.node if n.op_type in ("Loop", "Scan")]
        body = next(a.g for a in node.attribute if a.name == "body")
        assert ops(body) == expected
    return check


LOOP_RANK3 = """
g (int64 n, float[2,3,4] x) => (float[N,2,3,4] y) {
    c = Constant <value = bool {1}> ()
    s = Loop (n, c) <
        body = b (int64 i, bool ci) => (bool co, float[3,4,2] out) {
            co = Identity (ci)
            r = Relu (x)
            out = Transpose <perm = [1, 2, 0]> (r)
        }
    >
    y = Transpose <perm = [0, 3, 1, 2]> (s)
}"""

# No Transpose outside to meet: it moves out all the same (once instead of once per iteration).
LOOP_NO_OUTER = """
g (int64 n, float[2,3] x) => (float[N,3,2] y) {
    c = Constant <value = bool {1}> ()
    y = Loop (n, c) <
        body = b (int64 i, bool ci) => (bool co, float[3,2] out) {
            co = Identity (ci)
            r = Relu (x)
            out = Transpose <perm = [1, 0]> (r)
        }
    >
}"""

# The Transpose's output is also read inside the body (by the carried value's update).
LOOP_READ_IN_BODY = """
g (int64 n, float[2,3] x) => (float[N,2,3] y, float[3,2] last) {
    c = Constant <value = bool {1}> ()
    z = Transpose <perm = [1, 0]> (x)
    last, s = Loop (n, c, z) <
        body = b (int64 i, bool ci, float[3,2] acc) => (bool co, float[3,2] acc2, float[3,2] out) {
            co = Identity (ci)
            r = Relu (x)
            out = Transpose <perm = [1, 0]> (r)
            acc2 = Add (acc, out)
        }
    >
    y = Transpose <perm = [0, 2, 1]> (s)
}"""

# The Transpose reads a body input (the carried value).
LOOP_BODY_INPUT = """
g (int64 n, float[2,3] x) => (float[N,2,3] y, float[2,3] last) {
    c = Constant <value = bool {1}> ()
    last, s = Loop (n, c, x) <
        body = b (int64 i, bool ci, float[2,3] acc) => (bool co, float[2,3] acc2, float[3,2] out) {
            co = Identity (ci)
            acc2 = Relu (acc)
            out = Transpose <perm = [1, 0]> (acc)
        }
    >
    y = Transpose <perm = [0, 2, 1]> (s)
}"""

LOOP_CARRIED_AND_TWO_SCAN_OUTPUTS = """
g (int64 n, float[2,3] x) => (float[2,3] last, float[N,2,3] z, float[N,2,3] y) {
    c = Constant <value = bool {1}> ()
    last, z, s = Loop (n, c, x) <
        body = b (int64 i, bool ci, float[2,3] acc) => (bool co, float[2,3] acc2, float[2,3] o1,
                                                        float[3,2] out) {
            co = Identity (ci)
            acc2 = Add (acc, x)
            o1 = Neg (acc2)
            r = Relu (acc2)
            out = Transpose <perm = [1, 0]> (r)
        }
    >
    y = Transpose <perm = [0, 2, 1]> (s)
}"""

# The inner loop's Transpose moves out into the outer body, then out of the outer loop.
NESTED_LOOPS = """
g (int64 n, float[2,3] x) => (float[N,M,2,3] y) {
    c = Constant <value = bool {1}> ()
    s = Loop (n, c) <
        body = b (int64 i, bool ci) => (bool co, float[M,3,2] out) {
            co = Identity (ci)
            out = Loop (n, ci) <
                body = b2 (int64 j, bool cj) => (bool co2, float[3,2] out2) {
                    co2 = Identity (cj)
                    r = Relu (x)
                    out2 = Transpose <perm = [1, 0]> (r)
                }
            >
        }
    >
    y = Transpose <perm = [0, 1, 3, 2]> (s)
}"""

# Scan before opset 9 has an optional sequence_lens input first and stacks its scan outputs
# along axis 1 (the batch is axis 0).
SCAN8 = """
<ir_version: 3, opset_import: ["" : 8]>
g (float[1,2,3] init, float[1,4,2,3] xs) => (float[1,2,3] last, float[1,4,2,3] z,
                                           float[1,4,3,2] y) {
    last, z, y = Scan (, init, xs) <num_scan_inputs = 1,
        body = b (float[2,3] st, float[2,3] xi) => (float[2,3] st2, float[2,3] o1, float[3,2] out) {
            st2 = Add (st, xi)
            o1 = Neg (st2)
            r = Relu (st2)
            out = Transpose <perm = [1, 0]> (r)
        }
    >
}"""

# The same, transposed back outside: the lifted T(0, 1, 3, 2) cancels it.
SCAN8_OUTER = """
<ir_version: 3, opset_import: ["" : 8]>
g (float[1,2,3] init, float[1,4,2,3] xs) => (float[1,2,3] last, float[1,4,2,3] y) {
    last, s = Scan (, init, xs) <num_scan_inputs = 1,
        body = b (float[2,3] st, float[2,3] xi) => (float[2,3] st2, float[3,2] out) {
            st2 = Add (st, xi)
            r = Relu (st2)
            out = Transpose <perm = [1, 0]> (r)
        }
    >
    y = Transpose <perm = [0, 1, 3, 2]> (s)
}"""

SCAN = """
g (float[2,3] init, float[4,2,3] xs) => (float[2,3] last, float[4,2,3] y) {{
    last, s = Scan (init, xs) <num_scan_inputs = 1{axes},
        body = b (float[2,3] st, float[2,3] xi) => (float[2,3] st2, float[3,2] out) {{
            st2 = Add (st, xi)
            {scanned}
            out = Transpose <perm = [1, 0]> ({transposed})
        }}
    >
    y = Transpose <perm = {outer}> (s)
}}"""


def scan(row_id: str, expected, *, axes: str = "", outer=(0, 2, 1), transposed: str = "r",
         scanned: str = "r = Relu (st2)", **how):
    text = SCAN.format(axes=axes, outer=list(outer), transposed=transposed, scanned=scanned)
    return pytest.param(text, expect(expected, opset=how.pop("opset", 17), **how), id=row_id)


RULE_8 = [
    loop("8-loop-scan-output-transpose-cancels-outside",
         "r = Relu (x)\nout = Transpose <perm = [1, 0]> (r)", ["Constant", "Loop"],
         stats={"lifted_out_of_loops": 1, "transposes_after": 0},
         check=_body_ops(["Identity", "Relu"])),
    # Pushed inside the body up to the scan output (counted as gone), then lifted out.
    loop("8-loop-pushed-to-the-scan-output-then-lifted",
         "t = Transpose <perm = [1, 0]> (x)\nr = Relu (t)\nout = Sigmoid (r)",
         ["Constant", "Loop"], stats={"lifted_out_of_loops": 1, "transposes_after": 0},
         check=_body_ops(["Identity", "Relu", "Sigmoid"])),
    pytest.param(LOOP_RANK3, expect(["Constant", "Loop"], pinned=N,
                                    stats={"lifted_out_of_loops": 1, "transposes_after": 0}),
                 id="8-loop-rank3-composes-with-the-outer-transpose"),
    pytest.param(LOOP_NO_OUTER, expect(["Constant", "Loop", "Transpose"], pinned=N, stats={
        "lifted_out_of_loops": 1, "transposes_after": 1}, check=_body_ops(["Identity", "Relu"])),
                 id="8-loop-lifted-without-an-outer-transpose"),
    scan("8-scan-scan-output-transpose-cancels-outside", ["Scan"], opset=11,
         stats={"lifted_out_of_loops": 1, "transposes_after": 0},
         check=_body_ops(["Add", "Relu"])),
    scan("8-scan-explicit-axis-0", ["Scan"], axes=", scan_output_axes = [0]",
         stats={"lifted_out_of_loops": 1}),
    pytest.param(LOOP_CARRIED_AND_TWO_SCAN_OUTPUTS, expect(["Constant", "Loop"], pinned=N, stats={
        "lifted_out_of_loops": 1, "transposes_after": 0}),
                 id="8-loop-carried-value-and-two-scan-outputs"),
    pytest.param(NESTED_LOOPS, expect(["Constant", "Loop"], pinned=N, stats={
        "lifted_out_of_loops": 2, "transposes_after": 0}), id="8-nested-loops-lift-twice"),
    pytest.param(SCAN8, expect({"Transpose": (0, 1)}), id="8-scan-opset8-batch-first"),
    pytest.param(SCAN8_OUTER, expect(["Scan"], stats={"lifted_out_of_loops": 1,
                                                      "transposes_after": 0},
                                      check=_body_ops(["Add", "Relu"])),
                 id="8-scan-opset8-cancels-outside"),
    # Named negatives: nothing moves out of the loop.
    pytest.param(LOOP_READ_IN_BODY, expect(
        {"Transpose": 2}, pinned=N, modified=False), id="8-negative-output-also-read-in-the-body"),
    pytest.param(LOOP_BODY_INPUT, expect({"Transpose": 1}, pinned=N, modified=False),
                 id="8-negative-input-is-a-body-input"),
    loop("8-negative-input-from-the-outer-scope", "out = Transpose <perm = [1, 0]> (x)",
         ["Constant", "Loop", "Transpose"], modified=False),
    scan("8-negative-scan-output-axes-1", ["Scan", "Transpose"], axes=", scan_output_axes = [1]",
         outer=(1, 2, 0), modified=False),
    scan("8-negative-input-is-another-body-output", ["Scan", "Transpose"], transposed="st2",
         scanned="", modified=False),
]


@pytest.mark.parametrize("text, expected", RULE_8)
def test_rule8_loops(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


@pytest.mark.parametrize("trips", [0, 1, 5])
def test_rule8_lifted_scan_output_keeps_its_shape_for_any_trip_count(trips, ort_run):
    model = parse(LOOP_NO_OUTER)
    optimized = copy(model)
    EliminateTransposes()(optimized)
    assert all_ops(optimized) == ["Constant", "Loop", "Transpose", "Identity", "Relu"]
    feeds = {"n": np.array(trips, np.int64), "x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    expected, actual = ort_run(model, feeds)["y"], ort_run(optimized, feeds)["y"]
    assert actual.shape == expected.shape == (trips, 3, 2)
    np.testing.assert_array_equal(actual, expected)


# ------------------------------------------------------------------ bodies of their own
IF_MODEL = """
g (bool c, float[1,4,4,3] x) => (float[1,4,4,3] y) {
    outer = Transpose <perm = [0, 3, 1, 2]> (x)
    y = If (c) <
        then_branch = t () => (float[1,4,4,3] ty) {
            a = Transpose <perm = [0, 3, 1, 2]> (x)
            r = Relu (a)
            ty = Transpose <perm = [0, 2, 3, 1]> (r)
        },
        else_branch = e () => (float[1,4,4,3] ey) {
            s = Sigmoid (outer)
            ey = Transpose <perm = [0, 2, 3, 1]> (s)
        }
    >
}"""


def test_inside_if_body_and_outer_scope_reference_kept(ort_run, rng):
    model = parse(IF_MODEL)
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = EliminateTransposes()(model)
    onnx.checker.check_model(model, full_check=True)
    assert ops(model) == ["Transpose", "If"]
    then_branch = model.graph.node[1].attribute[0].g
    assert [n.op_type for n in then_branch.node] == ["Relu"]
    x = rng.standard_normal((1, 4, 4, 3)).astype(np.float32)
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": x}
        np.testing.assert_array_equal(ort_run(model, feeds)["y"], ort_run(original, feeds)["y"])
    assert result.stats["transposes_before"] == 4
    assert result.stats["transposes_after"] == 2


def test_loop_body_optimized_and_outer_transpose_kept(ort_run, rng):
    model = parse("""
    g (int64 n, bool c, float[2,3] x) => (float[3,2] y) {
        t = Transpose <perm = [1, 0]> (x)
        y = Loop (n, c, t) <
            body = b (int64 i, bool ci, float[3,2] acc) => (bool co, float[3,2] out) {
                co = Identity (ci)
                u = Transpose <perm = [1, 0]> (acc)
                r = Relu (u)
                v = Transpose <perm = [1, 0]> (r)
                out = Add (v, t)
            }
        >
    }""")
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = EliminateTransposes()(model)
    onnx.checker.check_model(model, full_check=True)
    assert ops(model) == ["Transpose", "Loop"]
    body = model.graph.node[1].attribute[0].g
    assert [n.op_type for n in body.node] == ["Identity", "Relu", "Add"]
    feeds = {"n": np.array(3, np.int64), "c": np.array(True), "x": rng.standard_normal((2, 3))
             .astype(np.float32)}
    np.testing.assert_array_equal(ort_run(model, feeds)["y"], ort_run(original, feeds)["y"])
    assert result.stats["transposes_after"] == 1
