"""Boundaries (:mod:`graphfix.passes.eliminate_transposes.boundary`): graph inputs and outputs keep
their names, types, shapes and layout, unless asked otherwise with ``inputs_as_nchw`` /
``outputs_as_nchw`` (a signature change, recorded in the model's metadata)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from graphfix import layout
from graphfix.errors import PassError
from graphfix.passes.eliminate_transposes import EliminateTransposes
from tests.passes.transposes_support import check_row, dims, expect, ops, parse

OUTPUT_TRANSPOSE = """
g (float[1,4,4,3] x) => (float[1,3,4,4] t, float[1,4,4,3] y) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    r = Relu (t)
    y = Transpose <perm = [0, 2, 3, 1]> (r)
}"""


def _outputs_named(names: list[str]):
    def check(result) -> None:
        assert [o.name for o in result.model.graph.output] == names
    return check


BOUNDARY = [
    pytest.param(OUTPUT_TRANSPOSE, expect(["Transpose", "Relu", "Transpose"], modified=False,
                                          check=_outputs_named(["t", "y"])),
                 id="transpose-on-a-graph-output-stays"),
]


@pytest.mark.parametrize("text, expected", BOUNDARY)
def test_boundary(text, expected, ort_run, rng):
    check_row(text, expected, ort_run, rng)


NHWC_CONV = """
g (float[N,8,8,3] x) => (float[N,8,8,4] y) {
    t = Transpose <perm = [0, 3, 1, 2]> (x)
    c = Conv <pads = [1, 1, 1, 1]> (t, w)
    y = Transpose <perm = [0, 2, 3, 1]> (c)
}"""


def nhwc_conv(rng) -> onnx.ModelProto:
    model = parse(NHWC_CONV)
    model.graph.initializer.append(
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"))
    return model


def test_inputs_and_outputs_as_nchw_change_the_signature_and_leave_no_transpose(ort_run, rng):
    model = nhwc_conv(rng)
    original = onnx.ModelProto()
    original.CopyFrom(model)
    result = EliminateTransposes(inputs_as_nchw=["x"], outputs_as_nchw="y")(model)
    onnx.checker.check_model(model, full_check=True)
    assert ops(model) == ["Conv"]
    assert dims(model.graph.input[0]) == ["N", 3, 8, 8]
    assert dims(model.graph.output[0]) == ["N", 4, 8, 8]
    assert result.stats["signature_changes"] == 2 and len(result.warnings) == 2
    assert layout.read(model) == {"inputs": {"x": (0, 3, 1, 2)}, "outputs": {"y": (0, 3, 1, 2)}}
    x = rng.standard_normal((2, 8, 8, 3)).astype(np.float32)
    expected = ort_run(original, {"x": x})["y"]
    actual = ort_run(model, {"x": x.transpose(0, 3, 1, 2)})["y"]
    np.testing.assert_array_equal(actual.transpose(0, 2, 3, 1), expected)
    again = EliminateTransposes(inputs_as_nchw=["x"], outputs_as_nchw=["y"])(model)
    assert not again.modified and dims(model.graph.input[0]) == ["N", 3, 8, 8]


@pytest.mark.parametrize("options, message", [
    ({"inputs_as_nchw": ["nope"]}, "no graph input named 'nope'"),
    ({"outputs_as_nchw": ["x"]}, "no graph output named 'x'"),
    ({"inputs_as_nchw": 3}, "list of tensor names"),
])
def test_inputs_as_nchw_errors(options, message, rng):
    with pytest.raises(PassError, match=message):
        EliminateTransposes(**options)(nhwc_conv(rng))


def test_inputs_as_nchw_needs_rank_three(rng):
    model = parse("g (float[2,3] x) => (float[2,3] y) { y = Relu (x) }")
    with pytest.raises(PassError, match="rank 3 or more"):
        EliminateTransposes(inputs_as_nchw=["x"])(model)


def test_inputs_as_nchw_refuses_before_editing_anything(rng):
    model = parse("""
    g (float[1,4,5,3] x) => (float[1,4,5,3] y, float[1,4,5,3] x) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        r = Relu (t)
        y = Transpose <perm = [0, 2, 3, 1]> (r)
    }""")
    before = model.SerializeToString()
    for options in ({"inputs_as_nchw": ["x"]}, {"outputs_as_nchw": ["y"], "inputs_as_nchw": ["x"]}):
        with pytest.raises(PassError, match="also a graph output"):
            EliminateTransposes(**options)(model)
        assert model.SerializeToString() == before


def test_a_channels_first_request_the_pass_cannot_keep_is_said_not_applied(rng):
    """--inputs-as-nchw on a model that is channels-first already: moving its input costs a
    node, so the registry keeps the model, and the run said the signature had changed. It now
    says the request was not applied, and nothing of the result not kept."""
    import graphfix

    model = parse("""
    g (float[N, 3, 8, 8] x) => (float[N, 4, 8, 8] y) {
        y = Conv <pads = [1, 1, 1, 1]> (x, w)
    }""")
    model.graph.initializer.append(numpy_helper.from_array(
        rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w"))
    result = graphfix.optimize(model, inputs_as_nchw=["x"])
    assert dims(result.model.graph.input[0]) == ["N", 3, 8, 8]
    warnings = " ".join(result.report.warnings)
    assert "--inputs-as-nchw x: not applied" in warnings
    assert "signature changed" not in warnings
