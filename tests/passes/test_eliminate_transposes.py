"""eliminate-transposes as a pass: its contract, options and stats, and whole models.

The rules have modules of their own, split as the package is (each rule's table of rows is
``pytest.param(onnx_text, expected, id)``, checked by :func:`tests.passes.transposes_support.
check_row`): ``_rules`` (rules 1-3, 5, 6), ``_push`` (4a-4e), ``_push_axes`` (4f-4k),
``_absorb`` (rule 7), ``_loops`` (rule 8 and bodies), ``_cost`` (the look-ahead),
``_boundary`` (signature changes), ``_perm`` (the permutation algebra), ``_property`` (random
graphs) and ``_peers`` (the peer optimizers' suites). This module also holds the checks that
run over every table: each op of the handler table has a row, no row's result has more
nodes or Transposes than its input, and the look-ahead counts the nodes of every push as its
edits make them (the peers' cases too).
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from graphfix.errors import PassError
from graphfix.graph import count_nodes
from graphfix.passes.eliminate_transposes import (
    EliminateTransposes,
    eliminate_transposes,
    rewrite,
)
from graphfix.passes.eliminate_transposes.handlers import HANDLERS
from tests.passes import (
    test_eliminate_transposes_absorb,
    test_eliminate_transposes_boundary,
    test_eliminate_transposes_cost,
    test_eliminate_transposes_loops,
    test_eliminate_transposes_peers,
    test_eliminate_transposes_push,
    test_eliminate_transposes_push_axes,
    test_eliminate_transposes_rules,
)
from tests.passes.transposes_support import Expect, all_ops, ops, optimize, parse

NHWC_RELU = test_eliminate_transposes_push.NHWC_RELU

# ------------------------------------------------------------------ every table
TABLES = {
    "rule 1": test_eliminate_transposes_rules.RULE_1,
    "rule 2": test_eliminate_transposes_rules.RULE_2,
    "rule 3": test_eliminate_transposes_rules.RULE_3,
    "4a": test_eliminate_transposes_push.RULE_4A,
    "4b": test_eliminate_transposes_push.RULE_4B,
    "4c": test_eliminate_transposes_push.RULE_4C,
    "4d": test_eliminate_transposes_push.RULE_4D,
    "4e": test_eliminate_transposes_push.RULE_4E,
    "4f": test_eliminate_transposes_push_axes.RULE_4F,
    "4g": test_eliminate_transposes_push_axes.RULE_4G,
    "4h": test_eliminate_transposes_push_axes.RULE_4H,
    "4i": test_eliminate_transposes_push_axes.RULE_4I,
    "4j": test_eliminate_transposes_push_axes.RULE_4J,
    "4k": test_eliminate_transposes_push_axes.RULE_4K,
    "4l": test_eliminate_transposes_push_axes.RULE_4L,
    "rule 5": test_eliminate_transposes_rules.RULE_5,
    "rule 6": test_eliminate_transposes_rules.RULE_6,
    "7a": test_eliminate_transposes_absorb.RULE_7A,
    "7c": test_eliminate_transposes_absorb.RULE_7C,
    "rule 8": test_eliminate_transposes_loops.RULE_8,
    "cost": test_eliminate_transposes_cost.COST,
    "boundary": test_eliminate_transposes_boundary.BOUNDARY,
}
# Every row of every table. A row whose outputs are wrong (a strict xfail in its table) still
# must not gain nodes or Transposes: it keeps only the marks of bugs that gain nodes ("nodes
# become" in their reason).
ROWS = [pytest.param(*row.values, id=row.id, marks=[
    mark for mark in row.marks if "nodes become" in mark.kwargs.get("reason", "")])
    for table in TABLES.values() for row in table]


def _model_of(text: str, expected) -> onnx.ModelProto:
    opset = expected.opset if isinstance(expected, Expect) else 17
    return parse(text, opset)


@pytest.mark.parametrize("op_type", sorted(HANDLERS))
def test_every_op_of_the_handler_table_has_a_row(op_type):
    """Adding an op to the handler table is one row in its rule's table."""
    assert any(op_type in ops(_model_of(*row.values)) for row in ROWS), (
        f"no table row pushes a Transpose through {op_type}")


