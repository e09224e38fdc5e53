"""graphfix.layout: the record of signature changes, and moving tensors between layouts."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

from graphfix import layout


def _model() -> onnx.ModelProto:
    return onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4, 5, 3] x) => (float[N, 4, 5, 3] y) { y = Relu (x) }""")


def test_record_composes_and_keeps_other_metadata() -> None:
    model = _model()
    onnx.helper.set_model_props(model, {"author": "someone"})
    assert layout.read(model) == {"inputs": {}, "outputs": {}}
    layout.record(model, inputs={"x": (0, 3, 1, 2)})
    layout.record(model, inputs={"x": (0, 2, 3, 1)}, outputs={"y": (0, 3, 1, 2)})
    # x changed back: no longer recorded
    assert layout.read(model) == {"inputs": {}, "outputs": {"y": (0, 3, 1, 2)}}
    assert [p.key for p in model.metadata_props] == ["author", layout.KEY]


def test_unreadable_record_is_no_record() -> None:
    model = _model()
    onnx.helper.set_model_props(model, {layout.KEY: "not json"})
    assert layout.read(model) == {"inputs": {}, "outputs": {}}


@pytest.mark.parametrize("perm", [[0, 0, 0, 0], [0, 1, 2, 99], [0, -1, 1, 2], [10 ** 30, 0, 1, 2]])
def test_a_record_that_is_no_permutation_is_no_record(perm) -> None:
    # a record edited by hand: moving tensors by it would raise deep inside parity
    model = _model()
    onnx.helper.set_model_props(model, {layout.KEY: json.dumps({"outputs": {"y": perm}})})
    assert layout.read(model) == {"inputs": {}, "outputs": {}}


def test_relative_layout_moves_feeds_and_outputs_between_the_two_models() -> None:
    x = np.arange(2 * 4 * 5 * 3, dtype=np.float32).reshape(2, 4, 5, 3)
    reference = {"inputs": {}, "outputs": {}}
    candidate = {"inputs": {"x": (0, 3, 1, 2)}, "outputs": {"y": (0, 3, 1, 2)}}
    moved = layout.relative(reference, candidate)
    fed = layout.to_candidate({"x": x, "other": 1}, moved)
    assert fed["x"].shape == (2, 3, 4, 5) and fed["other"] == 1
    np.testing.assert_array_equal(layout.from_candidate(fed, moved)["x"], x)
    np.testing.assert_array_equal(layout.to_reference({"y": fed["x"]}, moved)["y"], x)
    # Both models changed the same way: nothing to move between them.
    assert layout.relative(candidate, candidate) == {"inputs": {}, "outputs": {}}
    assert layout.describe(moved) == [
        "input 'x' is transposed by [0, 3, 1, 2] in the optimized model",
        "output 'y' is transposed by [0, 3, 1, 2] in the optimized model"]
