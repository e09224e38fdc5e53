"""eliminate-transposes against its peers' own test suites, ported case by case.

Two peers ship a transpose optimizer with a unit suite that builds small graphs and counts the
Transposes left after optimization:

* tf2onnx, ``tests/test_optimizers.py`` (onnx/tensorflow-onnx): every test that calls
  ``run_transpose_compare``, one row per ``parameterized.expand`` row (and per inner loop
  iteration), with the peer's ``remaining_transpose_num``. tf2onnx runs its suite at opset 15
  (``PREFERRED_OPSET``); a test capped below that (``check_opset_max_version``) runs here at its
  cap, one that needs more (``check_opset_min_version(18)``) at 18.
* ONNX Runtime, ``onnxruntime/test/optimizer/transpose_optimizer_test.cc`` (microsoft/onnxruntime):
  the cases that build a graph of standard ops. ORT measures ``EstimateTransposeCost`` (per
  Transpose, the output dims that are not a static 1); a cost of 0 is read as no Transpose, a
  non-zero cost as the number of Transposes it stands for (the comment next to each row says how).
  A "NoOpt" case checks nothing after optimization: the count the peer leaves is the input's.
  Where the peer runs one graph at several opsets, a row is kept per opset that changes the
  graph (an attribute that becomes an input, a default that changes, a new type).

Transposes are counted in every graph, subgraph bodies included (ORT's cost does; tf2onnx counts
the main graph, and its one case with a body, the Loop, moves the body's Transpose out). Only
Transposes are counted: ORT's Transpose+Reshape merge cases also expect the Reshape gone, and
tf2onnx's squeeze cases check the perm left; neither is asserted here.

The acceptance rule: graphfix alone leaves no more Transposes than the peer expects, writes a
valid model (full check) with the same graph inputs and outputs, and computes the same outputs on
ORT CPU with graph optimizations off: bit for bit, except after sum-like reductions, whose float
sums may add in another order. A row graphfix cannot meet yet is a strict xfail, grouped below by
the capability it lacks (``_GAPS``): each turns into a failure as soon as graphfix handles it.

Shapes are static unless the peer's case is about dynamic ones; constants the peer draws at random
are a seeded normal sample here (``_rand``); inputs are seeded, integers small, booleans 0/1;
inputs whose values matter (pads, axes, repeats, scales, ...) take the peer's values.

Peer cases not ported, and why:

* tf2onnx ``test_trans_output_as_graph_outputs``: builds a tf2onnx ``Graph`` object (no Identity
  before the output) and never calls ``run_transpose_compare``.
* tf2onnx ``test_const_dequantize_transpose_per_channel`` / ``..._unsqueeze_per_channel``, the
  identity, duplicate, reshape, const-fold and upsample tests: other tf2onnx optimizers, checked
  with ``run_and_compare``, not the transpose optimizer.
* tf2onnx ``test_cast_back_to_back_non_const_mixed_types``: disabled in the peer (string tensors).
* ORT ``TestQLinearSoftmax``, the com.microsoft variants of the QuantizeLinear/DequantizeLinear
  cases, ``TestContribQuickGelu`` / ``TestContribGelu`` / ``TestContribFastGelu*``,
  ``LayoutTransformDoesNotRetargetNhwcFusedConv``: com.microsoft ops.
* ORT ``RegressionTest_GitHubIssue9671`` / ``10305`` / ``12151`` (and ``_NegativeDQAxis``),
  ``QnnTransposeReshape`` / ``QnnTransposeReshapeQDQ`` / ``QnnResizeOpset11`` /
  ``QnnTransposeNonConstBroadcastInput``, ``LayoutTransformFixStuckTransposeWithoutDQ``,
  ``LayoutTransformConstantFoldTransposeAndSqueeze``,
  ``ConstantFoldTransposeAndSqueezeOutputCorrectness``,
  ``FixQDQNodeUnitWithPerAxisDQUnsqueezeTranspose``, ``RemoveEmptyDQQAtGraphOutput``,
  ``InPlaceUnsqueezeTransposePerAxisDQ``, ``CancelTransposeBeforePerAxisDQ``,
  ``CancelSqueezeBeforePerAxisDQ``, ``SharedInitializerHandling*``: they load model files from
  ORT's testdata, which ONNX text here cannot reproduce.
* ORT ``LayoutTransformConvRecoverRankFromWeight`` / ``...ConvTranspose...``,
  ``LayoutTransformRejectsPerAxisDQAxisExceedingPermutation``: ORT's NHWC layout transform for an
  execution provider (an internal testing EP, ORT's graph API), not transpose elimination.
* ORT ``RegressionTest_Permute1DConstantEmptyPerm``: a Pad of a rank-0 tensor, which ORT's CPU
  kernel refuses at run time (the peer only initializes the session, it never runs it).
* ORT ``TestSliceDefaultAxesStartsLengthExceedsRankNoOpt``, ``TestTileRepeatsRankMismatchNoOpt``,
  ``PerAxisQAxisExceedsTransposePermNoOpt``: invalid models (starts longer than the data's rank,
  repeats shorter than it, a Transpose whose declared output rank contradicts its perm) that the
  peer only transforms and never runs; they can be neither checked nor run here.

ONNX text cannot leave a graph input's shape out (the checker requires one): where the peer gives
an input no shape (``std::nullopt``), the port gives it one dimension of unknown size (``[?]``,
or a named dimension where the case needs random values of that length).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from _pytest.mark.structures import ParameterSet
from onnx import helper

from graphfix.graph import graphs
from graphfix.passes.eliminate_transposes import eliminate_transposes

OrtRun = Callable[[onnx.ModelProto, dict[str, np.ndarray]], dict[str, np.ndarray]]
Shape = Sequence[int | str]

HEADER = '<ir_version: 8, opset_import: ["" : {opset}]>'

# Ops whose float result depends on the order in which elements are combined: outputs computed
# after them are compared with a tolerance.
SUM_LIKE = frozenset({
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMean", "ReduceProd",
    "ReduceSum", "ReduceSumSquare",
})


@dataclasses.dataclass(frozen=True)
class Uniform:
    """An input the peer draws uniformly from ``[low, high]`` (scales, zero points)."""

    low: float
    high: float


@dataclasses.dataclass(frozen=True)
class Setup:
    opset: int
    options: Mapping[str, Any]
    pinned: Mapping[str, np.ndarray | Uniform]
    dims: Mapping[str, int]


# --------------------------------------------------------------------------------- known gaps
# Rows graphfix does not meet yet, by the capability it lacks. Each is a strict xfail: once
# graphfix handles a capability its rows pass, fail as XPASS, and come off this table.
_GAPS: dict[str, tuple[str, ...]] = {
    "Transpose that only moves size-1 dims, the other dims symbolic: not turned into a Reshape "
    "(two unknown sizes that move need a target computed from Shape, more nodes than the "
    "Transpose)": (
        "tf2onnx-test_trans_can_be_replaced_with_reshape1_2",
        "tf2onnx-test_trans_can_be_replaced_with_reshape1_5",
        "tf2onnx-test_trans_can_be_replaced_with_reshape2_2",
        "tf2onnx-test_trans_can_be_replaced_with_reshape2_5",
    ),
}

_GAP_OF: dict[str, str] = {case_id: reason for reason, ids in _GAPS.items() for case_id in ids}


def case(
    case_id: str,
    text: str,
    expected: int,
    *,
    opset: int = 15,
    options: Mapping[str, Any] | None = None,
    pinned: Mapping[str, np.ndarray | Uniform] | None = None,
    dims: Mapping[str, int] | None = None,
) -> ParameterSet:
    """One row: the peer's graph as ONNX text and the Transposes the peer expects to remain."""
    marks = ()
    if case_id in _GAP_OF:
        marks = (pytest.mark.xfail(strict=True, reason=_GAP_OF[case_id]),)
    setup = Setup(opset, dict(options or {}), dict(pinned or {}), dict(dims or {}))
    return pytest.param(text, expected, setup, id=case_id, marks=marks)


# ------------------------------------------------------------------------------ text helpers
def _ints(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def _t(elem: str, shape: Shape) -> str:
    """A tensor type: ``float[2, N]``; a scalar is the bare element type."""
    return f"{elem}[{', '.join(str(d) for d in shape)}]" if len(shape) else elem


def _perm(shape: Shape, perm: Sequence[int]) -> tuple[int | str, ...]:
    return tuple(shape[i] for i in perm)


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return tuple(inverse)


def _rand(elem: str, shape: Sequence[int], seed: int = 0) -> str:
    """A constant the peer fills at random: a seeded normal sample, as a tensor literal."""
    values = np.random.default_rng(seed).standard_normal(int(np.prod(shape, dtype=np.int64)))
    return f"{_t(elem, shape)} {{{', '.join(f'{v:.3f}' for v in values)}}}"


def _rand_init(elem: str, shape: Sequence[int], name: str, seed: int = 0) -> str:
    """An initializer the peer fills at random: ``float[2, 3] c = {...}``."""
    literal = _rand(elem, shape, seed)
    return f"{_t(elem, shape)} {name} = {literal[literal.index('{'):]}"


def _lit(elem: str, shape: Sequence[int], values: Sequence[float]) -> str:
    """A tensor literal: ``int64[2] {0, -1}``."""
    return f"{_t(elem, shape)} {{{', '.join(str(v) for v in values)}}}"


def _init(elem: str, values: Sequence[float], name: str) -> str:
    """A rank-1 initializer: ``int64[2] axes = {0, -1}``."""
    return f"{_t(elem, [len(values)])} {name} = {{{', '.join(str(v) for v in values)}}}"


# ------------------------------------------------------------------------------ the checker
def _count(model: onnx.ModelProto, op_type: str) -> int:
    return sum(n.op_type == op_type for g in graphs(model.graph) for n in g.node)


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def _sum_like(model: onnx.ModelProto) -> bool:
    """Whether an output may legitimately differ in its last bits after the pass: a sum-like
    reduction, or a Flatten feeding MatMul/Gemm (rule 7b reorders the dot products)."""
    for graph in graphs(model.graph):
        flattened = {o for n in graph.node if n.op_type == "Flatten" for o in n.output}
        for node in graph.node:
            if node.op_type in SUM_LIKE:
                return True
            if node.op_type in ("Softmax", "LogSoftmax") and _opset(model) < 13:
                return True  # case 4g: a row's elements may be summed in another order
            if node.op_type in ("MatMul", "Gemm") and flattened.intersection(node.input):
                return True
    return False


def _feeds(model: onnx.ModelProto, rng: np.random.Generator, setup: Setup) -> dict[str, np.ndarray]:
    initializers = {i.name for i in model.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for inp in model.graph.input:
        if inp.name in initializers:
            continue
        tensor_type = inp.type.tensor_type
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        pinned = setup.pinned.get(inp.name)
        if isinstance(pinned, np.ndarray):
            feeds[inp.name] = pinned.astype(dtype)
            continue
        shape = []
        for d in tensor_type.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            elif d.dim_param in setup.dims:
                shape.append(setup.dims[d.dim_param])
            else:
                raise AssertionError(f"input {inp.name!r}: give a size for dimension {d}")
        if isinstance(pinned, Uniform):
            if dtype.kind in "iu":
                feeds[inp.name] = rng.integers(
                    int(pinned.low), int(pinned.high), shape, endpoint=True).astype(dtype)
            else:
                feeds[inp.name] = rng.uniform(pinned.low, pinned.high, shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[inp.name] = rng.integers(0, 2, shape).astype(bool)
        elif dtype.kind == "u":
            feeds[inp.name] = rng.integers(0, 5, shape).astype(dtype)
        elif dtype.kind == "i":
            feeds[inp.name] = rng.integers(-5, 5, shape).astype(dtype)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def check_case(text: str, expected: int, setup: Setup, ort_run: OrtRun,
               rng: np.random.Generator) -> None:
    """Run the pass on a copy of the peer's graph and hold it to the peer's expectation."""
    original = onnx.parser.parse_model(HEADER.format(opset=setup.opset) + text)
    onnx.checker.check_model(original, full_check=True)  # the port itself is a valid model
    model = onnx.ModelProto()
    model.CopyFrom(original)
    model = eliminate_transposes(model, **setup.options)

    onnx.checker.check_model(model, full_check=True)
    assert [(i.name, i.type) for i in model.graph.input] == [
        (i.name, i.type) for i in original.graph.input]
    assert [(o.name, o.type) for o in model.graph.output] == [
        (o.name, o.type) for o in original.graph.output]

    feeds = _feeds(original, rng, setup)
    want = ort_run(original, feeds)
    for output in original.graph.output:  # the port declares the shapes the peer's graph has
        dims = output.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            assert want[output.name].shape == tuple(d.dim_value for d in dims), output.name
    got = ort_run(model, feeds)
    assert want.keys() == got.keys()
    exact = not _sum_like(original)
    for name, value in want.items():
        assert got[name].dtype == value.dtype and got[name].shape == value.shape, name
        if exact:
            np.testing.assert_array_equal(got[name], value, err_msg=name)
        else:
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-6, err_msg=name)

    left = _count(model, "Transpose")
    assert left <= expected, f"{left} Transposes left, the peer expects {expected}"


# ============================================================================ tf2onnx cases
# The rows most tf2onnx tests share: (shape, perm_input, perm_output).
_TF_ROWS = (
    ((2, 3, 4), (2, 0, 1), (1, 2, 0)),
    ((2, 3, 4, 5), (0, 2, 3, 1), (0, 3, 1, 2)),
    ((2, 3, 4, 5, 6), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)),
)


def _tf_with_concat() -> Iterator[ParameterSet]:
    rows = (((2, 3, 4, 5), (0, 3, 1, 2), (0, 2, 3, 1)),
            ((2, 3, 4, 5, 6), (0, 4, 1, 2, 3), (0, 2, 3, 4, 1)))
    for i, (shape, perm, inner) in enumerate(rows):
        for axis in range(len(shape)):
            doubled = list(shape)
            doubled[axis] *= 2
            yield case(f"tf2onnx-test_transpose_with_concat_{i}-axis{axis}", f"""
            g ({_t("float", _perm(shape, perm))} input_data1, {_t("float", shape)} input_data2)
                => ({_t("float", _perm(doubled, perm))} res) {{
                Y = Transpose <perm = {_ints(inner)}> (input_data1)
                Z = Concat <axis = {axis}> (Y, input_data2)
                res = Transpose <perm = {_ints(perm)}> (Z)
            }}""", 1)


def _tf_with_split() -> Iterator[ParameterSet]:
    rows = (((2, 3, 4, 5), (0, 3, 1, 2), (0, 2, 3, 1)),
            ((2, 3, 4, 5, 6), (0, 4, 1, 2, 3), (0, 2, 3, 4, 1)),
            ((2, 3, 4, 5, 6), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)))
    for i, (shape, perm, inner) in enumerate(rows):
        for axis in range(len(shape)):
            yield case(f"tf2onnx-test_transpose_with_split_{i}-axis{axis}", f"""
            g ({_t("float", _perm(shape, perm))} X) => ({_t("float", _perm(shape, perm))} res) {{
                Y = Transpose <perm = {_ints(inner)}> (X)
                Z = Split <axis = {axis}> (Y)
                res = Transpose <perm = {_ints(perm)}> (Z)
            }}""", 0)