@pytest.mark.parametrize("text, expected", ROWS)
def test_no_row_gains_nodes_or_transposes(text, expected):
    """The never-more-nodes guarantee: for every row, the pass's result has no more nodes
    (``graphfix.graph.count_nodes``, subgraphs included) and no more Transposes than its
    input."""
    model = _model_of(text, expected)
    before, transposes = count_nodes(model), all_ops(model).count("Transpose")
    options = dict(expected.options) if isinstance(expected, Expect) else {}
    result = EliminateTransposes(**options)(model)
    assert result.skipped is None, result.skipped  # not taken back by the registry
    assert count_nodes(result.model) <= before
    assert all_ops(result.model).count("Transpose") <= transposes
    assert result.stats["transposes_after"] <= result.stats["transposes_before"]


def _peer_rows():
    peers = test_eliminate_transposes_peers
    for row in (*peers.TF2ONNX_CASES, *peers.ORT_CASES):
        text, _, setup = row.values
        yield pytest.param(peers.HEADER.format(opset=setup.opset) + text,
                           Expect(options=setup.options), id=row.id)


def _pushes(model: onnx.ModelProto, options, caplog) -> list[tuple[int, int, str]]:
    """Run the pass; for each push it carries out, the change in nodes the look-ahead gave for
    the push's own edits and the change they made, as the push's DEBUG record gives them."""
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger=rewrite.__name__):
        EliminateTransposes(**options)(model)
    return [(record.nodes_counted, record.nodes_made, record.getMessage())
            for record in caplog.records
            if record.name == rewrite.__name__ and record.msg.startswith("push ")]


@pytest.mark.parametrize("text, expected", [
    pytest.param(*row.values, id=row.id) for row in ROWS] + list(_peer_rows()))
def test_look_ahead_counts_the_nodes_each_push_makes(text, expected, caplog):
    """Every node a push adds or removes (Transposes, Unsqueezes, Gathers, Identities, the
    Constant nodes of IR 3, the constants and Transposes it leaves unread) is in the
    look-ahead's count: what it says the push's own edits change is what they change."""
    options = dict(expected.options) if isinstance(expected, Expect) else {}
    for predicted, real, push in _pushes(_model_of(text, expected), options, caplog):
        assert predicted == real, push


@pytest.mark.parametrize("ir_version", [3, 8])
def test_look_ahead_counts_the_nodes_of_a_cnn(ir_version, caplog):
    # At IR 3 the CNN's constants are Constant nodes, and so is each constant a push makes.
    model = _nhwc_cnn(13)
    if ir_version == 3:
        constants = [helper.make_node("Constant", [], [t.name], value=t)
                     for t in model.graph.initializer]
        nodes = [*constants, *model.graph.node]
        del model.graph.initializer[:], model.graph.node[:]
        model.graph.node.extend(nodes)
        model.ir_version = 3
    pushes = _pushes(model, {}, caplog)
    assert len(pushes) >= 9
    for predicted, real, push in pushes:
        assert predicted == real, push


