"""Shared helpers of the eliminate-transposes tests (``tests/passes/test_eliminate_transposes*``).

``optimize`` runs the pass on a model and holds it to the pass's contract: a valid model
(``onnx.checker`` with ``full_check``), the same graph signature, the same outputs on ONNX
Runtime's CPU provider with every graph optimization off (bit for bit, or within a tolerance
after a sum-like reduction) and never more nodes. ``check_row`` does the same for one row of a
rule's table: ``pytest.param(onnx_text, expected, id=...)``, where ``expected`` is the op list
the graph ends with, a dict of op counts, or an :class:`Expect` carrying either with the
options and extra checks of the row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from graphfix.graph import count_nodes, graphs
from graphfix.passes.eliminate_transposes import EliminateTransposes
from graphfix.registry import PassResult

__all__ = [
    "HEADER",
    "Expect",
    "all_ops",
    "attribute",
    "check_row",
    "copy",
    "dims",
    "expect",
    "feeds_for",
    "initializers",
    "ops",
    "optimize",
    "parse",
    "sum_like",
    "transposes",
    "with_dims",
]

HEADER = '<ir_version: 8, opset_import: ["" : {opset}]>'

# Reductions whose float result depends on the order in which elements are added.
SUM_LIKE = frozenset({
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMean", "ReduceProd",
    "ReduceSum", "ReduceSumSquare",
})


def parse(text: str, opset: int = 17) -> onnx.ModelProto:
    """A model from ONNX text: a graph (``opset`` of the default domain, IR 8), or a whole model
    when ``text`` starts with its ``<...>`` header."""
    if text.lstrip().startswith("<"):
        return onnx.parser.parse_model(text)
    return onnx.parser.parse_model(HEADER.format(opset=opset) + text)


def copy(model: onnx.ModelProto) -> onnx.ModelProto:
    duplicate = onnx.ModelProto()
    duplicate.CopyFrom(model)
    return duplicate


def ops(model: onnx.ModelProto | onnx.GraphProto) -> list[str]:
    """The op types of the main graph's nodes, in order."""
    graph = model.graph if isinstance(model, onnx.ModelProto) else model
    return [n.op_type for n in graph.node]


def all_ops(model: onnx.ModelProto) -> list[str]:
    """The op types of every graph's nodes, subgraphs included."""
    return [n.op_type for g in graphs(model.graph) for n in g.node]


def transposes(model: onnx.ModelProto) -> int:
    """Transposes of the main graph."""
    return ops(model).count("Transpose")


def attribute(node: onnx.NodeProto, name: str) -> Any:
    return next(helper.get_attribute_value(a) for a in node.attribute if a.name == name)


def initializers(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}


def dims(info: onnx.ValueInfoProto) -> list:
    return [d.dim_value or d.dim_param for d in info.type.tensor_type.shape.dim]


def with_dims(text: str, input_dims: Sequence[str]) -> onnx.ModelProto:
    """``text`` with its first input's dimensions replaced (digits: a size, ``-1``: a size
    written as -1, else a symbol) and its first output's sizes cleared."""
    model = parse(text)
    for dim, value in zip(model.graph.input[0].type.tensor_type.shape.dim, input_dims):
        if value.lstrip("-").isdigit():
            dim.dim_value = int(value)
        else:
            dim.dim_param = value
    for dim in model.graph.output[0].type.tensor_type.shape.dim:
        dim.ClearField("dim_value")
    return model


def _opset(model: onnx.ModelProto) -> int:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)


def sum_like(model: onnx.ModelProto) -> bool:
    """Whether an output may differ in its last bits after the pass: a sum-like reduction, a
    Softmax before opset 13 (case 4g), or a Flatten into MatMul/Gemm (rule 7b)."""
    for graph in graphs(model.graph):
        flattened = {o for n in graph.node if n.op_type in ("Flatten", "Reshape")
                     for o in n.output}
        for node in graph.node:
            if node.op_type in SUM_LIKE:
                return True
            if node.op_type in ("Softmax", "LogSoftmax") and _opset(model) < 13:
                return True
            if node.op_type in ("MatMul", "Gemm") and flattened.intersection(node.input):
                return True
    return False