def _tf_split_variants() -> Iterator[ParameterSet]:
    # check_opset_max_version(12): Split's `split` is an attribute; the batch is dynamic.
    yield case("tf2onnx-test_transpose_with_split_dynamic_shape_0", """
    g (float[1, N] X) => (float[1710] B) {
        Y = Transpose <perm = [1, 0]> (X)
        Z = Split <axis = 1, split = [1]> (Y)
        B = Squeeze (Z)
    }""", 0, opset=12, dims={"N": 1710})
    yield case("tf2onnx-test_transpose_with_split_dynamic_shape_1", """
    g (float[3, 1, 1, 5, N] X) => (float[3, 5, 6] B) {
        Y = Transpose <perm = [0, 2, 3, 4, 1]> (X)
        Z = Split <axis = 1, split = [1]> (Y)
        B = Squeeze (Z)
    }""", 0, opset=12, dims={"N": 6})
    for i, c in enumerate((3, 256)):
        yield case(f"tf2onnx-test_transpose_with_split_opset13_{i}", f"""
        g (float[{c}, 1, 1] X) => (float[1, 1, {c}] B) {{
            axes1 = Constant <value = int64[1] {{0}}> ()
            Y = Unsqueeze (X, axes1)
            Z = Transpose <perm = [0, 2, 3, 1]> (Y)
            split_attr = Constant <value = int64[1] {{1}}> ()
            A = Split <axis = 0> (Z, split_attr)
            axes2 = Constant <value = int64[1] {{1}}> ()
            B = Squeeze (A, axes2)
        }}""", 0, opset=13)


def _tf_unary(test: str, op: str) -> Iterator[ParameterSet]:
    for i, (shape, p_in, p_out) in enumerate(_TF_ROWS):
        yield case(f"tf2onnx-{test}_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", shape)} OUT) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = {op} (Y)
            OUT = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)


def _tf_binary_with_channel_input(test: str, op: str) -> Iterator[ParameterSet]:
    """test_transpose_with_add1 / with_prelu: the second operand is a rank-1 graph input."""
    for i, (shape, p_in, p_out) in enumerate(_TF_ROWS):
        yield case(f"tf2onnx-{test}_{i}", f"""
        g ({_t("float", shape)} input_data1, float[{shape[1]}] input_data2)
            => ({_t("float", shape)} res) {{
            Y = Transpose <perm = {_ints(p_in)}> (input_data1)
            Z = {op} (Y, input_data2)
            res = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)


def _tf_with_add2() -> Iterator[ParameterSet]:
    rows = (((2, 3, 4, 5), (0, 2, 3, 1), (0, 3, 1, 2)),
            ((2, 3, 4, 5, 6), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)))
    for i, (shape, p_in, p_out) in enumerate(rows):
        yield case(f"tf2onnx-test_transpose_with_add2_{i}", f"""
        g ({_t("float", shape)} input_data1, {_t("float", _perm(shape, p_in))} input_data2)
            => ({_t("float", shape)} res) {{
            Y = Transpose <perm = {_ints(p_in)}> (input_data1)
            Z = Add (Y, input_data2)
            res = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 1)


def _tf_quantize() -> Iterator[ParameterSet]:
    axis_rows = (((2, 3, 4), (0, 2, 1), (0, 2, 1)),) + _TF_ROWS[1:]
    for i, (shape, p_in, p_out) in enumerate(_TF_ROWS):
        yield case(f"tf2onnx-test_transpose_quantize_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("uint8", shape)} Z1)
            <float scale = {{0.75}}, uint8 zero_point = {{3}}> {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = QuantizeLinear (Y, scale, zero_point)
            Z1 = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)
    for i, (shape, p_in, p_out) in enumerate(axis_rows):
        yield case(f"tf2onnx-test_transpose_quantize_with_axis_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("uint8", shape)} Z1)
            <float[4] scale = {{0.75, 0.1, 2.3, 0.3}}, uint8[4] zero_point = {{2, 4, 6, 8}}> {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = QuantizeLinear <axis = 1> (Y, scale, zero_point)
            Z1 = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)
    for i, (shape, p_in, p_out) in enumerate(_TF_ROWS):
        yield case(f"tf2onnx-test_transpose_dequantize_{i}", f"""
        g ({_t("uint8", shape)} X) => ({_t("float", shape)} Z1)
            <float scale = {{0.75}}, uint8 zero_point = {{3}}> {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = DequantizeLinear (Y, scale, zero_point)
            Z1 = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)
    for i, (shape, p_in, p_out) in enumerate(axis_rows):
        yield case(f"tf2onnx-test_transpose_dequantize_with_axis_{i}", f"""
        g ({_t("uint8", shape)} X) => ({_t("float", shape)} Z1)
            <float[4] scale = {{0.75, 0.1, 2.3, 0.3}}, uint8[4] zero_point = {{2, 4, 6, 8}}> {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = DequantizeLinear <axis = 1> (Y, scale, zero_point)
            Z1 = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)


_TF_SLICE_ROWS = (
    ((2, 3, 4), (1, 2, 1), (1,), (0, 2, 1), (0, 2, 1)),
    ((2, 3, 4, 5), (1, 2, 1, 2), (1,), (0, 2, 3, 1), (0, 3, 1, 2)),
    ((2, 3, 4, 5), (1, 2, 1, 2), (1, 2), (0, 2, 3, 1), (0, 3, 1, 2)),
    ((2, 3, 4, 5), (1, 2, 1, 2), (0, 1, 2, 3), (0, 2, 3, 1), (0, 3, 1, 2)),
    ((2, 3, 4, 5, 6), (1, 2, 1, 2, 1), (2,), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)),
    ((2, 3, 4, 5, 6), (1, 2, 1, 2, 1), (2, 3), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)),
    ((2, 3, 4, 5, 6), (1, 2, 1, 2, 1), (0, 1, 2, 3, 4), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)),
)


def _tf_slice() -> Iterator[ParameterSet]:
    for i, (shape, size, axes, p_in, p_out) in enumerate(_TF_SLICE_ROWS):
        starts = [0] * len(axes)
        ends = [size[a] for a in axes]
        sliced = list(_perm(shape, p_in))
        for a in axes:
            sliced[a] = min(sliced[a], size[a])
        out = _t("float", _perm(sliced, p_out))
        # check_opset_max_version(9): starts, ends and axes are attributes.
        yield case(f"tf2onnx-test_transpose_slice_{i}", f"""
        g ({_t("float", shape)} X) => ({out} Z1) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Slice <starts = {_ints(starts)}, ends = {_ints(ends)}, axes = {_ints(axes)}> (Y)
            Z1 = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0, opset=9)
        yield case(f"tf2onnx-test_transpose_slice_opset_10_{i}", f"""
        g ({_t("float", shape)} X) => ({out} Z1)
            <{_init("int32", starts, "starts")}, {_init("int32", ends, "ends")},
             {_init("int32", axes, "axes")}> {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Slice (Y, starts, ends, axes)
            Z1 = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)


def _tf_max() -> Iterator[ParameterSet]:
    rows = (((2, 3, 4), (2, 0, 1), (1, 2, 0)),) + _TF_ROWS[1:]
    for i, (shape, p_in, p_out) in enumerate(rows):
        shape2 = _perm(shape, p_in)
        yield case(f"tf2onnx-test_transpose_max_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", shape)} Z1) {{
            const_1 = Constant <value = float[1] {{2.0}}> ()
            const_2 = Constant <value = {_rand("float", shape2, 2)}> ()
            const_3 = Constant <value = {_rand("float", shape2, 3)}> ()
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Max (Y, const_3, const_2, const_1)
            Z1 = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)
    for i, (shape, p_in, p_out) in enumerate(_TF_ROWS[1:]):
        shape2 = _perm(shape, p_in)
        yield case(f"tf2onnx-test_transpose_max_input_non_const_{i}", f"""
        g ({_t("float", shape)} X, {_t("float", shape2)} non_const) => ({_t("float", shape)} Z1) {{
            const_1 = Constant <value = float[1] {{2.0}}> ()
            const_2 = Constant <value = {_rand("float", shape2, 2)}> ()
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Max (Y, non_const, const_2, const_1)
            Z1 = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 1)
        yield case(f"tf2onnx-test_transpose_max_no_cancel_{i}", f"""
        g ({_t("float", shape)} X, {_t("float", shape2)} non_const) => ({_t("float", shape2)} Z) {{
            const_1 = Constant <value = float[1] {{2.0}}> ()
            const_2 = Constant <value = {_rand("float", shape2, 2)}> ()
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Max (Y, non_const, const_2, const_1)
        }}""", 2)


def _tf_mul_and_friends() -> Iterator[ParameterSet]:
    for i, (shape, p_in, _) in enumerate(_TF_ROWS[1:]):
        yield case(f"tf2onnx-test_transpose_merge_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", _perm(shape, p_in))} OUT) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Y_1 = Transpose <perm = {_ints(p_in)}> (X)
            OUT = Mul (Y, Y_1)
        }}""", 1)
    for i, (shape, p_in, p_out) in enumerate(_TF_ROWS):
        yield case(f"tf2onnx-test_transpose_mul_as_square_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", shape)} OUT) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Mul (Y, Y)
            OUT = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)
        yield case(f"tf2onnx-test_transpose_mul_broadcastable_const_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", shape)} OUT)
            <{_rand_init("float", (1, shape[1]), "const")}> {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Mul (Y, const)
            OUT = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)
        yield case(f"tf2onnx-test_transpose_with_shape_{i}", f"""
        g ({_t("float", shape)} X) => (int64[{len(shape)}] Z) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Shape (Y)
        }}""", 0)
        yield case(f"tf2onnx-test_transpose_with_identity_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", _perm(shape, p_in))} Z) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Identity (Y)
        }}""", 1)


def _tf_squeeze() -> Iterator[ParameterSet]:
    squeeze1 = (((1, 3, 4), (0, 2, 1)), ((1, 3, 4, 5), (0, 2, 3, 1)),
                ((1, 3, 4, 5, 6), (0, 2, 3, 4, 1)))
    squeeze2 = (((3, 4, 1, 5), (0, 2, 3, 1)), ((3, 4, 1, 5, 6), (0, 2, 3, 4, 1)))
    squeeze3 = (((3, 1, 4, 5), (0, 2, 3, 1)), ((3, 1, 4, 5, 6), (0, 2, 3, 4, 1)))
    squeeze4 = (((3, 1, 1, 5), (0, 2, 3, 1)), ((3, 1, 1, 5, 4), (0, 2, 3, 4, 1)))
    tests = (
        ("test_transpose_with_squeeze1", squeeze1, lambda r: [0], 1),
        ("test_transpose_with_squeeze2", squeeze2, lambda r: [1], 1),
        ("test_transpose_with_squeeze3", squeeze3, lambda r: [r - 1], 0),
        ("test_transpose_with_squeeze4", squeeze4, lambda r: [1, r - 1], 0),
    )
    for test, rows, axes_of, expected in tests:
        for i, (shape, perm) in enumerate(rows):
            axes = axes_of(len(shape))
            y = _perm(shape, perm)
            z = _t("float", [d for k, d in enumerate(y) if k not in axes])
            # check_opset_max_version(12): axes is an attribute.
            yield case(f"tf2onnx-{test}_{i}", f"""
            g ({_t("float", shape)} X) => ({z} Z) {{
                Y = Transpose <perm = {_ints(perm)}> (X)
                Z = Squeeze <axes = {_ints(axes)}> (Y)
            }}""", expected, opset=12)
            yield case(f"tf2onnx-{test}_13_{i}", f"""
            g ({_t("float", shape)} X) => ({z} Z) {{
                Y = Transpose <perm = {_ints(perm)}> (X)
                axes = Constant <value = {_lit("int64", [len(axes)], axes)}> ()
                Z = Squeeze (Y, axes)
            }}""", expected, opset=13)
    unsqueeze = (((1, 3, 4), (1, 4, 1, 3, 1, 1), (2, 0, 1), (0, 4, 5)),
                 ((1, 3, 4, 5), (1, 1, 4, 5, 1, 3, 1), (0, 2, 3, 1), (0, 4, 6)),
                 ((1, 3, 4, 5, 6), (1, 1, 4, 5, 1, 6, 1, 3), (0, 2, 3, 4, 1), (0, 4, 6)))
    for i, (shape, out, perm, axes) in enumerate(unsqueeze):
        yield case(f"tf2onnx-test_transpose_with_unsqueeze_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", out)} Z) {{
            axes = Constant <value = {_lit("int64", [len(axes)], axes)}> ()
            Y = Transpose <perm = {_ints(perm)}> (X)
            Z = Unsqueeze (Y, axes)
        }}""", 1)


