"""Reports: model facts, the JSON schema, the terminal summary, the inspection text."""

from __future__ import annotations

import json

import onnx

import graphfix
from graphfix.inspection import format_inspection
from graphfix.facts import model_facts, op_histogram
from graphfix.report import SCHEMA, format_summary
from graphfix.models.sample import SAMPLE_PATH

FUNCTION_MODEL = """
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[N,4] x) => (float[N,4] y) {
    a = local.Swish (x)
    y = local.Swish (a)
}
<domain: "local", opset_import: ["" : 17]>
Swish (x) => (y) {
    t = Sigmoid (x)
    y = Mul (t, x)
}"""


def test_facts_count_functions_once_and_name_dynamic_dims() -> None:
    facts = model_facts(onnx.parser.parse_model(FUNCTION_MODEL))
    assert facts.nodes == 4
    assert op_histogram(onnx.parser.parse_model(FUNCTION_MODEL)) == {
        "Mul": 1, "Sigmoid": 1, "local::Swish": 2}
    assert facts.dynamic_dims == ["N"]
    assert facts.inputs[0].shape == ["N", 4]


def test_the_json_report_has_its_schema(tmp_path) -> None:
    result = graphfix.optimize_file(SAMPLE_PATH, tmp_path / "out.onnx",
                                    report=tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["schema"] == SCHEMA
    for key in ("graphfix_version", "input", "output", "passes", "verify", "parity", "bench",
                "warnings", "seconds", "written", "error"):
        assert key in data
    assert data == json.loads(result.report.to_json())
    assert [p["name"] for p in data["passes"]] == list(graphfix.DEFAULT_PASSES)
    assert data["output"]["nodes"] < data["input"]["nodes"]


def test_the_summary_names_each_pass_and_the_parity_verdict(tmp_path) -> None:
    result = graphfix.optimize_file(SAMPLE_PATH, tmp_path / "out.onnx")
    text = format_summary(result.report)
    for name in graphfix.DEFAULT_PASSES:
        assert name in text
    assert "parity: passed" in text and "wrote" in text


def test_the_inspection_text() -> None:
    text = format_inspection(graphfix.inspect(SAMPLE_PATH).to_dict())
    assert "IR 3" in text and "initializers listed as inputs: 20" in text
    assert "graphfix would" in text and "fold-shapes" in text


def test_a_share_far_past_the_whole_reads_as_a_multiple() -> None:
    from graphfix.report import percent

    assert percent(0.004) == "0.4%" and percent(1.5) == "150.0%"
    assert percent(21394.111) == "2.14e+04x" and percent("-") == "-"