def feeds_for(model: onnx.ModelProto, rng: np.random.Generator, dims: dict[str, int] | None = None,
              pinned: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """Random feeds for the graph inputs (symbolic sizes from ``dims``, else 2; ``pinned``
    inputs as given)."""
    feeds = {}
    initializer_names = {i.name for i in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in initializer_names:
            continue
        tensor_type = inp.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tensor_type.elem_type)
        if pinned and inp.name in pinned:
            feeds[inp.name] = np.asarray(pinned[inp.name]).astype(dtype)
            continue
        shape = [d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
                 else (dims or {}).get(d.dim_param, 2) for d in tensor_type.shape.dim]
        if dtype == np.bool_:
            feeds[inp.name] = rng.integers(0, 2, shape).astype(bool)
        elif np.issubdtype(dtype, np.integer):
            feeds[inp.name] = rng.integers(-5, 5, shape).astype(dtype)
        else:
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def optimize(model: onnx.ModelProto, ort_run, rng, *, exact: bool = True, dims=None,
             pinned: Mapping[str, np.ndarray] | None = None, **options) -> PassResult:
    """Run the pass on ``model`` (in place; a copy is kept as the reference) and check the
    result: valid (``full_check``), the same inputs and outputs, no more nodes (and no skip: the
    registry takes back a result with more nodes), and the same
    outputs on ORT CPU with optimizations off (bit for bit unless ``exact=False``: sum-like
    reductions add in another order). Returns the pass's result."""
    original = copy(model)
    result = EliminateTransposes(**options)(model)
    assert result.model is model
    # The pass itself never adds nodes: the registry's safety net (a result with more nodes is
    # taken back, and the pass reports a skip) must not be what keeps the count.
    assert result.skipped is None, result.skipped
    onnx.checker.check_model(model, full_check=True)
    assert [(o.name, o.type) for o in model.graph.output] == [
        (o.name, o.type) for o in original.graph.output]
    assert [(i.name, i.type) for i in model.graph.input] == [
        (i.name, i.type) for i in original.graph.input]
    assert count_nodes(model) <= count_nodes(original), (
        f"{count_nodes(original)} nodes became {count_nodes(model)}")
    feeds = feeds_for(original, rng, dims, pinned)
    expected = ort_run(original, feeds)
    actual = ort_run(model, feeds)
    assert expected.keys() == actual.keys()
    for name, value in expected.items():
        assert actual[name].dtype == value.dtype and actual[name].shape == value.shape, name
        if exact:
            np.testing.assert_array_equal(actual[name], value, err_msg=name)
        else:  # sum-like reductions add in another order
            np.testing.assert_allclose(actual[name], value, rtol=1e-5, atol=1e-6, err_msg=name)
    return result


Expected = Sequence[str] | Mapping[str, int]


@dataclasses.dataclass(frozen=True)
class Expect:
    """What a table row expects: ``ops`` (the main graph's op list, or op counts; the key
    ``"nodes"`` counts every node, and a count ``(low, high)`` is a range), the ``stats``
    the pass reports (a subset, ranges allowed), ``attrs`` of the nodes of an op type, whether the model is
    ``modified``, whether a second run leaves it ``stable``; and how to run it: ``opset``,
    ``exact`` (None: a tolerance only after a sum-like reduction), ``dims`` of symbolic sizes,
    ``pinned`` feeds, the pass's ``options``. ``check`` gets the result for anything else."""

    ops: Expected | None = None
    stats: Mapping[str, int] = dataclasses.field(default_factory=dict)
    attrs: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    modified: bool | None = None
    stable: bool = True
    opset: int = 17
    exact: bool | None = None
    dims: Mapping[str, int] | None = None
    pinned: Mapping[str, np.ndarray] | None = None
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    check: Callable[[PassResult], None] | None = None


def expect(ops: Expected | None = None, **how: Any) -> Expect:
    return Expect(ops=ops, **how)


def _counts_match(model: onnx.ModelProto, counts: Mapping[str, Any]) -> None:
    found = ops(model)
    for op_type, want in counts.items():
        got = count_nodes(model) if op_type == "nodes" else found.count(op_type)
        if isinstance(want, tuple):
            assert want[0] <= got <= want[1], f"{got} {op_type}, expected {want} in {found}"
        else:
            assert got == want, f"{got} {op_type}, expected {want} in {found}"


def check_row(text: str, expected: Expected | Expect, ort_run, rng) -> PassResult:
    """One row of a rule's table: parse, optimize (with every check of :func:`optimize`), then
    hold the result to ``expected``."""
    how = expected if isinstance(expected, Expect) else Expect(ops=expected)
    model = parse(text, how.opset)
    onnx.checker.check_model(model, full_check=True)  # the row itself is a valid model
    before = model.SerializeToString()
    exact = how.exact if how.exact is not None else not sum_like(model)
    result = optimize(model, ort_run, rng, exact=exact, dims=how.dims, pinned=how.pinned,
                      **how.options)
    if isinstance(how.ops, Mapping):
        _counts_match(result.model, how.ops)
    elif how.ops is not None:
        assert ops(result.model) == list(how.ops)
    for key, value in how.stats.items():
        low, high = value if isinstance(value, tuple) else (value, value)
        assert low <= result.stats[key] <= high, (key, value, result.stats)
    for op_type, wanted in how.attrs.items():
        nodes = [n for n in result.model.graph.node if n.op_type == op_type]
        assert nodes, op_type
        for node in nodes:
            for name, value in wanted.items():
                assert attribute(node, name) == value, (op_type, name)
    if how.modified is not None:
        assert result.modified == how.modified
        if not how.modified:
            assert result.model.SerializeToString() == before
    if how.stable:
        again = EliminateTransposes(**how.options)(result.model)
        assert not again.modified, "a second run changed the model"
    if how.check is not None:
        how.check(result)
    return result