def _tf_with_loop() -> Iterator[ParameterSet]:
    rows = (((10, 3, 4), (0, 2, 1), (0, 2, 1)),
            ((10, 3, 4, 5), (0, 2, 3, 1), (0, 3, 1, 2)),
            ((10, 3, 4, 5, 6), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)))
    for i, (shape, p_in, p_out) in enumerate(rows):
        scan = _perm(shape, p_in)[1:]  # one slice, transposed, its leading 1 squeezed
        # The body's iteration number is a scalar; the peer gathers with a 1-element index, so
        # the port unsqueezes it first.
        yield case(f"tf2onnx-test_transpose_with_loop_{i}", f"""
        g ({_t("float", shape)} array) => ({_t("float", shape)} Y) {{
            trip_cnt = Constant <value = int64 {{10}}> ()
            cond = Constant <value = bool {{1}}> ()
            loop_carried, scan_out = Loop (trip_cnt, cond, cond) <body = loop_subgraph (
                int64 loop_iter_num, bool loop_condition, bool loop_carried_in)
                => (bool loop_cond_output, bool loop_carried_output,
                    {_t("float", scan)} scan_output) {{
                zero = Constant <value = int64[1] {{0}}> ()
                index = Unsqueeze (loop_iter_num, zero)
                Y0 = Gather (array, index)
                Z0 = Transpose <perm = {_ints(p_in)}> (Y0)
                axes_const = Constant <value = int64[1] {{0}}> ()
                scan_output = Squeeze (Z0, axes_const)
                loop_cond_output = Identity (loop_condition)
                loop_carried_output = Identity (loop_condition)
            }}>
            Y = Transpose <perm = {_ints(p_out)}> (scan_out)
        }}""", 0)


def _tf_sub() -> Iterator[ParameterSet]:
    rows = (((2, 3, 4), (4, 2, 3), (2, 0, 1), (1, 2, 0)),
            ((2, 3, 4, 5), (2, 4, 5, 3), (0, 2, 3, 1), (0, 3, 1, 2)),
            ((2, 3, 4, 5, 6), (2, 4, 5, 6, 3), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)))
    for i, (io, base, p_in, p_out) in enumerate(rows):
        for first in (True, False):
            for k in range(len(base)):
                const = base[k:]
                operands = "Y, const" if first else "const, Y"
                yield case(
                    f"tf2onnx-test_trans_with_sub_{i}-{'trans_first' if first else 'const_first'}"
                    f"-{'x'.join(map(str, const))}", f"""
                g ({_t("float", io)} X) => ({_t("float", io)} res) {{
                    Y = Transpose <perm = {_ints(p_in)}> (X)
                    const = Constant <value = {_rand("float", const)}> ()
                    Z = Sub ({operands})
                    res = Transpose <perm = {_ints(p_out)}> (Z)
                }}""", 0)
    for i, (io, base, p_in, p_out) in enumerate(rows[1:]):
        for first in (True, False):
            for k in range(len(base) - 1):
                shape = base[k:]
                operands = "Y, non_const" if first else "non_const, Y"
                yield case(
                    f"tf2onnx-test_trans_with_sub_input_non_const_{i}"
                    f"-{'trans_first' if first else 'input_first'}-{'x'.join(map(str, shape))}",
                    f"""
                g ({_t("float", io)} X, {_t("float", shape)} non_const)
                    => ({_t("float", io)} res) {{
                    Y = Transpose <perm = {_ints(p_in)}> (X)
                    Z = Sub ({operands})
                    res = Transpose <perm = {_ints(p_out)}> (Z)
                }}""", 1)


