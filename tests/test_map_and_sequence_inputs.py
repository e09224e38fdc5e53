"""Inputs that are not tensors: a map (scikit-learn's DictVectorizer pipelines take one), a
sequence of tensors, and an optional tensor. graphfix generates them, checks parity on them,
and times models that take them."""

from __future__ import annotations

import hashlib
import json

import onnx
import pytest
from click.testing import CliRunner

from graphfix.cli import cli
from graphfix.feeds import describe, fed_shape, make_feeds

DICT_VECTORIZER = """
<ir_version: 8, opset_import: ["" : 17, "ai.onnx.ml" : 3]>
g (map(string, float) features) => (float[1,2] y) {
    v = ai.onnx.ml.DictVectorizer <string_vocabulary = ["age", "income", "score"]> (features)
    w = Constant <value = float[3,2] {0.5,-1,2,0.25,-0.75,1}> ()
    z = MatMul (v, w)
    unused = Identity (z)
    y = Relu (z)
}
"""
CAST_MAP = """
<ir_version: 8, opset_import: ["" : 17, "ai.onnx.ml" : 3]>
g (map(int64, float) sparse) => (float[1,N] y) {
    dense = ai.onnx.ml.CastMap <map_form = "SPARSE", max_map = 10> (sparse)
    y = Relu (dense)
}
"""
SEQUENCE = """
<ir_version: 8, opset_import: ["" : 17]>
g (seq(float[N,4]) xs) => (float[M,4] y) {
    c = ConcatFromSequence <axis = 0> (xs)
    t = Transpose <perm = [1, 0]> (c)
    back = Transpose <perm = [1, 0]> (t)
    y = Relu (back)
}
"""


OPTIONAL = """
<ir_version: 8, opset_import: ["" : 18]>
g (optional(float[N,4]) maybe, float[N,4] x) => (float[N,4] y) {
    has = OptionalHasElement (maybe)
    y = If (has) <then_branch = t () => (float[N,4] a) { v = OptionalGetElement (maybe)
                                                       a = Add (v, x) },
                  else_branch = e () => (float[N,4] b) { b = Identity (x) }>
}
"""


def _save(tmp_path, text: str, name: str = "m.onnx"):
    path = tmp_path / name
    onnx.save(onnx.parser.parse_model(text), path)
    return path


def _invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_a_map_input_gets_its_dict_vectorizers_vocabulary() -> None:
    (feed,) = make_feeds(onnx.parser.parse_model(DICT_VECTORIZER))
    features = feed["features"]
    assert isinstance(features, dict) and list(features) == ["age", "income", "score"]
    assert all(isinstance(v, float) for v in features.values())
    assert describe(feed) == {"features": "map(3 keys, float64)"}
    assert fed_shape(features) == [3]


def test_a_map_read_by_another_op_gets_keys_of_its_type() -> None:
    (feed,) = make_feeds(onnx.parser.parse_model(CAST_MAP))
    assert sorted(feed["sparse"]) == list(range(8))


def test_optimize_checks_parity_on_a_map_input(tmp_path) -> None:
    source, out, report = _save(tmp_path, DICT_VECTORIZER), tmp_path / "o.onnx", tmp_path / "r"
    before = hashlib.sha256(source.read_bytes()).hexdigest()
    run = _invoke("optimize", source, out, "--no-speed-gate", "--report", report)
    assert run.exit_code == 0, run.output
    data = json.loads(report.read_text())
    assert data["parity"]["passed"] and data["parity"]["runs"][0]["features"].startswith("map(")
    assert len(onnx.load(out).graph.node) < 5  # the Identity nobody reads is gone
    assert hashlib.sha256(source.read_bytes()).hexdigest() == before


def test_an_optional_input_is_fed_present_and_both_branches_stay(tmp_path) -> None:
    (feed, _) = make_feeds(onnx.parser.parse_model(OPTIONAL))
    assert feed["maybe"].shape == feed["x"].shape and feed["maybe"].dtype.kind == "f"
    source, out = _save(tmp_path, OPTIONAL), tmp_path / "o.onnx"
    run = _invoke("optimize", source, out, "--no-speed-gate")
    assert run.exit_code == 0, run.output
    assert [n.op_type for n in onnx.load(out).graph.node] == ["OptionalHasElement", "If"]


@pytest.mark.parametrize("text, name, shape", [
    (DICT_VECTORIZER, "features", [3]),
    (SEQUENCE, "xs", None),
    (OPTIONAL, "maybe", [1, 4]),
])
def test_bench_and_profile_time_models_with_map_and_sequence_inputs(
        tmp_path, text, name, shape) -> None:
    source, out = _save(tmp_path, text), tmp_path / "o.onnx"
    assert _invoke("optimize", source, out, "--no-speed-gate").exit_code == 0
    bench = _invoke("bench", out, "--vs", source, "--runs", 5, "--warmup", 1, "--json")
    assert bench.exit_code == 0, bench.output
    fed = json.loads(bench.output)["input_shapes"][name]
    if shape is None:  # a sequence: its length, then its first tensor's shape
        assert fed[0] == 2 and len(fed) == 3 and fed[2] == 4
    else:
        assert fed == shape
    profile = _invoke("profile", source, "--runs", 5, "--warmup", 1, "--json")
    assert profile.exit_code == 0, profile.output
    assert json.loads(profile.output)["model"]["profiled"]["runs"] == 5


def test_an_array_given_for_a_map_input_is_refused_saying_what_it_takes(tmp_path) -> None:
    import numpy as np
    source = _save(tmp_path, DICT_VECTORIZER)
    np.savez(tmp_path / "in.npz", features=np.ones((1, 3), np.float32))
    run = _invoke("optimize", source, tmp_path / "o.onnx", "--inputs", tmp_path / "in.npz")
    assert run.exit_code == 1
    assert "'features' takes a map(str -> float32)" in run.output
    assert "Traceback" not in run.output and not (tmp_path / "o.onnx").exists()
