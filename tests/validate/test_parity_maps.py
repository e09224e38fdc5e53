"""Parity on a classifier's probabilities as a sequence of maps (ZipMap, as scikit-learn's,
LightGBM's and XGBoost's converters write them): the keys compared exactly, the values as
floats within tolerance, not whole maps compared for equality."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
from click.testing import CliRunner

from graphfix.cli import cli
from graphfix.validate.parity import check_parity, compare_output

CLASSIFIER = """
<ir_version: 8, opset_import: ["" : 17, "ai.onnx.ml" : 3]>
g (float[N,6] x) => (int64[N] label, seq(map(int64, float)) probabilities) {
    w = Constant <value = float[6,3] {0.1,-0.2,0.3,0.4,-0.5,0.6,0.7,0.8,-0.9,0.1,0.2,-0.3,
                                       -0.4,0.5,0.6,0.7,-0.8,0.9}> ()
    z = MatMul (x, w)
    p = SOFTMAX
    label = ArgMax <axis = 1, keepdims = 0> (p)
    probabilities = ai.onnx.ml.ZipMap <classlabels_int64s = [0, 1, 2]> (p)
}
"""
SOFTMAX = "Softmax <axis = 1> (z)"
# The same probabilities by another order of operations: equal up to float32 rounding.
WRITTEN_OUT = """Identity (q)
    e = Exp (z)
    one = Constant <value = int64[1] {1}> ()
    total = ReduceSum <keepdims = 1> (e, one)
    inverse = Reciprocal (total)
    q = Mul (e, inverse)"""


def _classifier(softmax: str = SOFTMAX, **replace: str) -> onnx.ModelProto:
    text = CLASSIFIER.replace("SOFTMAX", softmax)
    for old, new in replace.items():
        text = text.replace(old.replace("_", " "), new)
    return onnx.parser.parse_model(text)


def _probabilities(model: onnx.ModelProto, x: np.ndarray) -> list[dict]:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(["probabilities"], {"x": x})[0]


def test_map_values_within_float32_rounding_pass_and_a_changed_value_fails() -> None:
    reference = [{0: 0.25, 1: 0.5, 2: 0.25}]
    rounded = [{0: float(np.nextafter(np.float32(0.25), np.float32(1))), 1: 0.5, 2: 0.25}]
    assert rounded != reference  # the whole maps are not equal ...
    result = compare_output("probabilities", reference, rounded)
    assert result.passed, result.reason  # ... but their values are, within float32's tolerance
    assert result.dtype == "map of float32"
    wrong = compare_output("probabilities", reference, [{0: 0.26, 1: 0.49, 2: 0.25}])
    assert not wrong.passed and "max abs error" in wrong.reason


def test_map_keys_and_kinds_must_match() -> None:
    reference = [{0: 0.5, 1: 0.5}]
    renamed = compare_output("p", reference, [{0: 0.5, 2: 0.5}])
    assert not renamed.passed and "map keys differ" in renamed.reason and "[2]" in renamed.reason
    assert not compare_output("p", reference, [np.array([0.5, 0.5])]).passed
    strings = compare_output("p", [{"cat": 0.5, "dog": 0.5}], [{"cat": 0.5, "dog": 0.5}])
    assert strings.passed and strings.tolerance_used == 0


def test_float64_map_values_keep_float64_tolerance() -> None:
    reference = [{0: 0.1, 1: 0.9}]  # not float32 values: compared as float64
    assert not compare_output("p", reference, [{0: 0.1 + 1e-6, 1: 0.9}]).passed
    assert compare_output("p", reference, [{0: 0.1 + 1e-12, 1: 0.9}]).passed
    # the same difference between float32 values is float32 rounding
    single = [{0: float(np.float32(0.1)), 1: float(np.float32(0.9))}]
    moved = [{0: float(np.float32(0.1) + np.float32(1e-6)), 1: float(np.float32(0.9))}]
    assert compare_output("p", single, moved).passed


def test_parity_on_zipmap_outputs_allows_rounding_and_catches_a_wrong_model() -> None:
    original = _classifier()
    reordered = _classifier(WRITTEN_OUT)
    x = np.random.default_rng(0).standard_normal((64, 6)).astype(np.float32)
    assert _probabilities(original, x) != _probabilities(reordered, x)  # not bit-identical
    result = check_parity(original, reordered, feeds={"x": x})
    assert result.passed, result.describe()
    wrong = _classifier(**{"0.1,-0.2,0.3": "0.1,-0.2,0.35"})
    failed = check_parity(original, wrong, feeds={"x": x})
    assert not failed.passed and failed.worst.name in ("probabilities", "label")
    keys = _classifier(**{"[0, 1, 2]": "[0, 1, 5]"})
    moved = check_parity(original, keys, feeds={"x": x})
    assert not moved.passed and "map keys differ" in moved.describe()


def test_float16_is_kept_on_a_zipmap_classifier(tmp_path) -> None:
    source, out, report = tmp_path / "m.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(_classifier(), source)
    run = CliRunner().invoke(cli, ["optimize", str(source), str(out), "--precision", "fp16",
                                   "--no-speed-gate", "--report", str(report)],
                             catch_exceptions=False)
    assert run.exit_code == 0, run.output
    data = json.loads(report.read_text())
    assert data["parity"]["passed"]
    assert not data.get("left_out"), data.get("left_out")
    lowered = onnx.load(out)
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in lowered.graph.initializer) or any(
        n.op_type == "Cast" for n in lowered.graph.node)