def _tf_add_with_inputs() -> Iterator[ParameterSet]:
    non_const = (((1, 1, 3, 3), (0, 2, 3, 1), (0, 3, 1, 2)),
                 ((1, 1, 3, 3, 3), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)))
    for i, (shape, p_in, p_out) in enumerate(non_const):
        yield case(f"tf2onnx-test_transpose_add_with_input_non_const_{i}", f"""
        g ({_t("float", shape)} X, {_t("float", _perm(shape, p_in))} A)
            => ({_t("float", shape)} res) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Add (Y, A)
            res = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)
    const_rows = (((2, 3, 4), (2, 0, 1), (1, 2, 0)),) + non_const
    for i, (shape, p_in, p_out) in enumerate(const_rows):
        yield case(f"tf2onnx-test_transpose_add_with_input_const_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", shape)} res) {{
            const_1 = Constant <value = {_rand("float", _perm(shape, p_in))}> ()
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Add (Y, const_1)
            res = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)


def _tf_with_conv() -> Iterator[ParameterSet]:
    perms = {4: ((0, 2, 3, 1), (0, 3, 1, 2)), 5: ((0, 2, 3, 4, 1), (0, 4, 1, 2, 3))}
    add_rows = (
        ("test_transpose_add_with_conv_1", (1, 5, 3, 3), (16, 5, 3, 3), (1, 16, 1, 1),
         (1, 1, 1, 16)),
        ("test_transpose_add_with_conv_1", (1, 5, 3, 3, 3), (16, 5, 3, 3, 3), (1, 16, 1, 1, 1),
         (1, 1, 1, 1, 16)),
        ("test_transpose_add_with_conv_2", (1, 1, 5, 5), (1, 1, 3, 3), (1, 1, 3, 3), (1, 3, 3, 1)),
        ("test_transpose_add_with_conv_2", (1, 1, 5, 5, 5), (1, 1, 3, 3, 3), (1, 1, 3, 3, 3),
         (1, 3, 3, 3, 1)),
    )
    for n, (test, x, w, out, b) in enumerate(add_rows):
        p_in, p_out = perms[len(x)]
        pads = _ints([0] * 2 * (len(x) - 2))
        yield case(f"tf2onnx-{test}_{n % 2}", f"""
        g ({_t("float", x)} x, {_t("float", w)} W) => ({_t("float", out)} res) {{
            const_b = Constant <value = {_rand("float", b)}> ()
            X = Conv <pads = {pads}> (x, W)
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Add (Y, const_b)
            res = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)
    mul_rows = (
        ((1, 1, 5, 5), (1, 1, 3, 3), (1, 1, 3, 3), (1, 3, 1, 1)),
        ((1, 1, 5, 5, 5), (1, 1, 3, 3, 3), (1, 1, 3, 3, 3), (1, 3, 1, 1, 1)),
        ((1, 1, 5, 5), (1, 1, 3, 3), (3, 3, 3, 3), (3, 1, 3, 3)),
        ((1, 1, 5, 5, 5), (1, 1, 3, 3, 3), (3, 3, 3, 3, 3), (3, 3, 1, 3, 3)),
        ((1, 1, 5, 5), (1, 1, 3, 3), (1, 3, 3, 3), (1, 1, 3, 3)),
        ((1, 1, 5, 5, 5), (1, 1, 3, 3, 3), (1, 3, 3, 3, 3), (1, 3, 1, 3, 3)),
    )
    for i, (x, w, out, b) in enumerate(mul_rows):
        p_in, p_out = perms[len(x)]
        # The peer's own formula: a per-channel constant merges into the Conv, others leave one.
        expected = 1 if b[0] != 1 or any(d != 1 for d in b[2:]) else 0
        yield case(f"tf2onnx-test_transpose_mul_with_conv_{i}", f"""
        g ({_t("float", x)} x) => ({_t("float", out)} res) {{
            const_b = Constant <value = {_rand("float", b, 1)}> ()
            const_w = Constant <value = {_rand("float", w, 2)}> ()
            X = Conv <pads = {_ints([0] * 2 * (len(x) - 2))}> (x, const_w)
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Mul (Y, const_b)
            res = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", expected)


def _tf_pad() -> Iterator[ParameterSet]:
    rows = (((3, 4, 5), (8, 4, 6), (1, 3, 0, 0, 2, 0), (2, 0, 1), (1, 2, 0)),
            ((1, 3, 4, 5), (2, 6, 4, 8), (1, 0, 1, 3, 0, 0, 2, 0), (0, 2, 3, 1), (0, 3, 1, 2)),
            ((1, 3, 4, 5, 6), (2, 5, 6, 8, 10), (1, 0, 1, 3, 1, 0, 2, 2, 1, 1), (0, 2, 3, 4, 1),
             (0, 4, 1, 2, 3)))
    for i, (shape, out, pads, p_in, p_out) in enumerate(rows):
        # check_opset_max_version(10): pads is an attribute.
        yield case(f"tf2onnx-test_transpose_pad_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", out)} res) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Pad <pads = {_ints(pads)}> (Y)
            res = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0, opset=10)
        yield case(f"tf2onnx-test_transpose_pad11_{i}", f"""
        g ({_t("float", shape)} X) => ({_t("float", out)} res) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Pads = Constant <value = {_lit("int64", [len(pads)], pads)}> ()
            Z = Pad (Y, Pads)
            res = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0)
        yield case(f"tf2onnx-test_transpose_pad11_non_const_pads_{i}", f"""
        g ({_t("float", shape)} X, int64[{len(pads)}] Pads) => ({_t("float", out)} res) {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            Z = Pad (Y, Pads)
            res = Transpose <perm = {_ints(p_out)}> (Z)
        }}""", 0, pinned={"Pads": np.array(pads)})


def _reduced(shape: Shape, axes: Sequence[int], keepdims: bool) -> list[int | str]:
    rank = len(shape)
    axes = {a % rank for a in axes}
    if keepdims:
        return [1 if k in axes else d for k, d in enumerate(shape)]
    return [d for k, d in enumerate(shape) if k not in axes]


def _tf_reduce() -> Iterator[ParameterSet]:
    mean_rows = (((3, 4, 5), (1,), (0, 2, 1), (0, 2, 1)),
                 ((1, 3, 4, 5), (1, 2), (0, 2, 3, 1), (0, 3, 1, 2)),
                 ((1, 3, 4, 5, 6), (1, 2, 3), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)))
    sum_rows = (((3, 4, 5), (1,), (0, 2, 1), (0, 2, 1)),
                ((1, 3, 4, 5), (2,), (0, 2, 3, 1), (0, 3, 1, 2)),
                ((1, 3, 4, 5), (1, 2), (0, 2, 3, 1), (0, 3, 1, 2)),
                ((1, 3, 4, 5), (0, 1, 2, 3), (0, 2, 3, 1), (0, 3, 1, 2)),
                ((1, 3, 4, 5, 6), (1,), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)),
                ((1, 3, 4, 5, 6), (1, 2, 3), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)),
                ((1, 3, 4, 5, 6), (0, 1, 2, 3, 4), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)))
    max_rows = (((1, 3, 4, 5), (2,), (0, 2, 3, 1), (0, 2, 1)),
                ((1, 3, 4, 5), (1, 2), (0, 2, 3, 1), (0, 1)),
                ((1, 3, 4, 5), (0, 1, 2, 3), (0, 2, 3, 1), ()),
                ((1, 3, 4, 5, 6), (1,), (0, 2, 3, 4, 1), (0, 3, 1, 2)),
                ((1, 3, 4, 5, 6), (1, 2, 3), (0, 2, 3, 4, 1), (0, 1)),
                ((1, 3, 4, 5, 6), (0, 1, 2, 3, 4), (0, 2, 3, 4, 1), ()))

    def one(case_id: str, op: str, shape: Shape, axes: Sequence[int], p_in: Sequence[int],
            p_out: Sequence[int], keepdims: int, opset: int, axes_input: bool) -> ParameterSet:
        z = _reduced(_perm(shape, p_in), axes, bool(keepdims))
        res = _perm(z, p_out) if p_out else z
        last = (f"res = Transpose <perm = {_ints(p_out)}> (Z)" if p_out else "res = Identity (Z)")
        if axes_input:
            inits = f" <{_init('int64', axes, 'axes')}>"
            reduce = f"Z = {op} <keepdims = {keepdims}> (Y, axes)"
        else:
            inits = ""
            reduce = f"Z = {op} <axes = {_ints(axes)}, keepdims = {keepdims}> (Y)"
        return case(case_id, f"""
        g ({_t("float", shape)} X) => ({_t("float", res)} res){inits} {{
            Y = Transpose <perm = {_ints(p_in)}> (X)
            {reduce}
            {last}
        }}""", 0, opset=opset)

    for i, (shape, axes, p_in, p_out) in enumerate(mean_rows):
        yield one(f"tf2onnx-test_transpose_reducemean_{i}", "ReduceMean", shape,
                  range(1, len(shape) - 1), p_in, p_out, 1, 15, False)
        yield one(f"tf2onnx-test_transpose_reducemean_18_{i}", "ReduceMean", shape, axes, p_in,
                  p_out, 1, 18, True)
        yield one(f"tf2onnx-test_transpose_reducemax_18_{i}", "ReduceMax", shape, axes, p_in,
                  p_out, 1, 18, True)
    for i, (shape, axes, p_in, p_out) in enumerate(sum_rows):
        # check_opset_max_version(12): axes is an attribute.
        yield one(f"tf2onnx-test_transpose_reducesum_{i}", "ReduceSum", shape, axes, p_in, p_out,
                  1, 12, False)
        yield one(f"tf2onnx-test_transpose_reducesum_opset_13_{i}", "ReduceSum", shape, axes,
                  p_in, p_out, 1, 15, True)
    for i, (shape, axes, p_in, p_out) in enumerate(max_rows):
        yield one(f"tf2onnx-test_transpose_reducemax_{i}", "ReduceMax", shape, axes, p_in, p_out,
                  0, 15, False)


def _tf_argmax_softmax_tile() -> Iterator[ParameterSet]:
    yield case("tf2onnx-test_transpose_argmax", """
    g (float[1, 2, 3, 4] X) => (int32[1, 3, 4] res) {
        Y = Transpose <perm = [0, 2, 3, 1]> (X)
        Z = ArgMax <axis = 3, keepdims = 0> (Y)
        res = Cast <to = 6> (Z)
    }""", 0)
    for op in ("Softmax", "LogSoftmax"):
        name = op.lower()
        for suffix, axis, expected, opset in (("valid_perm", 1, 0, 12), ("invalid_perm", 3, 2, 12),
                                              ("13", 3, 0, 15)):
            # Before opset 13 the op flattens its input to 2-D at `axis`.
            yield case(f"tf2onnx-test_transpose_{name}_{suffix}", f"""
            g (float[4, 4, 4, 4] X) => (float[4, 4, 4, 4] res) {{
                Y = Transpose <perm = [0, 2, 3, 1]> (X)
                Z = {op} <axis = {axis}> (Y)
                res = Transpose <perm = [0, 3, 1, 2]> (Z)
            }}""", expected, opset=opset)
    yield case("tf2onnx-test_transpose_tile", """
    g (float[1, 2, 3, 4] X) => (float[3, 22, 18, 20] res) {
        A = Constant <value = int64[4] {3, 6, 5, 11}> ()
        Y = Transpose <perm = [0, 2, 3, 1]> (X)
        Z = Tile (Y, A)
        res = Transpose <perm = [0, 3, 1, 2]> (Z)
    }""", 0)


def _tf_reshape_like() -> Iterator[ParameterSet]:
    nhwc = (((2, 3, 4, 1), (2, 3, 4, 1)), ((2, 1, 1, 4), (2, 1, 1, 4)),
            ((2, 3, 4, 1), (2, "H", "W", 1)), ((2, 3, 4, 2, 1), (2, 3, 4, 2, 1)),
            ((2, 1, 1, 1, 4), (2, 1, 1, 1, 4)), ((2, 3, 4, 2, 1), (2, "D", "H", "W", 1)))
    nchw = (((2, 1, 3, 4), (2, 1, 3, 4)), ((2, 4, 1, 1), (2, 4, 1, 1)),
            ((2, 1, 3, 4), (2, 1, "H", "W")), ((2, 1, 3, 4, 2), (2, 1, 3, 4, 2)),
            ((2, 4, 1, 1, 1), (2, 4, 1, 1, 1)), ((2, 1, 3, 4, 2), (2, 1, "D", "H", "W")))
    for test, rows, perms in (
        ("test_trans_can_be_replaced_with_reshape1", nhwc,
         {4: (0, 3, 1, 2), 5: (0, 4, 1, 2, 3)}),
        ("test_trans_can_be_replaced_with_reshape2", nchw,
         {4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}),
    ):
        for i, (values, shape) in enumerate(rows):
            perm = perms[len(shape)]
            dims = {str(d): v for d, v in zip(shape, values) if isinstance(d, str)}
            yield case(f"tf2onnx-{test}_{i}", f"""
            g ({_t("float", shape)} X) => ({_t("float", _perm(shape, perm))} Y) {{
                Y = Transpose <perm = {_ints(perm)}> (X)
            }}""", 0, dims=dims)


def _tf_switch() -> Iterator[ParameterSet]:
    rows = (((1, 6, 8), (2, 0, 1), (1, 2, 0)),
            ((1, 6, 8, 9), (0, 2, 3, 1), (0, 3, 1, 2)),
            ((1, 6, 8, 9, 2), (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)))
    for i, (shape, p_in, p_out) in enumerate(rows):
        yield case(f"tf2onnx-test_two_transposes_switch_with_mul_{i}", f"""
        g ({_t("float", shape)} u1, {_t("float", shape)} u2) => ({_t("float", shape)} res) {{
            const_10 = Constant <value = {_rand("float", (6,))}> ()
            v1 = Transpose <perm = {_ints(p_in)}> (u1)
            v2 = Transpose <perm = {_ints(p_in)}> (u2)
            x = Mul (v1, v2)
            y = Mul (x, const_10)
            res = Transpose <perm = {_ints(p_out)}> (y)
        }}""", 0)
    for i, (shape, p_in, p_out) in enumerate(rows[1:]):
        yield case(f"tf2onnx-test_many_transposes_and_constant_switch_with_sum_{i}", f"""
        g ({_t("float", shape)} u1, {_t("float", shape)} u2, {_t("float", shape)} u3)
            => ({_t("float", shape)} res) {{
            v4 = Constant <value = {_rand("float", _perm(shape, p_in))}> ()
            v1 = Transpose <perm = {_ints(p_in)}> (u1)
            v2 = Transpose <perm = {_ints(p_in)}> (u2)
            v3 = Transpose <perm = {_ints(p_in)}> (u3)
            x = Sum (v1, v2, v3, v4)
            y = Sum (x, v1)
            res = Transpose <perm = {_ints(p_out)}> (y)
        }}""", 0)