# ------------------------------------------------------------------ realistic CNN
def _nhwc_cnn(opset: int = 13, batch: int | str = 1) -> onnx.ModelProto:
    """A converter-style NHWC CNN: every Conv wrapped in Transpose(0,3,1,2) ... (0,2,3,1)."""
    rng = np.random.default_rng(1)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    count = [0]

    def name(base: str) -> str:
        count[0] += 1
        return f"{base}{count[0]}"

    def const(value: np.ndarray, base: str) -> str:
        n = name(base)
        inits.append(numpy_helper.from_array(value, n))
        return n

    def conv_nhwc(x: str, cin: int, cout: int, k: int) -> str:
        t, c, o = name("to_nchw"), name("conv"), name("to_nhwc")
        w = const(rng.standard_normal((cout, cin, k, k)).astype(np.float32) * 0.3, "w")
        b = const(rng.standard_normal(cout).astype(np.float32) * 0.1, "b")
        nodes.append(helper.make_node("Transpose", [x], [t], perm=[0, 3, 1, 2]))
        nodes.append(helper.make_node("Conv", [t, w, b], [c], pads=[k // 2] * 4))
        nodes.append(helper.make_node("Transpose", [c], [o], perm=[0, 2, 3, 1]))
        return o

    def op(op_type: str, inputs: list[str], **attrs) -> str:
        out = name(op_type.lower())
        nodes.append(helper.make_node(op_type, inputs, [out], **attrs))
        return out

    pads = const(np.array([0, 1, 1, 0, 0, 1, 1, 0], np.int64), "pads")
    lo, hi = const(np.array(0, np.float32), "lo"), const(np.array(6, np.float32), "hi")
    h = op("Pad", ["x", pads])
    h = conv_nhwc(h, 3, 8, 3)
    h = op("Clip", [h, lo, hi])
    skip = h
    h = conv_nhwc(h, 8, 8, 3)
    h = op("Clip", [h, lo, hi])
    h = conv_nhwc(h, 8, 8, 1)
    h = op("Add", [h, skip])
    h = op("Mul", [h, const(rng.standard_normal(8).astype(np.float32), "gamma")])
    branch = conv_nhwc(h, 8, 4, 1)
    h = op("Concat", [h, branch], axis=3)
    pooled = op("ReduceMean", [h], axes=[1, 2], keepdims=0)
    h = conv_nhwc(h, 12, 6, 1)
    h = op("ReduceMax", [h], axes=[1, 2], keepdims=1)
    if opset >= 13:
        squeezed = op("Squeeze", [h, const(np.array([1, 2], np.int64), "axes")])
    else:
        squeezed = op("Squeeze", [h], axes=[1, 2])
    nodes.append(helper.make_node("Identity", [pooled], ["pooled"]))
    nodes.append(helper.make_node("Identity", [squeezed], ["logits"]))
    graph = helper.make_graph(
        nodes, "nhwc_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 8, 3])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [batch, 12]),
         helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 6])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("opset", [11, 13, 17])
def test_nhwc_cnn_ends_without_interior_transposes(opset, ort_run, rng):
    model = _nhwc_cnn(opset)
    result = optimize(model, ort_run, rng, exact=False)
    transposes = [n for n in model.graph.node if n.op_type == "Transpose"]
    assert len(transposes) <= 1
    for node in transposes:  # the boundary one: right after the Pad that reads the input
        producer = next(n for n in model.graph.node if node.input[0] in n.output)
        assert producer.op_type == "Pad" and producer.input[0] == "x"
    assert result.stats["transposes_before"] == 10
    assert result.stats["transposes_removed"] >= 9


def test_nhwc_cnn_bit_exact_without_reordered_reductions(ort_run, rng):
    model = _nhwc_cnn(13, batch="N")
    result = optimize(model, ort_run, rng, keep_reduction_order=True, dims={"N": 2})
    assert result.stats["transposes_after"] < result.stats["transposes_before"]


def test_dynamic_batch(ort_run, rng):
    model = parse("""
    g (float[N,8,8,3] x) => (float[N,8,8,3] y) <float[3] b = {1, 2, 3}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Relu (t)
        y0 = Transpose <perm = [0, 2, 3, 1]> (r)
        y = Add (y0, b)
    }""")
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = optimize(model, ort_run, rng, dims={"N": 3})
    assert ops(result.model) == ["Relu", "Add"]
    x = rng.standard_normal((5, 8, 8, 3)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(result.model, {"x": x})["y"],
                                  ort_run(original, {"x": x})["y"])


# ------------------------------------------------------------------ the pass's contract
def test_idempotent_and_deterministic():
    first, second = _nhwc_cnn(17), _nhwc_cnn(17)
    r1 = EliminateTransposes()(first)
    r2 = EliminateTransposes()(second)
    assert r1.modified
    assert first.SerializeToString() == second.SerializeToString()
    again = EliminateTransposes()(first)
    assert not again.modified
    assert again.stats["transposes_removed"] == 0
    assert r2.stats == r1.stats


def test_nothing_to_do_is_not_modified():
    model = parse("""
    g (float[2,3] x) => (float[2,3] y) { y = Relu (x) }""")
    before = model.SerializeToString()
    result = EliminateTransposes()(model)
    assert not result.modified
    assert model.SerializeToString() == before
    assert result.stats["transposes_before"] == 0


def test_function_twin_rewrites_in_place():
    model = parse(NHWC_RELU)
    assert eliminate_transposes(model) is model
    assert ops(model) == ["Relu"]


def test_value_info_of_rewired_tensors_stays_consistent(ort_run, rng):
    model = parse(NHWC_RELU)
    model = onnx.shape_inference.infer_shapes(model)
    assert {v.name for v in model.graph.value_info} == {"t", "r"}
    optimize(model, ort_run, rng)
    assert {v.name for v in model.graph.value_info} == set()


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_options_validated(bad):
    with pytest.raises(PassError):
        EliminateTransposes(keep_reduction_order=bad)
