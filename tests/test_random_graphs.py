"""Random graphs through the whole pipeline: ``graphfix.optimize`` proves parity itself (it raises
ParityError naming the guilty pass), and the result keeps the model's signature and passes
ONNX's checker. The strategy is :mod:`graphfix.models.random_models`; ``tools/random_graphs.py`` runs it at
scale. The regression tests at the end are the failures it found, each as a small explicit graph.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx
import pytest
from hypothesis import HealthCheck, given, settings

import graphfix
from graphfix.models.random_models import FAST_PASSES, check_pipeline, random_models, signature

def _check_or_show(model: onnx.ModelProto, passes: Sequence[str] | None) -> None:
    try:
        check_pipeline(model, passes)
    except Exception as error:  # hypothesis prints only the repr: show the graph
        raise AssertionError(onnx.printer.to_text(model)) from error


_SETTINGS = dict(deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _fast_pipeline(model):
    _check_or_show(model, FAST_PASSES)


def _default_pipeline(model):
    _check_or_show(model, None)


def _random_graphs_test(check, examples: int):
    return settings(max_examples=examples, **_SETTINGS)(given(model=random_models())(check))


# The default run draws enough graphs to catch a broken rule in seconds; `-m slow` draws the
# thousands-of-nodes-in-total sample that found the regressions below.
test_random_graphs_through_fast_pipeline = _random_graphs_test(_fast_pipeline, 60)
test_random_graphs_through_default_pipeline = _random_graphs_test(_default_pipeline, 40)
test_many_random_graphs_through_fast_pipeline = pytest.mark.slow(
    _random_graphs_test(_fast_pipeline, 300))
test_many_random_graphs_through_default_pipeline = pytest.mark.slow(
    _random_graphs_test(_default_pipeline, 200))


# --------------------------------------------------------------------------------------------
# Failures the random graphs found, as small explicit graphs


def test_regression_constant_in_nested_if_body_written_twice_by_ort():
    """ORT (1.31), writing initializers to an external file, emitted the Constant of an If body
    nested in another If body both as an initializer of that body and as the node: two
    definitions of ``c``, a model that no longer loads. ort-offline drops the duplicate node."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x, bool cond) => (float[4] y) {
        y = If (cond) <else_branch: graph = outer_else () => (float[4] r) { r = Relu (x) },
                       then_branch: graph = outer_then () => (float[4] o) {
            o = If (cond) <else_branch: graph = inner_else () => (float[4] a) {
                c = Constant <value: tensor = float[4] c {0.5, -0.5, 1, 2}> ()
                a = Min (x, c)
            }, then_branch: graph = inner_then () => (float[4] b) { b = Relu (x) }>
        }>
    }""")
    onnx.checker.check_model(model, full_check=True)
    optimized = check_pipeline(model, FAST_PASSES)
    inner = optimized.graph.node[-1].attribute
    assert any(n.op_type == "If" for a in inner if a.type == onnx.AttributeProto.GRAPH
               for n in a.g.node)
    from graphfix.passes.ort_offline import OrtOffline

    result = OrtOffline()(model)
    assert not result.skipped
    onnx.checker.check_model(result.model, full_check=True)


def test_regression_cast_pair_read_only_in_if_body_is_not_broken_by_ort():
    """ORT (1.31) removes the lossless pair ``Cast(double) -> Cast(float)`` when only an If body
    reads its result, and leaves the body reading a name nothing defines. ort-offline must not
    return that model: it skips, and the pipeline's result still loads and matches."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x, bool cond) => (double[4] y, float[4] z) {
        wide = Cast <to = 11> (x)
        narrow = Cast <to = 1> (wide)
        y = Neg (wide)
        z = If (cond) <else_branch: graph = on_false () => (float[4] r) { r = Relu (x) },
                       then_branch: graph = on_true () => (float[4] o) {
            unused = Cast <to = 11> (narrow)
            o = Relu (x)
        }>
    }""")
    onnx.checker.check_model(model, full_check=True)
    check_pipeline(model, FAST_PASSES)
    from graphfix.passes.ort_offline import OrtOffline

    result = OrtOffline()(model)
    assert result.skipped and "invalid model" in result.skipped and "narrow" in result.skipped
    assert result.model is model and not result.modified


def test_regression_relu_clip_on_double_that_ort_cannot_optimize():
    """ORT's (1.31) Relu+Clip fusion throws on a double Clip ("Unexpected data type for Clip
    'min' input of 11"), so a session with its rewrites on cannot even be created. ort-offline
    steps aside with the reason and the pipeline goes on."""
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2,3] x) => (double[2,3] y) {
        wide = Cast <to = 11> (x)
        r = Relu (wide)
        low = Constant <value: tensor = double low {-0.5}> ()
        y = Clip (r, low)
    }""")
    onnx.checker.check_model(model, full_check=True)
    result = graphfix.optimize(model, passes=FAST_PASSES)
    assert signature(result.model) == signature(model)
    skipped = {p.name: p.skipped for p in result.report.passes if p.skipped}
    assert set(skipped) <= {"ort-offline"}
    if skipped:
        assert "cannot load" in skipped["ort-offline"]


def test_regression_symbolic_input_dimension_keeps_its_name():
    # Found by tools/random_graphs.py: once ORT and onnxsim had removed the dead Squeeze of x,
    # onnxsim's shape inference named x's dynamic dimension "unk__0" instead of "N".
    model = onnx.parser.parse_model("""
    <ir_version: 10, opset_import: ["" : 21]>
    random (float[1,N,1] x, float[N,2] y) => (float[1,N,3] sub20, float[N,2] transpose9)
    <float[1,1,1] c1 = {-0.39902058}, int64[2] c6 = {0,-2}, int64[2] c10 = {0,1},
     int64[6] c15 = {1,1,0,1,1,1}, float c17 = {-1.4118277},
     float[3] c19 = {0.34728888,0.22267888,0.05863074}> {
        max2 = Max (x, c1)
        relu3 = Relu (x)
        c4 = Constant <value = int64[2] {0,-1}> ()
        squeeze5 = Squeeze (x, c4)
        reducemean7 = ReduceMean <keepdims = 1> (max2, c6)
        transpose8 = Transpose <perm = [2, 1, 0]> (x)
        transpose9 = Transpose <perm = [0, 1]> (y)
        reducemax11 = ReduceMax <keepdims = 0> (y, c10)
        transpose12 = Transpose <perm = [2, 1, 0]> (relu3)
        neg13 = Neg (reducemean7)
        pad16 = Pad (relu3, c15)
        sub18 = Sub (transpose12, c17)
        sub20 = Sub (transpose8, c19)
    }""")
    onnx.checker.check_model(model, full_check=True)
    check_pipeline(model, None)