def _tf_const_and_back_to_back() -> Iterator[ParameterSet]:
    const = _rand("float", (6, 6))
    yield case("tf2onnx-test_const_fold_trans_with_const1", f"""
    g (float[6, 6] X) => (float[6, 6] res) {{
        const = Constant <value = {const}> ()
        value1 = Transpose (const)
        res = Add (value1, X)
    }}""", 0)
    yield case("tf2onnx-test_const_fold_trans_with_const2", f"""
    g (float[6, 6] X) => (float[6, 6] res) {{
        const = Constant <value = {const}> ()
        value1 = Transpose (const)
        value2 = Transpose (value1)
        res = Add (value2, X)
    }}""", 0)
    yield case("tf2onnx-test_const_fold_node_is_output", f"""
    g () => (float[6, 6] res) {{
        const = Constant <value = {const}> ()
        value1 = Transpose (const)
        res = Transpose (value1)
    }}""", 0)
    yield case("tf2onnx-test_transpose_back_to_back_non_const", """
    g (float[5, 5, 5, 5] u) => (float[5, 5, 5, 5] res) {
        v = Transpose <perm = [0, 2, 3, 1]> (u)
        w = Transpose <perm = [0, 3, 1, 2]> (v)
        x = Transpose <perm = [0, 3, 2, 1]> (w)
        res = Transpose <perm = [1, 3, 0, 2]> (x)
    }""", 1)


TF2ONNX_CASES: list[ParameterSet] = [
    *_tf_with_concat(),
    *_tf_with_split(),
    *_tf_split_variants(),
    *_tf_unary("test_transpose_abs", "Abs"),
    *_tf_binary_with_channel_input("test_transpose_with_add1", "Add"),
    *_tf_with_add2(),
    *_tf_unary("test_transpose_relu", "Relu"),
    *_tf_unary("test_transpose_leaky_relu", "LeakyRelu <alpha = 0.02>"),
    *_tf_binary_with_channel_input("test_transpose_with_prelu", "PRelu"),
    *_tf_quantize(),
    *_tf_slice(),
    *_tf_max(),
    *_tf_mul_and_friends(),
    *_tf_unary("test_transpose_sqrt", "Sqrt"),
    *_tf_squeeze(),
    *_tf_with_loop(),
    *_tf_sub(),
    *_tf_add_with_inputs(),
    *_tf_with_conv(),
    *_tf_unary("test_transpose_neg", "Neg"),
    *_tf_pad(),
    *_tf_unary("test_transpose_reciprocal", "Reciprocal"),
    *_tf_reduce(),
    *_tf_argmax_softmax_tile(),
    *_tf_reshape_like(),
    *_tf_switch(),
    *_tf_const_and_back_to_back(),
]


# ================================================================================ ORT cases
def _ort_split_concat_pad() -> Iterator[ParameterSet]:
    for test, axis in (("TestSplit", 1), ("TestSplitDefaultAxis", None),
                       ("TestSplitNegativeAxis", 1)):  # the peer's "negative" case uses axis 1
        piece = (6, 5, 4) if axis == 1 else (3, 10, 4)
        out = _t("float", _perm(piece, (2, 0, 1)))
        for opset in (15, 18):
            attrs = ([f"axis = {axis}"] if axis is not None else []) + (
                ["num_outputs = 2"] if opset >= 18 else [])
            split = f"Split <{', '.join(attrs)}>" if attrs else "Split"
            yield case(f"ort-{test}-opset{opset}", f"""
            g (float[4, 6, 10] x) => ({out} y0, {out} y1) {{
                t = Transpose <perm = [1, 2, 0]> (x)
                s0, s1 = {split} (t)
                y0 = Transpose <perm = [2, 0, 1]> (s0)
                y1 = Transpose <perm = [2, 0, 1]> (s1)
            }}""", 0, opset=opset)
    yield case("ort-TestConcat", """
    g (float[4, 6, 2, 10] x0, float[4, 7, 2, 10] x1) => (float[4, 13, 2, 10] y) {
        t0 = Transpose <perm = [0, 3, 1, 2]> (x0)
        t1 = Transpose <perm = [0, 3, 1, 2]> (x1)
        c = Concat <axis = 2> (t0, t1)
        y = Transpose <perm = [0, 2, 3, 1]> (c)
    }""", 0)
    pads = "{1, -2, 3, 4, 5, 6, 7, 8}"
    yield case("ort-TestPad-opset10", """
    g (float[4, 6, 2, 10] x) => (float[10, 16, 14, 14] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        p = Pad <mode = "constant", value = 2.3, pads = [1, -2, 3, 4, 5, 6, 7, 8]> (t)
        y = Transpose <perm = [0, 2, 3, 1]> (p)
    }""", 0, opset=10)
    yield case("ort-TestPad-opset18", f"""
    g (float[4, 6, 2, 10] x) => (float[10, 16, 14, 14] y)
        <int64[8] pads = {pads}, float[1] value = {{2.3}}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        p = Pad <mode = "constant"> (t, pads, value)
        y = Transpose <perm = [0, 2, 3, 1]> (p)
    }}""", 0, opset=18)
    yield case("ort-TestPadOpset15", f"""
    g (float[4, 6, 2, 10] x) => (float[10, 16, 14, 14] y)
        <int64[8] pads = {pads}, float value = {{2.3}}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        p = Pad <mode = "constant"> (t, pads, value)
        y = Transpose <perm = [0, 2, 3, 1]> (p)
    }}""", 0)
    for opset in (11, 18):
        # pads = input1 + const with the peer's input1: {1, 0, 0, 1, 0, 0, -1, 1}
        yield case(f"ort-TestPadNonconst-opset{opset}", f"""
        g (float[4, 6, 2, 10] x, int64[8] input1) => (float[11, 15, 16, 14] y)
            <int64[8] const_1 = {pads}, float const_2 = {{2.3}}> {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            pads = Add (input1, const_1)
            p = Pad <mode = "constant"> (t, pads, const_2)
            y = Transpose <perm = [0, 2, 3, 1]> (p)
        }}""", 0, opset=opset, pinned={"input1": np.array([1, 0, 0, 1, 0, 0, -1, 1])})


def _ort_resize() -> Iterator[ParameterSet]:
    scales = "float[4] scales = {0.3, 2.5, 1.0, 0.7}"
    out = "float[1, 6, 1, 25]"  # floor([4, 10, 6, 2] * scales), transposed back
    yield case("ort-TestResize-opset10", f"""
    g (float[4, 6, 2, 10] x) => ({out} y) <{scales}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Resize (t, scales)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }}""", 0, opset=10)
    yield case("ort-TestResize-opset18", f"""
    g (float[4, 6, 2, 10] x) => ({out} y) <{scales}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Resize (t, , scales)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }}""", 0, opset=18)
    yield case("ort-TestResizeOpset11", f"""
    g (float[4, 6, 2, 10] x) => ({out} y)
        <float[8] roi = {{0, 0, 0, 0, 0, 0, 0, 0}}, {scales}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Resize (t, roi, scales)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }}""", 0, opset=11)
    yield case("ort-TestResizeOpset15", f"""
    g (float[4, 6, 2, 10] x) => ({out} y) <{scales}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Resize (t, , scales)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }}""", 0)
    yield case("ort-TestResizeSizeRoi", """
    g (float[4, 6, 2, 10] x) => (float[10, 8, 7, 9] y)
        <float[8] roi = {0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7, 0.6}, int64[4] sizes = {10, 9, 8, 7}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Resize <coordinate_transformation_mode = "tf_crop_and_resize"> (t, roi, , sizes)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""", 0)
    yield case("ort-TestResizeRoiScalesZeroRank0", """
    g (uint8[1, 512, 512, 3] x) => (uint8[1, 32, 32, 256] y)
        <float[0] roi = {}, float[0] scales = {}, int64[4] sizes = {1, 256, 32, 32}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Resize (t, roi, scales, sizes)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""", 0, opset=12)
    for test, opset in (("TestResizeNonconst-opset11", 11), ("TestResizeNonconst-opset18", 18),
                        ("TestResizeNonconstOpset13", 13)):
        yield case(f"ort-{test}", f"""
        g (float[4, 6, 2, 10] x, float[8] roi, float[4] scales) => ({out} y) {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            r = Resize <coordinate_transformation_mode = "tf_crop_and_resize"> (t, roi, scales)
            y = Transpose <perm = [0, 2, 3, 1]> (r)
        }}""", 0, opset=opset, pinned={
            "roi": np.array([0.1, 0.2, 0.3, 0.4, 0.9, 0.8, 0.7, 0.6]),
            "scales": np.array([0.3, 2.5, 1.0, 0.7])})


def _ort_add_shape() -> Iterator[ParameterSet]:
    yield case("ort-TestAdd", """
    g (float[4, 6, 10] x) => (float[4, 6, 10] y) <float c = {3.2}> {
        t = Transpose <perm = [1, 2, 0]> (x)
        a = Add (t, c)
        y = Transpose <perm = [2, 0, 1]> (a)
    }""", 0)
    shape_tests = (
        ("TestShape-opset7", "", 3, 7), ("TestShape-opset15", "", 3, 15),
        ("TestShapeOpset15", "", 3, 15), ("TestShapeSliceNoStart", " <end = 5>", 3, 15),
        ("TestShapeSliceNegativeEnd", " <end = -1>", 2, 15),
        ("TestShapeSliceNegativeStartNoEnd", " <start = -30>", 3, 15),
        ("TestShapeSliceStartAndEnd", " <start = 1, end = 2>", 1, 15),
        ("TestShapeSliceEmptyResult", " <start = 2, end = 1>", 0, 15),
    )
    for test, attrs, length, opset in shape_tests:
        yield case(f"ort-{test}", f"""
        g (float[4, 6, 10] x) => (int64[{length}] y) {{
            t = Transpose <perm = [1, 2, 0]> (x)
            y = Shape{attrs} (t)
        }}""", 0, opset=opset)


_X4 = "float[2, 4, 6, 5] x"  # ORT's reduce input; Transpose(0, 3, 1, 2) makes it [2, 5, 4, 6]


