"""The profile and tune commands, and bench --config: one library call plus formatting."""

from __future__ import annotations

import json

import onnx
from click.testing import CliRunner

from graphfix.cli import cli
from graphfix.validate.session_config import SessionConfig
from graphfix.validate.timing import Settings
from models.sample import SAMPLE_PATH

FAST = ("--provider", "cpu", "--runs", "4", "--warmup", "1", "--threads", "1")


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_profile_prints_the_accounting_and_findings() -> None:
    result = invoke("profile", SAMPLE_PATH, *FAST, "--no-try")
    assert result.exit_code == 0, result.output
    assert "node times account for" in result.output
    assert "op types (ms per call):" in result.output
    # The sample is an IR-3 NHWC export: both of its problems are findings.
    assert "initializer-inputs" in result.output and "nhwc-transposes" in result.output


def test_profile_json_html_and_trace(tmp_path) -> None:
    page, trace = tmp_path / "p.html", tmp_path / "t.json"
    result = invoke("profile", SAMPLE_PATH, *FAST, "--json", "--html", page, "--trace", trace)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema"] == "graphfix.profile/1"
    measured = [f for f in data["findings"] if f["measured"]]
    assert measured, "the passes' fixes are measured unless --no-try"
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert any(e.get("name") == "model_run" for e in json.loads(trace.read_text()))


def test_profile_vs_shows_where_the_time_moved(tmp_path) -> None:
    from graphfix.passes import eliminate_transposes

    fixed = onnx.load(str(SAMPLE_PATH))
    eliminate_transposes(fixed)
    path = tmp_path / "fixed.onnx"
    onnx.save(fixed, str(path))
    result = invoke("profile", path, "--vs", SAMPLE_PATH, *FAST, "--no-try")
    assert result.exit_code == 0, result.output
    assert "where the time moved" in result.output
    assert "fixed.onnx vs sample_nhwc.onnx" in result.output


def test_profile_errors_are_one_line(tmp_path) -> None:
    missing = invoke("profile", tmp_path / "missing.onnx", *FAST)
    assert missing.exit_code == 1 and len(missing.output.strip().splitlines()) == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    refused = invoke("profile", SAMPLE_PATH, "--config", bad, "--runs", "2")
    assert refused.exit_code == 1 and "graphfix.tune/1" in refused.output
    assert invoke("profile", SAMPLE_PATH, "--runs", "0").exit_code == 2


def test_bench_config_applies_the_settings(tmp_path) -> None:
    path = tmp_path / "config.json"
    SessionConfig(Settings("cpu", 1, 4, False, False)).write(path)
    result = invoke("bench", SAMPLE_PATH, "--config", path, "--runs", "3", "--warmup", "1",
                    "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["dynamic_block_base"] == 4 and data["threads"] == 1
    clash = invoke("bench", SAMPLE_PATH, "--config", path, "--threads", "2", "--runs", "2")
    assert clash.exit_code == 1 and "configuration" in clash.output
