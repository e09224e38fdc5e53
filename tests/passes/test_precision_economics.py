"""convert-precision rule 17: a lowered group that does not pay for its Casts stays float32."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from graphfix.passes.convert_precision import ConvertPrecision
from graphfix.passes.convert_precision.analysis import Analysis
from graphfix.passes.convert_precision.economics import border_casts, unpaid
from graphfix.passes.convert_precision.measure import tensor_types
from graphfix.validate.parity import check_parity
from tests.passes.precision_support import FP16, cancelling, copy, parse



def float_casts(model: onnx.ModelProto) -> int:
    return sum(1 for n in model.graph.node if n.op_type == "Cast")


def island_lines(result) -> list[str]:
    return [line for island in result.details["islands"] for line in island["why"]]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _add_before_cumsum(rng: np.random.Generator) -> onnx.ModelProto:
    # The CumSum stays float32 (a running sum); the Add before it, lowered, would stand
    # between two Casts of its own: Cast(x), Add, Cast(back), CumSum.
    return parse("""
    g (float[4,64] x) => (float[4,64] y) {
        a = Add(x, b)
        c = CumSum(a, axis)
        m = MatMul(x, w)
        y = Add(m, c)
    }""", b=rng.uniform(-1, 1, 64).astype(np.float32), axis=np.array(1, np.int64),
        w=(rng.standard_normal((64, 64)) / 8).astype(np.float32))


def test_a_lone_add_between_float32_neighbours_stays_float32_with_its_reason(rng):
    model = _add_before_cumsum(rng)
    weighed = ConvertPrecision()(copy(model))
    everything = ConvertPrecision(weigh_casts=False)(copy(model))
    assert weighed.modified and everything.modified
    assert any(line.startswith("Add#0 (Add): lowering its group of 1 node(s) (Add) adds 1 "
                               "Cast(s)") for line in island_lines(weighed))
    assert float_casts(weighed.model) < float_casts(everything.model)
    assert weighed.stats["casts_added"] == float_casts(weighed.model)
    # The product is still lowered, and the written model is within float16's tolerance.
    matmul = next(n for n in weighed.model.graph.node if n.op_type == "MatMul")
    assert next(t for t in weighed.model.graph.initializer
                if t.name == matmul.input[1]).data_type == FP16
    assert check_parity(model, weighed.model).passed


def test_a_long_element_wise_chain_pays_for_its_casts(rng):
    # Eight element-wise ops between one Cast in and one out: half the bytes of 16 values
    # read and written, against 2 Casts.
    model = parse("""
    g (float[4,256] x) => (float[4,256] y) {
        a = Mul(x, s)
        b = Add(a, t)
        c = Sigmoid(b)
        d = Mul(b, c)
        e = Mul(d, s)
        f = Add(e, t)
        h = Tanh(f)
        y = Mul(h, s)
    }""", s=np.full(256, 0.5, np.float32), t=np.full(256, 0.1, np.float32))
    result = ConvertPrecision()(copy(model))
    assert result.modified and result.stats["compute_nodes_float32"] == 0
    assert float_casts(result.model) == 2


def test_a_group_reading_a_large_table_pays_whatever_its_casts(rng):
    # An embedding lookup and one Add: short, but its table is stored at half the bytes.
    model = parse("""
    g (int64[2,8] ids) => (float[2,8,16] y) {
        e = Gather(table, ids)
        y = Add(e, pos)
    }""", table=rng.uniform(-1, 1, (512, 16)).astype(np.float32),
        pos=rng.uniform(-1, 1, (8, 16)).astype(np.float32))
    result = ConvertPrecision()(copy(model))
    assert result.modified
    assert {t.name: t.data_type for t in result.model.graph.initializer}["table"] == FP16


def test_where_nothing_pays_the_pass_says_so_and_writes_nothing(rng):
    model = parse("""
    g (float[4,64] x) => (float[4,64] y) {
        a = Add(x, b)
        y = CumSum(a, axis)
    }""", b=rng.uniform(-1, 1, 64).astype(np.float32), axis=np.array(1, np.int64))
    result = ConvertPrecision()(copy(model))
    assert not result.modified
    assert "lowering pays nowhere here: 1 node(s)" in result.skipped
    assert result.model.graph.node[0].op_type == "Add"


def test_border_casts_counts_what_the_rewrite_inserts(rng):
    # The count the economics weighs is the count lower() writes, for every assignment of a
    # small graph with a shared input, an output read again and a float32-only reader.
    model = parse("""
    g (float[4,64] x) => (float[4,64] y, float[4,64] z) {
        a = Add(x, b)
        y = Mul(a, x)
        c = CumSum(y, axis)
        z = Sub(c, a)
    }""", b=rng.uniform(-1, 1, 64).astype(np.float32), axis=np.array(1, np.int64))
    from graphfix.passes.convert_precision.rewrite import lower

    analysis = Analysis.build(model, tensor_types(model), low=FP16)
    compute = [p for p in analysis.compute_nodes() if analysis.node(p).op_type != "CumSum"]
    for mask in range(1 << len(compute)):
        chosen = frozenset(p for i, p in enumerate(compute) if mask >> i & 1)
        low = analysis.resolve(chosen)
        copied = Analysis.build(copy(model), tensor_types(model), low=FP16)
        stats = lower(copied, low)
        assert border_casts(analysis, low) == stats.casts, sorted(chosen)


def test_unpaid_keeps_a_group_only_when_its_saving_is_not_larger(rng):
    model = _add_before_cumsum(rng)
    analysis = Analysis.build(model, tensor_types(model), low=FP16)
    compute = frozenset(p for p in analysis.compute_nodes()
                        if analysis.node(p).op_type != "CumSum")
    low, kept = unpaid(analysis, compute, analysis.resolve)
    assert {analysis.node(p).op_type for p in kept} == {"Add"} and len(kept) == 1
    assert not kept.keys() & low


def test_a_lowered_output_read_in_float32_too_is_cast_once(rng):
    # y is an output (float32) and a CumSum (float32) reads it: the output's own Cast back to
    # float32 serves the CumSum, no second Cast of y.
    model = parse("""
    g (float[4,64] x) => (float[4,64] y, float[4,64] z) {
        y = MatMul(x, w)
        z = CumSum(y, axis)
    }""", w=(rng.standard_normal((64, 64)) / 8).astype(np.float32),
        axis=np.array(1, np.int64))
    result = ConvertPrecision()(copy(model))
    assert result.modified and float_casts(result.model) == 2  # x in, y out
    cumsum = next(n for n in result.model.graph.node if n.op_type == "CumSum")
    assert cumsum.input[0] == "y"
    onnx.checker.check_model(result.model, full_check=True)
    assert check_parity(model, result.model).passed


def test_groups_sharing_casts_are_weighed_again_once_one_goes_back(rng):
    # Three groups read x and c in float16: each Cast is charged to none while the others stay
    # lowered. Once the two lone Muls go back, the Add and Tanh pay 3 Casts alone and go too.
    model = parse("""
    g (float[4,32] x) => (float[4,32] c, float[4,32] ya, float[4,32] yb, float[4,32] yc) {
        c = CumSum(x, axis)
        a = Add(x, c)
        ya = Tanh(a)
        yb = Mul(c, x)
        yc = Mul(c, k)
    }""", axis=np.array(1, np.int64), k=np.full(32, 0.7, np.float32))
    result = ConvertPrecision()(copy(model))
    assert not result.modified and "lowering pays nowhere here: 4 node(s)" in result.skipped


def test_io_types_not_applied_is_said(rng):
    model = parse("""
    g (float[4,64] x) => (float[4,64] y) {
        c = CumSum(x, axis)
        a = Add(c, b)
        m = Mul(a, b)
        y = CumSum(m, axis)
    }""", b=rng.uniform(-1, 1, 64).astype(np.float32), axis=np.array(1, np.int64))
    result = ConvertPrecision(io_types="fp16")(copy(model))
    assert not result.modified
    assert any(w.startswith("io_types fp16 not applied") for w in result.warnings)


def test_a_search_that_would_hold_too_many_tensors_to_trace_gives_up_saying_why(monkeypatch):
    # Tracing holds every float tensor of the original and of the assignment on every input
    # set at once: a 1024 x 1024 U-Net took 24 GB and the system killed the process. Past the
    # limit the search gives up, in one line, the model kept float32.
    from graphfix.passes.convert_precision import measure

    monkeypatch.setattr(measure, "MAX_TRACE_BYTES", 64)
    model = cancelling()
    result = ConvertPrecision(weigh_casts=False)(copy(model))
    assert not result.modified
    assert "tracing the error back would hold" in result.skipped
    assert "GiB graphfix lets it take" in result.skipped