def _ort_reduce_sum() -> Iterator[ParameterSet]:
    def reduce(test: str, opset: int, *, axes: Sequence[int] | None, keepdims: int,
               noop: int | None = None, axes_as_input: bool, out: str, last: str | None,
               ) -> ParameterSet:
        attrs = [f"keepdims = {keepdims}"] + ([f"noop_with_empty_axes = {noop}"]
                                             if noop is not None else [])
        inits = ""
        operands = "t"
        if axes is not None and axes_as_input:
            inits = f" <{_init('int64', axes, 'axes')}>"
            operands = "t, axes"
        elif axes is not None:
            attrs.insert(0, f"axes = {_ints(axes)}")
        if last is None:
            body = f"y = ReduceSum <{', '.join(attrs)}> ({operands})"
        else:
            body = (f"r = ReduceSum <{', '.join(attrs)}> ({operands})\n"
                    f"            y = Transpose <perm = {last}> (r)")
        return case(f"ort-{test}", f"""
        g ({_X4}) => ({out} y){inits} {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            {body}
        }}""", 0, opset=opset)

    # Where all axes are reduced with keepdims=1 the result is [1, 1, 1, 1]: ORT leaves a Transpose
    # of it, of cost 0 (it moves no data), which these rows read as none.
    keep = {"out": "float[1, 1, 6, 5]", "last": "[0, 2, 3, 1]"}
    drop = {"out": "float[6, 5]", "last": "[1, 0]"}
    for opset in (7, 18):
        old = opset < 13
        yield reduce(f"TestReduceSumKeepdimsTrue-opset{opset}", opset, axes=(0, -2), keepdims=1,
                     axes_as_input=not old, **keep)
        yield reduce(f"TestReduceSumEmptyAxesKeepdimsTrue-opset{opset}", opset, axes=None,
                     keepdims=1, axes_as_input=False, out="float[1, 1, 1, 1]", last=None)
        yield reduce(f"TestReduceSumKeepdimsFalse-opset{opset}", opset, axes=(0, -2), keepdims=0,
                     axes_as_input=not old, **drop)
        yield reduce(f"TestReduceSumEmptyAxesKeepdimsFalse-opset{opset}", opset, axes=None,
                     keepdims=0, axes_as_input=False, out="float", last=None)
    yield reduce("TestReduceSumKeepdimsTrueOpset15", 15, axes=(0, -2), keepdims=1,
                 axes_as_input=True, **keep)
    yield reduce("TestReduceSumEmptyAxesKeepdimsTrueOpset15", 15, axes=(), keepdims=1,
                 axes_as_input=True, out="float[1, 1, 1, 1]", last=None)
    yield reduce("TestReduceSumEmptyAxesKeepdimsTrueNoopEmptyTrueOpset15", 15, axes=(),
                 keepdims=1, noop=1, axes_as_input=True, out="float[2, 4, 6, 5]",
                 last="[0, 2, 3, 1]")
    yield reduce("TestReduceSumEmptyAxesKeepdimsTrueNoopEmptyFalseOpset15", 15, axes=(),
                 keepdims=1, noop=0, axes_as_input=True, out="float[1, 1, 1, 1]", last=None)
    yield reduce("TestReduceSumNoAxesInputOpset15", 15, axes=None, keepdims=1, noop=0,
                 axes_as_input=True, out="float[1, 1, 1, 1]", last=None)
    yield reduce("TestReduceSumKeepdimsFalseOpset15", 15, axes=(0, -2), keepdims=0,
                 axes_as_input=True, **drop)
    yield reduce("TestReduceSumEmptyAxesKeepdimsFalseOpset15", 15, axes=(), keepdims=0,
                 axes_as_input=True, out="float", last=None)
    yield reduce("TestReduceSumEmptyAxesKeepdimsFalseNoopEmptyTrueOpset15", 15, axes=(),
                 keepdims=0, noop=1, axes_as_input=True, out="float[2, 4, 6, 5]",
                 last="[0, 2, 3, 1]")
    yield reduce("TestReduceSumEmptyAxesKeepdimsFalseNoopEmptyFalseOpset15", 15, axes=(),
                 keepdims=0, noop=0, axes_as_input=True, out="float", last=None)
    yield reduce("TestReduceSumNoAxesInput_2Opset15", 15, axes=None, keepdims=0, noop=0,
                 axes_as_input=True, out="float", last=None)
    for keepdims, out in ((1, "float[2, 5, 1, 1]"), (0, "float[2, 5]")):
        # NoOpt: axes computed at run time (input1 = -1, the peer's value): both stay.
        name = f"TestReduceSumNonconstKeepdims{'True' if keepdims else 'False'}NoOptOpset13"
        yield case(f"ort-{name}", f"""
        g ({_X4}, int64 input1) => ({out} y) <int64[2] const_1 = {{0, -1}}> {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            axes = Add (input1, const_1)
            y = ReduceSum <keepdims = {keepdims}> (t, axes)
        }}""", 1, opset=13, pinned={"input1": np.array(-1)})


def _ort_reduce_others() -> Iterator[ParameterSet]:
    def reduce(test: str, op: str, opset: int, *, axes: bool, keepdims: int | None,
               out: str, last: str | None) -> ParameterSet:
        attrs = [] if keepdims is None else [f"keepdims = {keepdims}"]
        inits = ""
        operands = "t"
        if axes and opset >= 18:
            inits = " <int64[2] axes = {0, -2}>"
            operands = "t, axes"
        elif axes:
            attrs.insert(0, "axes = [0, -2]")
        node = f"{op} <{', '.join(attrs)}>" if attrs else op
        body = (f"y = {node} ({operands})" if last is None else
                f"r = {node} ({operands})\n            y = Transpose <perm = {last}> (r)")
        return case(f"ort-{test}", f"""
        g ({_X4}) => ({out} y){inits} {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            {body}
        }}""", 0, opset=opset)

    for opset in (15, 18):
        # DefaultAxes with keepdims=1: as for ReduceSum, ORT's cost 0 is a Transpose of the
        # [1, 1, 1, 1] result, read as none.
        s = f"-opset{opset}"
        yield reduce(f"TestReduceMaxKeepdimsTrue{s}", "ReduceMax", opset, axes=True, keepdims=1,
                     out="float[1, 1, 6, 5]", last="[0, 2, 3, 1]")
        yield reduce(f"TestReduceMaxKeepdimsTrueDefaultAxes{s}", "ReduceMax", opset, axes=False,
                     keepdims=1, out="float[1, 1, 1, 1]", last=None)
        yield reduce(f"TestReduceMaxKeepdimsFalse{s}", "ReduceMax", opset, axes=True, keepdims=0,
                     out="float[6, 5]", last="[1, 0]")
        yield reduce(f"TestReduceMaxKeepdimsFalseDefaultAxes{s}", "ReduceMax", opset, axes=False,
                     keepdims=0, out="float", last=None)
        yield reduce(f"TestReduceMax{s}", "ReduceMax", opset, axes=True, keepdims=None,
                     out="float[1, 1, 6, 5]", last="[0, 2, 3, 1]")
        yield reduce(f"TestReduceMaxDefaultAxes{s}", "ReduceMax", opset, axes=False,
                     keepdims=None, out="float[1, 1, 1, 1]", last=None)
        for op in ("ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
                   "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2"):
            yield reduce(f"TestReduceOps{op}{s}", op, opset, axes=True, keepdims=0,
                         out="float[6, 5]", last="[1, 0]")
    for opset in (15, 18):
        inits, reduce_node = ((" <int64[1] axes = {1}>", "ReduceMax <keepdims = 0> (t, axes)")
                              if opset >= 18 else ("", "ReduceMax <axes = [1], keepdims = 0> (t)"))
        yield case(f"ort-TestOmitIdentityTranspose-opset{opset}", f"""
        g ({_X4}) => (float[2, 4, 6] y){inits} {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            y = {reduce_node}
        }}""", 0, opset=opset)


def _ort_squeeze_unsqueeze() -> Iterator[ParameterSet]:
    # x [1, 4, 1, 2] -> Transpose(0, 3, 1, 2) -> [1, 2, 4, 1] -> Squeeze -> [2, 4]
    for test, opset, node, inits in (
        ("TestSqueezeOpset7", 7, "Squeeze <axes = [0, 3]> (t)", ""),
        ("TestSqueezeOpset11", 11, "Squeeze <axes = [0, -1]> (t)", ""),
        ("TestSqueezeOpset15", 15, "Squeeze (t, axes)", " <int64[2] axes = {0, -1}>"),
    ):
        yield case(f"ort-{test}", f"""
        g (float[1, 4, 1, 2] x) => (float[4, 2] y){inits} {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            s = {node}
            y = Transpose <perm = [1, 0]> (s)
        }}""", 0, opset=opset)
    for test, opset in (("TestSqueezeEmptyNoOpt-opset7", 7), ("TestSqueezeEmptyNoOpt-opset18", 18),
                        ("TestSqueezeEmptyNoOptOpset15", 15)):
        yield case(f"ort-{test}", """
        g (float[1, 4, 1, 2] x) => (float[2, 4] y) {
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            y = Squeeze (t)
        }""", 1, opset=opset)
    yield case("ort-TestSqueezeNonconstNoOpt", """
    g (float[1, 4, 1, 2] x, int64[?] axes) => (float[2, 4] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        y = Squeeze (t, axes)
    }""", 1, pinned={"axes": np.array([0, -1])})
    # x [2, 4, 6, 5] -> [2, 5, 4, 6] -> Unsqueeze -> [1, 2, 5, 4, 1, 1, 6, 1]
    out = "float[1, 2, 4, 6, 1, 1, 5, 1]"
    for test, opset, node, inits in (
        ("TestUnsqueezeOpset7", 7, "Unsqueeze <axes = [0, 4, 7, 5]> (t)", ""),
        ("TestUnsqueezeOpset11", 11, "Unsqueeze <axes = [0, -4, -1, 5]> (t)", ""),
        ("TestUnsqueezeOpset15", 15, "Unsqueeze (t, axes)", " <int64[4] axes = {0, -4, -1, 5}>"),
    ):
        yield case(f"ort-{test}", f"""
        g (float[2, 4, 6, 5] x) => ({out} y){inits} {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            u = {node}
            y = Transpose <perm = [0, 1, 3, 6, 4, 5, 2, 7]> (u)
        }}""", 0, opset=opset)
    yield case("ort-TestUnsqueezeNonconstNoOpt", """
    g (float[2, 4, 6, 5] x, int64[4] axes) => (float[2, 4, 6, 5, 1, 1, 1, 1] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        u = Unsqueeze (t, axes)
        y = Transpose <perm = [1, 3, 6, 2, 0, 4, 5, 7]> (u)
    }""", 2, opset=14, pinned={"axes": np.array([0, -4, -1, 5])})


def _ort_slice() -> Iterator[ParameterSet]:
    # x [2, 4, 6, 5] -> Transpose(0, 3, 1, 2) -> [2, 5, 4, 6]
    def slice_case(test: str, inits: str, node: str, out: str, expected: int = 0, *,
                   opset: int = 15, inputs: str = "",
                   pinned: Mapping[str, np.ndarray] | None = None) -> ParameterSet:
        return case(f"ort-{test}", f"""
        g (float[2, 4, 6, 5] x{inputs}) => ({out} y){inits} {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            s = {node}
            y = Transpose <perm = [0, 2, 3, 1]> (s)
        }}""", expected, opset=opset, pinned=pinned)

    yield slice_case("TestSlice", "", "Slice <axes = [2], starts = [1], ends = [-1]> (t)",
                     "float[2, 2, 6, 5]", opset=7)
    yield slice_case("TestSliceNoAxes", "",
                     "Slice <starts = [1, -3, 0, 0], ends = [2, 4, 10, 10]> (t)",
                     "float[1, 4, 6, 2]", opset=7)
    for opset in (15, 18):
        s = f"-opset{opset}"
        yield slice_case(f"TestSliceOpset15{s}",
                         " <int64[1] starts = {1}, int64[1] ends = {-1}, int64[1] axes = {2}>",
                         "Slice (t, starts, ends, axes)", "float[2, 2, 6, 5]", opset=opset)
    yield slice_case("TestSliceNoAxesOpset15",
                     " <int64[4] starts = {1, -3, 0, 0}, int64[4] ends = {2, 4, 10, 10}>",
                     "Slice (t, starts, ends)", "float[1, 4, 6, 2]")
    for elem, suffix in (("int32", "Int32"), ("int64", "")):
        yield slice_case(f"TestSliceNegativeAxes{suffix}",
                         f" <{elem}[2] starts = {{1, -3}}, {elem}[2] ends = {{2, 4}},"
                         f" {elem}[2] axes = {{1, -2}}>",
                         "Slice (t, starts, ends, axes)", "float[2, 3, 6, 1]")
        yield slice_case(f"TestSliceSteps{suffix}",
                         f" <{elem}[2] starts = {{1, 4}}, {elem}[2] ends = {{2, -3}},"
                         f" {elem}[2] axes = {{1, -2}}, {elem}[2] steps = {{2, -1}}>",
                         "Slice (t, starts, ends, axes, steps)", "float[2, 2, 6, 1]")
        # NoOpt: axes computed at run time (the peer's {1, -2}).
        yield slice_case(f"TestSliceNonconst{suffix}NoOpt",
                         f" <{elem}[2] starts = {{1, -3}}, {elem}[2] ends = {{2, 4}}>",
                         "Slice (t, starts, ends, axes)", "float[2, 3, 6, 1]", 2,
                         inputs=f", {elem}[2] axes", pinned={"axes": np.array([1, -2])})
        starts = {"starts": np.array([1, -3, 0, 0]), "ends": np.array([2, 4, 10, 10])}
        yield slice_case(f"TestSliceDefaultAxesNonconstStarts{suffix}", "",
                         "Slice (t, starts, ends)", "float[1, 4, 6, 2]",
                         inputs=f", {elem}[4] starts, {elem}[4] ends", pinned=starts)
        # NoOpt: the number of starts is unknown (the peer gives these inputs no shape at all).
        yield slice_case(f"TestSliceDefaultAxesNonconstStartsUnknownLength{suffix}NoOpt", "",
                         "Slice (t, starts, ends)", "float[1, 4, 6, 2]", 2,
                         inputs=f", {elem}[?] starts, {elem}[?] ends", pinned=starts)


