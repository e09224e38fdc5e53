"""Rules 1-3, 5 and 6: identity, compose, fold, size-1 moves as Reshapes, Transposes absorbed by
Unsqueezes. One table per rule; a row is ``pytest.param(onnx_text, expected, id)``
(:mod:`tests.passes.transposes_support`)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from graphfix.passes.eliminate_transposes import EliminateTransposes
from tests.passes.transposes_support import (
    check_row,
    expect,
    initializers,
    ops,
    optimize,
    parse,
    with_dims,
)

def _output_written_by(op_type: str):
    def check(result) -> None:
        (node,) = [n for n in result.model.graph.node if n.output[0] == "y"]
        assert node.op_type == op_type
    return check


# ------------------------------------------------------------------ rule 1: identity
IDENTITY_INPUT_TO_OUTPUT = """
g (float[2,3] x) => (float[2,3] y) { y = Transpose <perm = [0, 1]> (x) }"""

IDENTITY_AT_OUTPUT = """
g (float[2,3] x) => (float[2,3] y) {
    r = Relu (x)
    y = Transpose <perm = [0, 1]> (r)
}"""

SIZE_ONE_IN_PLACE = """
g (float[{shape}] x) => (float[{shape}] y) {{
    t = Transpose <perm = {perm}> (x)
    y = Relu (t)
}}"""

SIZE_ONE_IN_PLACE_AT_OUTPUT = """
g (float[1,1,4,1] x) => (float[1,1,4,1] y) {
    y = Transpose <perm = [3, 1, 2, 0]> (x)
}"""

UNREAD = """
g (float[2,3] x) => (float[2,3] y) {
    t = Transpose <perm = [1, 0]> (x)
    y = Relu (x)
}"""

RULE_1 = [
    pytest.param(IDENTITY_INPUT_TO_OUTPUT, expect(["Identity"], stats={"transposes_after": 0}),
                 id="1-identity-from-graph-input-to-output-becomes-identity"),
    pytest.param(IDENTITY_AT_OUTPUT, expect(["Relu"], check=_output_written_by("Relu")),
                 id="1-identity-at-output-renames-the-producer"),
    pytest.param(UNREAD, expect(["Relu"], stats={"transposes_removed": 1}),
                 id="1-unread-transpose-dropped"),
    # A Transpose that moves only size-1 axes and leaves the shape as it is: the identity.
    pytest.param(SIZE_ONE_IN_PLACE.format(shape="1,1,1,1", perm=[0, 2, 3, 1]),
                 expect(["Relu"], stats={"identity_dropped": 1, "converted_to_reshape": 0}),
                 id="1-size-one-axes-in-place-all-ones"),
    pytest.param(SIZE_ONE_IN_PLACE.format(shape="1,4,1,1", perm=[0, 1, 3, 2]),
                 expect(["Relu"], stats={"identity_dropped": 1}),
                 id="1-size-one-axes-in-place"),
    pytest.param(SIZE_ONE_IN_PLACE_AT_OUTPUT, expect(["Identity"], stats={"identity_dropped": 1}),
                 id="1-size-one-axes-in-place-input-to-output"),
    # Named negatives: the shape changes (rule 5 makes it a Reshape); a size unknown.
    pytest.param(SIZE_ONE_IN_PLACE.format(shape="1,4,1,1", perm=[0, 2, 3, 1]).replace(
        "float[1,4,1,1] y", "float[1,1,1,4] y"), expect(["Reshape", "Relu"], stats={
            "identity_dropped": 0, "converted_to_reshape": 1}),
        id="1-negative-size-one-moves-that-change-the-shape"),
    pytest.param(SIZE_ONE_IN_PLACE.format(shape="1,N,1,1", perm=[0, 1, 3, 2]),
                 expect(["Reshape", "Relu"], stats={"identity_dropped": 0}, dims={"N": 1}),
                 id="1-negative-size-unknown-becomes-a-reshape"),
]


@pytest.mark.parametrize("text, expected", RULE_1)
def test_rule1_identity(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


# ------------------------------------------------------------------ rule 2: compose
CHAIN = """
g (float[2,3,4,5] x) => (float[3,2,5,4] y) {
    a = Transpose <perm = [0, 2, 3, 1]> (x)
    b = Transpose <perm = [3, 0, 2, 1]> (a)
    y = Transpose <perm = [0, 1, 2, 3]> (b)
}"""

# Found by the property test: composing into the first consumer gave an identity at a graph
# output, which renamed the shared source; the second consumer then read the old name.
SOURCE_RENAMED_DURING_FAN_OUT = """
g (float[2,3] x) => (float[2,3] y, float[3,2] z) {
    r = Relu (x)
    t = Transpose <perm = [1, 0]> (r)
    y = Transpose <perm = [1, 0]> (t)
    z = Transpose <perm = [0, 1]> (t)
}"""

RULE_2 = [
    pytest.param(CHAIN, expect(["Transpose"], attrs={"Transpose": {"perm": [1, 0, 3, 2]}}),
                 id="2-chain-composes-into-one"),
    pytest.param(SOURCE_RENAMED_DURING_FAN_OUT, expect(["Relu", "Transpose"], opset=11),
                 id="2-regression-source-renamed-during-a-fan-out"),
]


@pytest.mark.parametrize("text, expected", RULE_2)
def test_rule2_compose(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


# ------------------------------------------------------------------ rule 3: fold
FOLD_CONSTANT_NODE = """
g (float[3,2] x) => (float[3,2] y) {
    c = Constant <value = float[2,3] {1,2,3,4,5,6}> ()
    ct = Transpose <perm = [1, 0]> (c)
    y = Add (x, ct)
}"""

FOLD_TWICE_AT_OUTPUT = """
g (float[2,3] x) => (float[2,3] y, float[2,3] z) <float[2,3] w = {1,2,3,4,5,6}> {
    a = Transpose <perm = [1, 0]> (w)
    z = Transpose <perm = [1, 0]> (a)
    y = Add (x, x)
}"""

FOLD_THREE_AT_OUTPUT = """
g (float[2,3] x) => (float[3,2] z) <float[2,3] w = {1,2,3,4,5,6}> {
    a = Transpose <perm = [1, 0]> (w)
    b = Transpose <perm = [1, 0]> (a)
    z = Transpose <perm = [1, 0]> (b)
}"""

FOLD_CONSTANT_NODE_AT_OUTPUT = """
g (float[2,3] x) => (float[3,2] z, float[2,3] y) {
    c = Constant <value = float[2,3] {1,2,3,4,5,6}> ()
    a = Transpose <perm = [1, 0]> (c)
    z = Transpose <perm = [0, 1]> (a)
    y = Relu (x)
}"""


def _output_is_the_folded_constant(values: list[float]):
    def check(result) -> None:
        (node,) = [n for n in result.model.graph.node if "z" in n.output]
        assert node.op_type == "Constant"
        value = numpy_helper.to_array(node.attribute[0].t)
        assert value.reshape(-1).tolist() == values
    return check


# Rule 3b: quantized weights behind a DequantizeLinear (per-axis, per-tensor) are stored
# transposed; a per-axis ``axis`` moves where the permutation puts it.
FOLD_INTO_DEQUANTIZE = """
g (float[1,3,5,5] x) => (float[1,4,5,5] y)
    <int8[3,3,4,3] q = {{{q}}}, float{scale_shape} s = {{{scale}}}, int8{scale_shape} z = {{{zero}}}> {{
    w = DequantizeLinear{axis} (q, s, z)
    wt = Transpose <perm = [2, 3, 0, 1]> (w)
    y = Conv <pads = [1, 1, 1, 1]> (x, wt)
}}"""


def _fold_into_dequantize(per_axis: bool) -> str:
    values = ", ".join(str((7 * i) % 23 - 11) for i in range(108))
    if per_axis:
        return FOLD_INTO_DEQUANTIZE.format(q=values, scale_shape="[4]", scale="0.1, 0.2, 0.3, 0.4",
                                           zero="0, 1, -1, 2", axis=" <axis = 2>")
    return FOLD_INTO_DEQUANTIZE.format(q=values, scale_shape="", scale="0.05", zero="1", axis="")


def _dequantize_axis(axis: int | None):
    def check(result) -> None:
        (dq,) = [n for n in result.model.graph.node if n.op_type == "DequantizeLinear"]
        found = {a.name: a.i for a in dq.attribute}.get("axis")
        assert found == axis, dq
    return check


RULE_3 = [
    pytest.param(FOLD_CONSTANT_NODE, expect(["Add"], stats={"folded_into_constants": 1}),
                 id="3-fold-constant-node"),
    # T(T(constant)) at a graph output: both fold, into a Constant node named as the output.
    pytest.param(FOLD_TWICE_AT_OUTPUT, expect(
        ["Constant", "Add"], stats={"folded_into_constants": 2, "transposes_after": 0},
        check=_output_is_the_folded_constant([1, 2, 3, 4, 5, 6])),
                 id="3-fold-twice-at-a-graph-output"),
    pytest.param(FOLD_THREE_AT_OUTPUT, expect(
        ["Constant"], stats={"transposes_after": 0},
        check=_output_is_the_folded_constant([1, 4, 2, 5, 3, 6])),
                 id="3-fold-three-at-a-graph-output"),
    pytest.param(FOLD_CONSTANT_NODE_AT_OUTPUT, expect({"Transpose": 0}, stats={
        "folded_into_constants": 1}), id="3-fold-constant-node-then-identity-at-output"),
    pytest.param(_fold_into_dequantize(per_axis=True), expect(
        ["DequantizeLinear", "Conv"], opset=13, stats={"folded_into_constants": 1},
        check=_dequantize_axis(0)), id="3b-per-axis-dequantize-axis-remapped"),
    pytest.param(_fold_into_dequantize(per_axis=False), expect(
        ["DequantizeLinear", "Conv"], opset=13, stats={"folded_into_constants": 1},
        check=_dequantize_axis(None)), id="3b-per-tensor-dequantize"),
]


@pytest.mark.parametrize("text, expected", RULE_3)
def test_rule3_fold(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


def test_rule3_fold_shared_initializer_keeps_the_original(ort_run, rng):
    model = parse("""
    g (float[2,3] x) => (float[3,2] y, float[2,3] z) <float[2,3] w = {1,2,3,4,5,6}> {
        wt = Transpose <perm = [1, 0]> (w)
        xt = Transpose <perm = [1, 0]> (x)
        y = Mul (xt, wt)
        z = Add (x, w)
    }""")
    result = optimize(model, ort_run, rng)
    np.testing.assert_array_equal(initializers(result.model)["w"],
                                  np.arange(1, 7, dtype=np.float32).reshape(2, 3))
    assert result.stats["folded_into_constants"] >= 1
    assert "Transpose" in ops(result.model)  # xt feeds the graph output through Mul
    assert result.stats["transposes_after"] == 1


@pytest.mark.parametrize("through_reshape", [False, True])
def test_rule3_a_shared_weight_is_not_stored_twice_for_one_transpose(ort_run, rng,
                                                                    through_reshape):
    """A tied embedding: the table read by the Gather and, transposed, by the LM head. Folding
    the Transpose would store the table twice: the Transpose stays and the file is not bigger
    (also where the Transpose reads the table through a Reshape)."""
    model = parse(f"""
    g (int64[2] ids, float[2,32] h) => (float[2,32] e, float[2,64] logits) {{
        e = Gather (table, ids)
        {"flat = Reshape (table, shape)" if through_reshape else ""}
        tt = Transpose <perm = [1, 0]> ({"flat" if through_reshape else "table"})
        logits = MatMul (h, tt)
    }}""")
    model.graph.initializer.extend([
        numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "table"),
        numpy_helper.from_array(np.array([64, 32], np.int64), "shape")])
    size = model.ByteSize()
    result = optimize(model, ort_run, rng, pinned={"ids": np.array([3, 60], np.int64)})
    assert result.stats["transposes_after"] == 1, ops(result.model)
    assert sum(list(t.dims) in ([64, 32], [32, 64]) for t in result.model.graph.initializer) == 1
    assert result.model.ByteSize() <= size


def test_rule3_transpose_of_a_reshaped_kernel_folds_and_the_reshape_goes(ort_run, rng):
    # tf2onnx's depthwise kernel: Transpose(Reshape(W[3,3,4,1], [3,3,1,4]), perm 3,2,0,1).
    model = parse("""
    g (float[1,4,8,8] x) => (float[1,4,8,8] y) {
        k = Reshape (w, shape)
        kt = Transpose <perm = [3, 2, 0, 1]> (k)
        y = Conv <group = 4, pads = [1, 1, 1, 1]> (x, kt)
    }""")
    model.graph.initializer.extend([
        numpy_helper.from_array(rng.standard_normal((3, 3, 4, 1)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([3, 3, 1, 4], np.int64), "shape"),
    ])
    result = optimize(model, ort_run, rng)
    assert ops(result.model) == ["Conv"]
    assert {i.name for i in result.model.graph.initializer}.isdisjoint({"w", "shape"})
    assert result.stats["folded_into_constants"] == 1


# ------------------------------------------------------------------ rule 5: size-1 moves
SIZE_ONE_MOVE = """
g (float[{shape}] x) => (float[{out}] y) {{
    y = Transpose <perm = {perm}> (x)
}}"""


def _reshape_target(target: list[int]):
    def check(result) -> None:
        (node,) = result.model.graph.node
        found = initializers(result.model)[node.input[1]].tolist()
        assert found == target
        assert found.count(-1) <= 1  # ORT refuses two
    return check


def size_one(row_id: str, shape: list, perm: list[int], target: list[int] | None, **how):
    out = [shape[p] for p in perm]
    text = SIZE_ONE_MOVE.format(shape=",".join(map(str, shape)), out=",".join(map(str, out)),
                                perm=perm)
    if target is None:  # stays a Transpose
        return pytest.param(text, expect(["Transpose"], modified=False, **how), id=row_id)
    return pytest.param(text, expect(["Reshape"], stats={"converted_to_reshape": 1},
                                     check=_reshape_target(target), **how), id=row_id)


GLOBAL_POOL = """
g (float[2,5,4,4] x) => (float[2,1,1,5] y) {
    p = GlobalAveragePool (x)
    y = Transpose <perm = [0, 2, 3, 1]> (p)
}"""

# At IR 3 every initializer must also be a graph input; the shape of rule 5's Reshape would have
# to be a Constant node (onnx's pytorch-operator permute2): one node more, so the Transpose
# stays (the pipeline raises such a model to IR 4 first).
IR3 = """
<ir_version: 3, opset_import: ["" : 9]>
g (float[2,5,1,1] x) => (float[2,1,1,5] y) {
    y = Transpose <perm = [0, 2, 3, 1]> (x)
}"""


def _no_new_constants(result) -> None:
    assert [i.name for i in result.model.graph.input] == ["x"]
    assert not result.model.graph.initializer


DIMS = {"N": 3, "H": 5, "W": 7, "C": 2}

RULE_5 = [
    pytest.param(GLOBAL_POOL, expect(["GlobalAveragePool", "Reshape"], stats={
        "converted_to_reshape": 1}), id="5-size-one-move-becomes-reshape"),
    pytest.param(IR3, expect(["Transpose"], check=_no_new_constants),
                 id="5-regression-ir3-no-new-constants"),
    # Symbolic sizes: one that stays in place is copied (0), at most one other inferred (-1).
    size_one("5-symbolic-batch-copied-one-inferred", ["N", 1, "H", 1], [0, 2, 1, 3],
             [0, -1, 1, 1], dims=DIMS),
    size_one("5-symbolic-channels-last-to-first", ["N", 1, 1, "C"], [0, 3, 1, 2],
             [0, -1, 1, 1], dims=DIMS),
    size_one("5-symbolic-two-copied-one-inferred", ["N", "H", 1, "W"], [0, 2, 1, 3],
             [0, 1, -1, 0], dims=DIMS),
    size_one("5-symbolic-static-around-inferred", [2, "H", 1, 4], [0, 2, 1, 3], [2, 1, -1, 4],
             dims=DIMS),
    size_one("5-symbolic-leading-one-moves", [1, "H", "W"], [1, 0, 2], [-1, 1, 0], dims=DIMS),
    size_one("5-symbolic-rank2", [1, "N"], [1, 0], [-1, 1], dims=DIMS),
    # Two unknown sizes that move would need two -1s: the Transpose stays.
    size_one("5-negative-two-symbolic-sizes-move", ["N", "H", "W", 1], [0, 3, 1, 2], None,
             dims=DIMS),
    size_one("5-negative-batch-and-height-move", ["N", "H", 1, "W"], [2, 0, 1, 3], None,
             dims=DIMS),
    size_one("5-negative-two-move-rank3", [1, "H", "W"], [1, 2, 0], None, dims=DIMS),
]


@pytest.mark.parametrize("text, expected", RULE_5)
def test_rule5_size_one_moves(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


@pytest.mark.parametrize("dims", [["2", "-1", "-1", "1"], ["2", "N", "H", "1"]])
def test_rule5_size_one_move_with_two_unknown_sizes_stays_a_transpose(dims, ort_run, rng):
    # [2,?,?,1] -> [2,1,?,?]: a Reshape target would need two -1s, which ORT refuses.
    model = with_dims("""
    g (float[2,5,6,1] x) => (float[2,1,5,6] y) { y = Transpose <perm = [0, 3, 1, 2]> (x) }""",
                      dims)
    result = optimize(model, ort_run, rng, dims={"N": 5, "H": 6})
    assert ops(result.model) == ["Transpose"]


@pytest.mark.parametrize("dims, target", [
    (["-1", "4", "1", "5"], [0, 1, 4, 5]),  # the unknown size stays in place: copied
    (["2", "-1", "1", "5"], [2, 1, -1, 5]),  # one unknown size that moves: inferred
])
def test_rule5_size_one_move_with_an_unknown_size_becomes_a_valid_reshape(dims, target, ort_run):
    model = with_dims("""
    g (float[2,4,1,5] x) => (float[2,1,4,5] y) { y = Transpose <perm = [0, 2, 1, 3]> (x) }""",
                      dims)
    reference = onnx.ModelProto()
    reference.CopyFrom(model)
    result = EliminateTransposes()(model)
    assert ops(result.model) == ["Reshape"]
    assert numpy_helper.to_array(result.model.graph.initializer[0]).tolist() == target
    onnx.checker.check_model(result.model, full_check=True)
    x = np.arange(40, dtype=np.float32).reshape(2, 4, 1, 5)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"],
                                  ort_run(reference, {"x": x})["y"])


def test_rule5_in_a_run_held_to_its_size_spends_only_the_bytes_saved_before():
    """The Reshape's target is a constant more than the Transpose: in a run held to its
    input's size (never bigger), rule 5 applies only within the bytes the passes before
    saved; outside such a run, and with room enough, it applies."""
    from graphfix import registry

    text = """
    g (float[2,1,8] x) => (float[1,2,8] y) { y = Transpose <perm = [1, 0, 2]> (x) }"""
    model = parse(text)
    with registry.size_limit(registry.plain_size(model)):
        assert ops(EliminateTransposes()(parse(text)).model) == ["Transpose"]
    with registry.size_limit(registry.plain_size(model) + 64):
        converted = EliminateTransposes()(parse(text)).model
    assert ops(converted) == ["Reshape"]
    assert registry.plain_size(converted) <= registry.plain_size(model) + 64
    assert ops(EliminateTransposes()(parse(text)).model) == ["Reshape"]


# ------------------------------------------------------------------ rule 6: Unsqueeze
UNSQUEEZE_MOVES_KEPT_AXES = """
g (float[2,16,4] x) => (float[2,4,1,16] y) <int64[1] ax = {1}> {
    u = Unsqueeze (x, ax)
    y = Transpose <perm = [0, 3, 1, 2]> (u)
}"""

# u: [2,1,16,4] -> t: [2,16,1,4]: only the inserted axis moves.
UNSQUEEZE_SIZE_ONE_MOVE = """
g (float[2,16,4] x) => (float[2,16,4] y) {
    u = Unsqueeze <axes = [1]> (x)
    t = Transpose <perm = [0, 2, 1, 3]> (u)
    r = Relu (t)
    y = Squeeze <axes = [2]> (r)
}"""

RULE_6 = [
    # T(0,3,1,2) after Unsqueeze(axis 1) also moves C before T: not a size-1 move, kept.
    pytest.param(UNSQUEEZE_MOVES_KEPT_AXES, expect(["Unsqueeze", "Transpose"], opset=13,
                                                   modified=False),
                 id="6-negative-permutation-moves-the-kept-axes"),
    pytest.param(UNSQUEEZE_SIZE_ONE_MOVE, expect(["Unsqueeze", "Relu", "Squeeze"], opset=11,
                                                 attrs={"Unsqueeze": {"axes": [2]}}),
                 id="6-unsqueeze-absorbs-a-size-one-move-opset11"),
]


@pytest.mark.parametrize("text, expected", RULE_6)
def test_rule6_unsqueeze(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


# Conv1D as tf2onnx writes it: Unsqueeze(axis 1) -> T(0,3,1,2) -> Conv -> T(0,2,3,1) -> Squeeze,
# the Unsqueeze axes computed from a constant (Cast), as in its output without optimizers.
CONV1D_TWICE = """
g (float[N,16,4] x) => (float[N,16,6] y) {
    ax = Cast <to = 7> (ax32)
    u = Unsqueeze (x, ax)
    t = Transpose <perm = [0, 3, 1, 2]> (u)
    c = Conv <pads = [0, 1, 0, 1]> (t, w1)
    b = Transpose <perm = [0, 2, 3, 1]> (c)
    s = Squeeze (b, ax)
    r = Relu (s)
    u2 = Unsqueeze (r, ax)
    t2 = Transpose <perm = [0, 3, 1, 2]> (u2)
    c2 = Conv <pads = [0, 1, 0, 1]> (t2, w2)
    b2 = Transpose <perm = [0, 2, 3, 1]> (c2)
    y = Squeeze (b2, ax)
}"""


def test_rule6_conv1d_transposes_are_absorbed_into_the_unsqueezes(ort_run, rng):
    # Rule 6 plus the folded Cast axes: what stays is the NWC input's and output's Transposes.
    model = parse(CONV1D_TWICE, opset=13)
    weights = np.random.default_rng(7)
    model.graph.initializer.extend([
        numpy_helper.from_array(np.array([1], np.int32), "ax32"),
        numpy_helper.from_array(weights.standard_normal((5, 4, 1, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(weights.standard_normal((6, 5, 1, 3)).astype(np.float32), "w2"),
    ])
    result = optimize(model, ort_run, rng, dims={"N": 2})
    assert ops(result.model).count("Transpose") == 2
    assert ops(result.model).count("Conv") == 2
    unsqueezes = [n for n in result.model.graph.node if n.op_type == "Unsqueeze"]
    # The second Unsqueeze now inserts the size-1 axis where the Conv wants it (NCHW: axis 2).
    axes = initializers(result.model)
    assert [axes[n.input[1]].tolist() if n.input[1] in axes else None for n in unsqueezes][1] \
        == [2]


def test_a_declared_output_shape_does_not_make_a_transpose_a_reshape():
    """The output declares [1, 5] (a size-1 move, rule 5, if it were true); the input's own
    shape is unknown, so the Transpose stays a Transpose."""
    model = parse("""
    g (float[N, M] x) => (float[1, 5] y) {
        y = Transpose <perm = [1, 0]> (x)
    }""")
    result = EliminateTransposes()(model)
    assert ops(result.model) == ["Transpose"]


def test_rule3b_dequantize_read_elsewhere_stays():
    """The dequantized weights are a graph output too: they keep their layout, the Transpose
    stays."""
    model = parse(_fold_into_dequantize(per_axis=True).replace(
        "=> (float[1,4,5,5] y)", "=> (float[1,4,5,5] y, float[3,3,4,3] w)"), 13)
    result = EliminateTransposes()(model)
    assert ops(result.model) == ["DequantizeLinear", "Transpose", "Conv"]