def _ort_gather_tile() -> Iterator[ParameterSet]:
    # x [2, 4, 6, 5] -> Transpose(0, 3, 1, 2) -> [2, 5, 4, 6]
    for opset in (13, 18):
        s = f"-opset{opset}"
        yield case(f"ort-TestGatherScalarIndices{s}", """
        g (float[2, 4, 6, 5] x) => (float[2, 6, 5] y) <int64 indices = {2}> {
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            r = Gather <axis = 2> (t, indices)
            y = Transpose <perm = [0, 2, 1]> (r)
        }""", 0, opset=opset)
        yield case(f"ort-TestGatherNegativeAxis{s}", """
        g (float[2, 4, 6, 5] x) => (float[2, 4, 5] y) <int64 indices = {0}> {
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            r = Gather <axis = -1> (t, indices)
            y = Transpose <perm = [0, 2, 1]> (r)
        }""", 0, opset=opset)
        yield case(f"ort-TestGatherRank1IndicesNoOpt{s}", """
        g (float[2, 4, 6, 5] x) => (float[2, 5, 6, 1] y) <int64[1] indices = {2}> {
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            r = Gather <axis = 2> (t, indices)
            y = Transpose <perm = [0, 1, 3, 2]> (r)
        }""", 2, opset=opset)
        yield case(f"ort-TestGatherNonconstIndicesNoOpt{s}", """
        g (float[2, 4, 6, 5] x, int64 indices) => (float[2, 6, 5] y) {
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            r = Gather <axis = 2> (t, indices)
            y = Transpose <perm = [0, 2, 1]> (r)
        }""", 2, opset=opset, pinned={"indices": np.array(2)})
    # x [2, 4, 6, 3] -> [2, 3, 4, 6] -> Tile(1, 2, 1, 3) -> [2, 6, 4, 18] -> [2, 4, 18, 6]
    yield case("ort-TestTile", """
    g (float[2, 4, 6, 3] x) => (float[2, 4, 18, 6] y) <int64[4] repeats = {1, 2, 1, 3}> {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Tile (t, repeats)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""", 0)
    yield case("ort-TestTileNonconstReps", """
    g (float[2, 4, 6, 3] x, int64[?] repeats) => (float[2, 4, 18, 6] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Tile (t, repeats)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""", 0, pinned={"repeats": np.array([1, 2, 1, 3])})


def _ort_arg() -> Iterator[ParameterSet]:
    # x [2, 4, 6, 3] -> Transpose(0, 3, 1, 2) -> [2, 3, 4, 6]
    tests = (
        ("TestArgMinNoAxisKeepdimsTrue", "ArgMin <keepdims = 1>", "int64[1, 4, 6, 3]",
         "[0, 2, 3, 1]"),
        ("TestArgMinNoAxisKeepdimsFalse", "ArgMin <keepdims = 0>", "int64[4, 6, 3]", "[1, 2, 0]"),
        ("TestArgMinNoAxis", "ArgMin", "int64[1, 4, 6, 3]", "[0, 2, 3, 1]"),
        ("TestArgMinKeepdimsTrue", "ArgMin <axis = -2, keepdims = 1>", "int64[2, 1, 6, 3]",
         "[0, 2, 3, 1]"),
        ("TestArgMinKeepdimsFalse", "ArgMin <axis = -2, keepdims = 0>", "int64[2, 6, 3]",
         "[0, 2, 1]"),
        ("TestArgMin", "ArgMin <axis = -2>", "int64[2, 1, 6, 3]", "[0, 2, 3, 1]"),
        ("TestArgMax", "ArgMax <axis = -2, keepdims = 1>", "int64[2, 1, 6, 3]", "[0, 2, 3, 1]"),
    )
    for test, node, out, last in tests:
        yield case(f"ort-{test}", f"""
        g (float[2, 4, 6, 3] x) => ({out} y) {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            r = {node} (t)
            y = Transpose <perm = {last}> (r)
        }}""", 0)


def _ort_softmax() -> Iterator[ParameterSet]:
    four = ((2, 3, 4, 5), "[0, 3, 1, 2]", "[0, 2, 3, 1]")
    swap5 = ((2, 3, 4, 5, 6), "[1, 0, 3, 2, 4]", "[1, 0, 3, 2, 4]")
    nhwc5 = ((2, 3, 4, 5, 6), "[0, 3, 1, 2, 4]", "[0, 2, 3, 1, 4]")
    tests = (
        ("TestSoftmax", "Softmax <axis = 0>", four, 0, (12, 23)),
        ("TestSoftmaxNoAxis", "Softmax", four, 0, (12, 23)),
        ("TestSoftmax_2", "Softmax <axis = -3>", swap5, 0, (12, 23)),
        ("TestSoftmaxNoOptimization", "Softmax <axis = 2>", four, 2, (12, 23)),
        ("TestSoftmaxNoOptimization_2", "Softmax <axis = -2>", swap5, 2, (12, 23)),
        ("TestSoftmaxNoOptimization_3", "Softmax <axis = -3>", nhwc5, 2, (12, 23)),
        ("TestSoftmaxNoAxisOpset15", "Softmax", four, 0, (15,)),
        ("TestSoftmaxOpset15", "Softmax <axis = -3>", nhwc5, 0, (15,)),
        ("TestHardmaxAndLogSoftmaxNoAxis", "Hardmax", four, 0, (15, 23)),
        ("TestHardmaxAndLogSoftmaxNoAxis_2", "LogSoftmax", four, 0, (15, 23)),
    )
    for test, node, (shape, first, last), expected, opsets in tests:
        for opset in opsets:
            suffix = f"-opset{opset}" if len(opsets) > 1 else ""
            yield case(f"ort-{test}{suffix}", f"""
            g ({_t("float", shape)} x) => ({_t("float", shape)} y) {{
                t = Transpose <perm = {first}> (x)
                s = {node} (t)
                y = Transpose <perm = {last}> (s)
            }}""", expected, opset=opset)


def _ort_broadcast() -> Iterator[ParameterSet]:
    # x [6, 4, 10] -> Transpose(0, 2, 1) -> [6, 10, 4]; y [4, 10] -> Transpose(1, 0) -> [10, 4]
    ops = (("Add", "float", "float"), ("Mul", "float", "float"), ("Sub", "float", "float"),
           ("Div", "float", "float"), ("PRelu", "float", "float"), ("Greater", "float", "bool"),
           ("Less", "float", "bool"), ("Pow", "float", "float"), ("Max", "float", "float"),
           ("Min", "float", "float"), ("Mean", "float", "float"), ("Sum", "float", "float"),
           ("GreaterOrEqual", "float", "bool"), ("LessOrEqual", "float", "bool"),
           ("Equal", "int32", "bool"), ("And", "bool", "bool"), ("Or", "bool", "bool"),
           ("Xor", "bool", "bool"), ("Mod <fmod = 1>", "float", "float"),
           ("BitShift <direction = \"LEFT\">", "uint32", "uint32"))
    for node, elem, out in ops:
        name = node.split()[0]
        yield case(f"ort-TestBroadcastOps{name}", f"""
        g ({elem}[6, 4, 10] x, {elem}[4, 10] y) => ({out}[6, 4, 10] z) {{
            t1 = Transpose <perm = [0, 2, 1]> (x)
            t2 = Transpose <perm = [1, 0]> (y)
            r = {node} (t1, t2)
            z = Transpose <perm = [0, 2, 1]> (r)
        }}""", 0)
    yield case("ort-TestWhere", """
    g (bool[4, 6, 10] c, float x, float[4, 6, 10] y) => (float[4, 6, 10] z) {
        t1 = Transpose <perm = [1, 2, 0]> (c)
        t2 = Transpose <perm = [1, 2, 0]> (y)
        w = Where (t1, x, t2)
        z = Transpose <perm = [2, 0, 1]> (w)
    }""", 0)


# Per type: (the zero point the peer pins for per-tensor cases, the type's range, the opset the
# peer runs it at here: ONNX has 16-bit quantization from opset 21).
_QTYPES = {
    "uint8": (127, (0, 255), 15),
    "uint16": (32767, (0, 65535), 21),
    "int16": (0, (-32768, 32767), 21),
}


def _ort_qdq() -> Iterator[ParameterSet]:
    for qtype, (zp, (qmin, qmax), opset) in _QTYPES.items():
        per_tensor = {"scale": np.array(0.05), "zero_point": np.array(zp)}
        per_axis = {"scale": Uniform(0.0, 1.0), "zero_point": Uniform(qmin, qmax)}
        q_cases = (
            ("TestQuantizeLinearScalar", "", "float scale, {q} zero_point", per_tensor, {}),
            ("TestQuantizeLinearScalarIgnoreAxis", " <axis = 10>", "float scale, {q} zero_point",
             per_tensor, {}),
            ("TestQuantizeLinearVector", " <axis = 0>", "float[C] scale, {q}[C] zero_point",
             per_axis, {"C": 2}),
            # The peer gives scale and zero point no shape at all.
            ("TestQuantizeLinearVectorUnknownRank", " <axis = 1>",
             "float[C] scale, {q}[C] zero_point", per_axis, {"C": 3}),
        )
        for test, attrs, params, pinned, dims in q_cases:
            yield case(f"ort-{test}-{qtype}", f"""
            g (float[2, 4, 6, 3] x, {params.format(q=qtype)}) => ({qtype}[2, 4, 6, 3] y) {{
                t = Transpose <perm = [0, 3, 1, 2]> (x)
                q = QuantizeLinear{attrs} (t, scale, zero_point)
                y = Transpose <perm = [0, 2, 3, 1]> (q)
            }}""", 0, opset=opset, pinned=pinned, dims=dims)
        dq_cases = (
            ("TestDequantizeLinearScalarIgnoreAxis", " <axis = 10>",
             "float scale, {q} zero_point", per_tensor),
            ("TestDequantizeLinearVector", " <axis = -4>", "float[2] scale, {q}[2] zero_point",
             per_axis),
            ("TestDequantizeLinearNoAxis", "", "float scale, {q} zero_point", per_tensor),
        )
        for test, attrs, params, pinned in dq_cases:
            yield case(f"ort-{test}-{qtype}", f"""
            g ({qtype}[2, 4, 6, 3] x, {params.format(q=qtype)}) => (float[2, 4, 6, 3] y) {{
                t = Transpose <perm = [0, 3, 1, 2]> (x)
                d = DequantizeLinear{attrs} (t, scale, zero_point)
                y = Transpose <perm = [0, 2, 3, 1]> (d)
            }}""", 0, opset=opset, pinned=pinned)
    yield case("ort-TestQuantizeLinearScalarOpset10", """
    g (float[2, 4, 6, 3] x, float input1, uint8 input2) => (uint8[2, 4, 6, 3] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        q = QuantizeLinear (t, input1, input2)
        y = Transpose <perm = [0, 2, 3, 1]> (q)
    }""", 0, opset=10, pinned={"input1": np.array(2.3), "input2": np.array(10)})
    # Opset 21 cancels; at 19 the peer only checks that the model still loads (NoOpt).
    for opset, expected in ((21, 0), (19, 2)):
        yield case(f"ort-TestDequantizeLinearNoZeroPoint-opset{opset}", """
        g (int8[2, 4, 6, 3] x, float scale) => (float[2, 4, 6, 3] y) {
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            d = DequantizeLinear (t, scale)
            y = Transpose <perm = [0, 2, 3, 1]> (d)
        }""", expected, opset=opset, pinned={"scale": np.array(0.05)})


def _ort_misc() -> Iterator[ParameterSet]:
    yield case("ort-TestCast", """
    g (int32[2, 4, 6, 5] x) => (float[2, 4, 6, 5] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        c = Cast <to = 1> (t)
        y = Transpose <perm = [0, 2, 3, 1]> (c)
    }""", 0)
    # Cost 2: one Transpose of the rank-2 input, unsqueezed to [1, 1, 2, 3] and moved to
    # [1, 2, 3, 1].
    yield case("ort-TestBroadcastReusedInputs", f"""
    g (float[1, 2, 3, 4] x, float[2, 3] y) => (float[1, 2, 3, 4] z0, float[1, 2, 3, 4] z1)
        <{_rand_init("float", (2, 3), "c")}> {{
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        s = Sum (t, c, y, c, t)
        z0 = Transpose <perm = [0, 2, 3, 1]> (s)
        z1 = Transpose <perm = [0, 2, 3, 1]> (s)
    }}""", 1)
    # Cost 8 of 12: two of the three rank-4 Transposes (the peer's dims are all unknown) remain.
    yield case("ort-TestTransposeGraphOutput", """
    g (float[1, 2, 3, 4] x) => (float[1, 4, 2, 3] t1, float[1, 2, 3, 4] t2, float[2, 1, 4, 3] t3) {
        t1 = Transpose <perm = [0, 3, 1, 2]> (x)
        t2 = Transpose <perm = [0, 2, 3, 1]> (t1)
        t3 = Transpose <perm = [2, 0, 1, 3]> (t1)
    }""", 2)
    yield case("ort-TestSimpleReshapeAsTranspose", """
    g (float[1, 1, 1, 3] x, float[1, 3] y) => (float[1, 1, 1, 3] m, float[1, 1, 1, 3] z)
        <int64[4] shape = {1, 1, 1, 3}> {
        m = Mul (x, y)
        t = Transpose <perm = [0, 3, 1, 2]> (m)
        r = Reshape (t, shape)
        z = Identity (r)
    }""", 0)
    yield case("ort-TestReshapeAsTransposeGraphOutput", """
    g (float[1, 1, 1, 3] x, float[1, 3] y) => (float[1, 1, 1, 3] r)
        <int64[4] shape = {1, 1, 1, 3}> {
        m = Mul (x, y)
        t = Transpose <perm = [0, 3, 1, 2]> (m)
        r = Reshape (t, shape)
    }""", 0)
    yield case("ort-TestCancelingNodesGraphOutputs", """
    g (float[1, 1, 1, 3] x, float[1, 3] y) => (float[1, 1, 1, 3] m, float[1, 1, 1, 3] r)
        <int64[4] shape = {1, 1, 1, 3}> {
        m = Mul (x, y)
        t = Transpose <perm = [0, 3, 1, 2]> (m)
        r = Reshape (t, shape)
    }""", 0)
    yield case("ort-TestNonCancelingReshapeDueToNonConstShape", """
    g (float[1, 1, 1, 3] x, float[1, 3] y, int64[4] shape) => (float[1, 1, 1, 3] m,
                                                              float[1, 1, 1, 3] z) {
        m = Mul (x, y)
        t = Transpose <perm = [0, 3, 1, 2]> (m)
        r = Reshape (t, shape)
        z = Identity (r)
    }""", 1, pinned={"shape": np.array([1, 1, 1, 3])})
    # Cost 2: the rank-2 input's Transpose, combined with the compensation, remains.
    yield case("ort-TestPushBroadcastUnsqueezeTranspose", """
    g (float[4, 6, 10] x, float[4, 10] y) => (float[4, 6, 10] z) {
        t1 = Transpose <perm = [1, 2, 0]> (x)
        r1 = Relu (t1)
        t2 = Transpose <perm = [1, 0]> (y)
        r2 = Relu (t2)
        m = Mul (r1, r2)
        z = Transpose <perm = [2, 0, 1]> (m)
    }""", 1)
    # Cost 2: the Transpose created on the second input ([1, 10, 4] -> [4, 1, 10]) remains.
    yield case("ort-TestOptimizeTowardsTranspose", """
    g (float[4, 6, 10] x, float[10, 4] y) => (float[4, 6, 10] z) {
        t = Transpose <perm = [1, 2, 0]> (x)
        m = Mul (t, y)
        r = Relu (m)
        z = Transpose <perm = [2, 0, 1]> (r)
    }""", 1)
    # Cost 3: the input's Transpose stays, nothing is pushed.
    yield case("ort-TestOnlyOptimizeTowardsTranspose", """
    g (float[4, 6, 10] x, float[10, 4] y) => (float[6, 10, 4] r) {
        t = Transpose <perm = [1, 2, 0]> (x)
        m = Mul (t, y)
        r = Relu (m)
    }""", 1)
    # NoOpt: CastLike reads only the type of its transposed second input.
    yield case("ort-TestDontOptimizeWrongInput", """
    g (int32[2, 4, 6, 5] x0, float[2, 4, 6, 5] x1) => (float[2, 6, 5, 4] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x1)
        c = CastLike (x0, t)
        y = Transpose <perm = [0, 2, 3, 1]> (c)
    }""", 2)
    # Cost 3: one Transpose, on the output of the Mul.
    yield case("ort-TestOptimizeBothInputs", """
    g (float[4, 6, 10] x, float[4, 6, 10] y) => (float[6, 10, 4] m) {
        t1 = Transpose <perm = [1, 2, 0]> (x)
        t2 = Transpose <perm = [1, 2, 0]> (y)
        m = Mul (t1, t2)
    }""", 1)
    for test, node in (("TestElu", "Elu"), ("TestElu-alpha", "Elu <alpha = 0.5>")):
        yield case(f"ort-{test}", f"""
        g (float[2, 4, 6, 3] x) => (float[2, 4, 6, 3] y) {{
            t = Transpose <perm = [0, 3, 1, 2]> (x)
            e = {node} (t)
            y = Transpose <perm = [0, 2, 3, 1]> (e)
        }}""", 0)


# (input shape, perm, Reshape target, Transposes left, allowzero)
_ORT_TRANSPOSE_RESHAPE = {
    "TestReshapeCanMerge": (
        ((4, 1, 3), (2, 0, 1), (1, 3, 4), 1, False),
        ((4, 1, 4), (2, 0, 1), (1, 4, 4), 1, False),
        ((1, 6, 1, 5), (3, 0, 1, 2), (1, 1, 5, 6), 1, False),
        ((1, 6, 1, 5), (2, 3, 1, 0), (5, 6, 1, 1), 1, False),
        ((1, 6, 1, 5), (3, 0, 2, 1), (1, 5, 6, 1), 1, False),
        ((1, 6, 1, 5), (2, 3, 0, 1), (5, 1, 6, 1), 1, False),
    ),
    "TestReshapeCancelsTranspose": (
        ((1, 8), (1, 0), (1, 8), 0, False),
        ((2, 1, 4), (1, 0, 2), (2, 1, 4), 0, False),
        ((1, 2, 1, 3), (0, 2, 1, 3), (1, 2, 1, 3), 0, False),
    ),
    "TestReshapeCantMerge": (
        ((2, 1, 4), (1, 0, 2), (2, 4), 1, False),
        ((1, 4, 4, 5), (0, 3, 1, 2), (1, 5, 2, 8), 1, False),
        ((1, 4, 8, 3), (0, 3, 1, 2), (1, 3, 8, 4), 1, False),
    ),
    "TestReshapeWithZero": (
        ((1, 5, 7, 1), (0, 3, 2, 1), (1, 7, 1, 0), 1, False),
        ((1, 4, 8, 3), (0, 3, 1, 2), (1, 0, 8, 4), 1, False),
        ((1, 5, 7, 0), (0, 2, 1, 3), (7, 5, 1, 0), 1, True),
        ((1, 5, 7, 0), (0, 2, 1, 3), (0, 7, 5, 1), 1, True),
    ),
    "TestReshapeSplit": (
        ((1, 12, 20, 24), (0, 3, 1, 2), (1, 3, 8, 12, 20), 1, False),
        ((2, 4, 6), (2, 0, 1), (2, 3, 2, 2, 2), 1, False),
        ((1, 6, 4), (2, 0, 1), (2, 2, 1, 2, 3), 1, False),
    ),
    "TestReshapeSplitBails": (
        ((2, 3, 4), (1, 0, 2), (6, 4), 1, False),
        ((2, 3), (1, 0), (2, 3, 1), 1, False),
        ((4, 6), (1, 0), (2, 12, 1), 1, False),
    ),
    "TestReshapeWithMinusOne": (
        ((1, 5, 7, 1), (0, 3, 2, 1), (1, 7, 1, -1), 1, False),
        ((1, 8, 4, 1), (0, 3, 2, 1), (1, -1, 2, 8), 1, False),
    ),
}


def _reshaped(shape: Sequence[int], target: Sequence[int], allowzero: bool) -> list[int]:
    out = [shape[k] if d == 0 and not allowzero else d for k, d in enumerate(target)]
    if -1 in out:
        known = int(np.prod([d for d in out if d != -1]))
        out[out.index(-1)] = int(np.prod(shape)) // known
    return out


def _ort_transpose_reshape() -> Iterator[ParameterSet]:
    for test, rows in _ORT_TRANSPOSE_RESHAPE.items():
        for i, (shape, perm, target, expected, allowzero) in enumerate(rows):
            out = _reshaped(_perm(shape, perm), target, allowzero)
            attrs = " <allowzero = 1>" if allowzero else ""
            yield case(f"ort-{test}-{i}", f"""
            g ({_t("float", shape)} x, float[1] a) => ({_t("float", shape)} m, {_t("float", out)} z)
                <{_init("int64", target, "shape")}> {{
                m = Mul (x, a)
                t = Transpose <perm = {_ints(perm)}> (m)
                r = Reshape{attrs} (t, shape)
                z = Identity (r)
            }}""", expected)


ORT_CASES: list[ParameterSet] = [
    *_ort_split_concat_pad(),
    *_ort_resize(),
    *_ort_add_shape(),
    *_ort_reduce_sum(),
    *_ort_reduce_others(),
    *_ort_squeeze_unsqueeze(),
    *_ort_slice(),
    *_ort_gather_tile(),
    *_ort_arg(),
    *_ort_softmax(),
    *_ort_broadcast(),
    *_ort_qdq(),
    *_ort_misc(),
    *_ort_transpose_reshape(),
]


@pytest.mark.parametrize(("text", "expected", "setup"), TF2ONNX_CASES)
def test_tf2onnx_transpose_optimizer_case(text: str, expected: int, setup: Setup,
                                          ort_run: OrtRun, rng: np.random.Generator) -> None:
    check_case(text, expected, setup, ort_run, rng)


@pytest.mark.parametrize(("text", "expected", "setup"), ORT_CASES)
def test_ort_transpose_optimizer_case(text: str, expected: int, setup: Setup, ort_run: OrtRun,
                                      rng: np.random.Generator) -> None:
    check_case(text, expected, setup, ort_run, rng)


def test_case_ids_are_unique() -> None:
    ids = [p.id for p in (*TF2ONNX_CASES, *ORT_CASES)]
    assert len(ids) == len(set(ids))
    assert set(_GAP_OF) <= set(ids), set(_GAP_OF) - set(ids)
